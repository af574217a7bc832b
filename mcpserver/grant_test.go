package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// A request a grant approved tells the agent so: decision.decidedBy names
// the grant, and next says no person saw it. A reviewer's own decision
// keeps its token ID from the agent.
func TestGrantDecisionTold(t *testing.T) {
	t.Parallel()
	now := epoch
	exp := now.Add(time.Minute)
	r := airlock.Request{ID: "apr_x", State: airlock.StateApproved, Kind: airlock.KindToolCall, Tool: "t",
		CreatedAt: now, DeadlineAt: now.Add(time.Hour),
		Decision: &airlock.Decision{Status: airlock.StateApproved, DecidedAt: now, DecidedBy: "grant:grt_abc",
			DecidedByName: "grant:grt_abc", ExpiresAt: &exp}}
	out := newApprovalOut(r)
	if out.Decision.DecidedBy != "grant:grt_abc" || !strings.Contains(out.Next, "standing grant approved it") {
		t.Fatalf("decidedBy %q, next %q", out.Decision.DecidedBy, out.Next)
	}
	r.Decision.DecidedBy, r.Decision.DecidedByName = "tok_reviewer", "Bob"
	out = newApprovalOut(r)
	if out.Decision.DecidedBy != "" || strings.Contains(out.Next, "grant") {
		t.Fatalf("a reviewer's decision: decidedBy %q, next %q", out.Decision.DecidedBy, out.Next)
	}
}
