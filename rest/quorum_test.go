package rest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/policy"
)

// quorumPolicy routes payments to the payments group, two approvals
// needed; carol (the bundle's reviewer) and erin are in it.
const quorumPolicy = `groups:
  payments: [carol, erin]
rules:
  - {name: payments, match: 'request.tool == "issue_refund"', action: ask, reviewers: payments, approvals: 2}
`

func withPolicy(t testing.TB, src string) func(*options) {
	t.Helper()
	e, err := policy.NewEngine(testkit.TempFile(t, "policy.yaml", src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(o *options) { o.policy = e }
}

// TestQuorumOverREST: a request a rule routes to a group, needing two
// approvals, shows who it is for and its votes; a non-member is refused
// with the group named, a second vote is refused, and the second member's
// approval decides it with both votes.
func TestQuorumOverREST(t *testing.T) {
	t.Parallel()
	b := setup(t, withPolicy(t, quorumPolicy))
	ctx := context.Background()
	mint := func(name, principal string) string {
		_, secret, err := b.svc.CreateToken(ctx, b.callers["admin"], airlock.NewTokenInput{Name: name, Role: airlock.RoleReviewer, Principal: principal})
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	erin, frank := mint("Erin", "erin"), mint("Frank", "frank")
	_, id := b.pending(t, "10m")
	decide := func(token, status string) resp {
		return b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: token, body: `{"status":"` + status + `","note":"ok"}`})
	}

	r := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id, token: frank})
	want(t, r, http.StatusOK, "")
	m := r.obj(t)
	if rv, _ := m["reviewers"].([]any); len(rv) != 1 || rv[0] != "payments" || m["approvals"] != float64(2) {
		t.Fatalf("pending request: reviewers %v, approvals %v; want [payments], 2", m["reviewers"], m["approvals"])
	}

	r = decide(frank, "denied")
	want(t, r, http.StatusForbidden, airlock.CodeForbidden)
	if msg := r.obj(t)["detail"].(string); !strings.Contains(msg, "is for payments") {
		t.Fatalf("refusal %q does not name the group", msg)
	}

	r = decide(b.reviewer, "approved")
	want(t, r, http.StatusOK, "")
	m = r.obj(t)
	if votes, _ := m["votes"].([]any); m["state"] != "pending" || len(votes) != 1 || m["decision"] != nil {
		t.Fatalf("after one vote: %s", r.body)
	}
	vote := m["votes"].([]any)[0].(map[string]any)
	if vote["principal"] != "carol" || vote["name"] != "reviewer" || vote["status"] != "approved" || vote["note"] != "ok" {
		t.Fatalf("vote = %v", vote)
	}

	r = decide(b.reviewer, "approved")
	want(t, r, http.StatusForbidden, airlock.CodeForbidden)
	if msg := r.obj(t)["detail"].(string); !strings.Contains(msg, "carol has already voted") {
		t.Fatalf("second vote refused with %q", msg)
	}

	r = decide(erin, "approved")
	want(t, r, http.StatusOK, "")
	m = r.obj(t)
	d, _ := m["decision"].(map[string]any)
	if m["state"] != "approved" || d == nil || len(d["votes"].([]any)) != 2 || d["decided_by_name"] != "Erin" {
		t.Fatalf("after the second vote: %s", r.body)
	}
}
