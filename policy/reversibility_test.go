package policy

import (
	"testing"

	"github.com/airlockhq/airlock"
)

// TestMatchReversibility: a rule matches the adapter's claimed
// reversibility (request.reversibility), "" when it claimed none.
func TestMatchReversibility(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `
rules:
  - name: irreversible needs two
    match: request.reversibility == "irreversible"
    action: ask
    approvals: 2
    reviewers: ops
  - name: reversible reads are fine
    match: request.tool == "read_file" && request.reversibility == "reversible"
    action: allow
groups:
  ops: [ada, bob]
`)
	for _, tc := range []struct {
		rev, tool, rule string
		action          Action
	}{
		{airlock.Irreversible, "drop_table", "irreversible needs two", ActionAsk},
		{"reversible", "read_file", "reversible reads are fine", ActionAllow},
		{"", "read_file", "", ActionAsk},
		{"partial", "drop_table", "", ActionAsk},
	} {
		in := toolCall(tc.tool, `{}`)
		in.Request.Reversibility = tc.rev
		out := s.Decide(t.Context(), in)
		if out.Rule != tc.rule || out.Action != tc.action {
			t.Errorf("reversibility %q, tool %s: rule %q action %s; want %q %s", tc.rev, tc.tool, out.Rule, out.Action, tc.rule, tc.action)
		}
	}
}
