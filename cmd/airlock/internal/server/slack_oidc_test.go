package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/cmd/airlock/internal/server"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/slackapp"
	"github.com/airlockhq/airlock/store"
)

// oidcPolicy routes refunds to payments, whose members come from sign-in
// only (the identity provider's groups claim).
const oidcPolicy = `groups:
  payments: []
rules:
  - {name: refunds, match: 'request.tool == "refund"', action: ask, reviewers: payments}
`

// TestSlackOIDCReviewer: a Slack user linked to an OIDC principal decides
// as that principal while they are an active reviewer (signed in since an
// admin last ended their sessions), with the groups of their sign-in: a
// request routed to payments is refused to an OIDC reviewer outside it and
// decided by one in it; after an admin ends their sessions their clicks
// are refused until they sign in again.
func TestSlackOIDCReviewer(t *testing.T) {
	t.Parallel()
	onEachStore(t, testOIDCReviewer)
}

func testOIDCReviewer(t *testing.T, db store.Store) {
	pol, err := policy.NewEngine(testkit.TempFile(t, "policy.yaml", oidcPolicy), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, db, func(c *server.Config) { c.Policy = pol })
	ctx := context.Background()
	const ada, bea = "oidc:https://id.example.com#ada-1815", "oidc:https://id.example.com#bea-1900"
	signIn := func(principal, name string, groups ...string) {
		t.Helper()
		_, err := db.CreateWebSession(ctx, store.NewWebSessionParams{ID: "session-" + strings.Repeat(name, 4) + time.Now().Format("150405.000000"),
			Reviewer: &airlock.ReviewerIdentity{Principal: principal, Name: name, Groups: groups},
			CSRF:     "csrf-token-of-" + name, Idle: time.Hour, Max: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
	}
	agent := s.token(t, "agent", "agent", "alice")
	s.link(t, ada, "U0ADA")
	s.link(t, bea, "U0BEA")
	inst := s.call(t, "POST", "/v1/instances", agent, `{"name":"laptop"}`).Str("id")
	create := func(key string) string {
		t.Helper()
		r := s.call(t, "POST", "/v1/instances/"+inst+"/approval-requests", agent, `{"tool":"refund","arguments":{"amount":10},"timeout":"10m"}`, "Idempotency-Key", key)
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Raw)
		}
		return r.Str("id")
	}
	click := func(user, id string) string {
		t.Helper()
		r := s.signed(t, interaction(user, slackapp.ActionApprove, id, ""))
		if r.Status != http.StatusOK {
			t.Fatalf("click of %s: %d %s", user, r.Status, r.Raw)
		}
		return r.Str("text")
	}
	r1 := create("k1")
	if got := click("U0ADA", r1); !strings.Contains(got, "has not signed in") {
		t.Fatalf("a linked OIDC principal that never signed in: %q", got)
	}
	signIn(ada, "Ada", "payments")
	signIn(bea, "Bea", "support")
	if got := click("U0BEA", r1); !strings.Contains(got, "is for payments") {
		t.Fatalf("an OIDC reviewer outside payments: %q", got)
	}
	if got := click("U0ADA", r1); !strings.HasPrefix(got, "Approved") {
		t.Fatalf("Ada's click: %q", got)
	}
	got := s.call(t, "GET", "/v1/approval-requests/"+r1, adminSecret, "")
	if got.Str("state") != "approved" || got.Str("decision.decided_by") != ada || got.Str("decision.decided_by_name") != "Ada" {
		t.Fatalf("r1 after Ada's click: %s", got.Raw)
	}

	r2 := create("k2")
	if r := s.call(t, "POST", "/v1/reviewers/end-sessions", adminSecret, `{"principal":"`+ada+`"}`); r.Status != http.StatusOK {
		t.Fatalf("end-sessions: %d %s", r.Status, r.Raw)
	}
	if got := click("U0ADA", r2); !strings.Contains(got, "ended the sessions") {
		t.Fatalf("Ada's click after an admin ended her sessions: %q", got)
	}
	if st := s.state(t, r2, adminSecret); st != "pending" {
		t.Fatalf("r2 after the refused click is %s", st)
	}
	signIn(ada, "Ada", "payments")
	if got := click("U0ADA", r2); !strings.HasPrefix(got, "Approved") {
		t.Fatalf("Ada's click after signing in again: %q", got)
	}
}
