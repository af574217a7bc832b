package policy

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// The provider's compiler of grant expressions: an expression compiles in
// the rules' language and matches what it says, a bad one is refused with
// the reason, and an expression compiled before is not compiled again.
func TestExpressions(t *testing.T) {
	t.Parallel()
	var x Expressions
	var _ airlock.GrantExpressions = &x
	const small = `request.arguments.amount < 5000 && agent.principal == "alice"`
	e, err := x.Compile(small)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args string
		want bool
	}{{`{"amount":100}`, true}, {`{"amount":9900}`, false}} {
		if ok, err := e.Matches(t.Context(), toolCall("refund", tc.args)); ok != tc.want || err != nil {
			t.Errorf("%s matched %v (%v), want %v", tc.args, ok, err, tc.want)
		}
	}
	if again, _ := x.Compile(small); again != e {
		t.Error("the same expression compiled twice; want the one compiled before")
	}
	if _, err := x.Compile(`request.arguments.amount <`); err == nil {
		t.Error("an expression that does not parse compiled")
	}
	if _, err := x.Compile(`request.tool`); err == nil || !strings.Contains(err.Error(), "bool") {
		t.Errorf("an expression that is no boolean: %v, want an error saying so", err)
	}
}
