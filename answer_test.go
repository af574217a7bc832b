package airlock_test

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestCheckAsked checks the answer to an ask is believed only when it is
// the call: same tool, same arguments as JSON values, and arguments still
// there to compare.
func TestCheckAsked(t *testing.T) {
	t.Parallel()
	args := []byte(`{"b":2,"a":1}`)
	for _, tc := range []struct {
		name           string
		id, tool       string
		got            []byte
		purged         bool
		wantErrContain string
	}{
		{name: "same call, keys reordered", id: "req_1", tool: "pay", got: []byte(`{"a":1,"b":2}`)},
		{name: "no id", tool: "pay", got: args, wantErrContain: "names no request"},
		{name: "other tool", id: "req_1", tool: "refund", got: args, wantErrContain: `not "pay"`},
		{name: "other arguments", id: "req_1", tool: "pay", got: []byte(`{"a":1,"b":3}`), wantErrContain: "arguments are not the call's"},
		{name: "purged", id: "req_1", tool: "pay", purged: true, wantErrContain: "retention has purged"},
	} {
		err := airlock.CheckAsked("pay", args, tc.id, tc.tool, tc.got, tc.purged)
		switch {
		case tc.wantErrContain == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErrContain != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrContain)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErrContain)
		}
	}
}
