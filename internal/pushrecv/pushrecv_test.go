package pushrecv

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestCheckMessage: a push is exactly {request_id, tool, deadline_at},
// each set; anything more (arguments, reasoning, context, a note) or less
// is refused, naming what it carried.
func TestCheckMessage(t *testing.T) {
	t.Parallel()
	const ok = `{"request_id":"apr_1","tool":"payments.refund","deadline_at":"2026-12-06T18:00:00Z"}`
	if id, err := CheckMessage([]byte(ok)); err != nil || id != "apr_1" {
		t.Fatalf("CheckMessage(%s) = %q, %v", ok, id, err)
	}
	for _, tc := range []struct{ plain, want string }{
		{`{"request_id":"apr_1","tool":"t","deadline_at":"2026-12-06T18:00:00Z","arguments":{"amount":1}}`, "arguments"},
		{`{"request_id":"apr_1","tool":"t","deadline_at":"2026-12-06T18:00:00Z","agent_reasoning":"x"}`, "agent_reasoning"},
		{`{"request_id":"apr_1","tool":"t","deadline_at":"2026-12-06T18:00:00Z","context":{}}`, "context"},
		{`{"request_id":"apr_1","tool":"t"}`, "lacks"},
		{`{"request_id":"","tool":"t","deadline_at":"2026-12-06T18:00:00Z"}`, "lacks"},
		{`not json`, "not a JSON object"},
	} {
		if _, err := CheckMessage([]byte(tc.plain)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckMessage(%s) = %v, want an error naming %q", tc.plain, err, tc.want)
		}
	}
}
