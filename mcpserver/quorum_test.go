package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestApprovalOutQuorum: the agent reads who a request is for, how many
// approvals it needs and the votes so far; once decided, decision.votes.
func TestApprovalOutQuorum(t *testing.T) {
	t.Parallel()
	at := epoch
	ada := airlock.Vote{Principal: "ada", Name: "Ada", Actor: "tok_ada", Status: airlock.StateApproved, Note: "ok", At: at}
	r := airlock.Request{ID: "apr_q", State: airlock.StatePending, Kind: airlock.KindAgentRequest, CreatedAt: at, DeadlineAt: at.Add(time.Hour),
		Reviewers: []string{"payments"}, Approvals: 2, Votes: []airlock.Vote{ada}}
	js, err := json.Marshal(newApprovalOut(r))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"reviewers":["payments"]`, `"approvalsRequired":2`,
		`"votes":[{"principal":"ada","name":"Ada","status":"approved","note":"ok","at":"2030-03-04T05:06:07Z"}]`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("pending output lacks %s: %s", want, js)
		}
	}
	if strings.Contains(string(js), "tok_ada") {
		t.Errorf("the output shows the reviewer's token ID: %s", js)
	}
	r.State = airlock.StateApproved
	r.Votes = append(r.Votes, airlock.Vote{Principal: "grace", Name: "Grace", Status: airlock.StateApproved, At: at})
	r.Decision = &airlock.Decision{Status: airlock.StateApproved, DecidedAt: at, DecidedBy: "tok_grace", DecidedByName: "Grace", ExpiresAt: new(at.Add(time.Minute))}
	out := newApprovalOut(r)
	if out.Decision == nil || len(out.Decision.Votes) != 2 || out.Decision.Votes[1].Name != "Grace" {
		t.Fatalf("decided output: %+v", out.Decision)
	}
}
