package inbox

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/postgres"
)

// TestSessionsAcrossReplicas: two inbox servers over one PostgreSQL
// database, as replicas behind a load balancer without sticky sessions. A
// sign-in on one is served by the other, a decision's message shows on
// whichever serves the next page, and a sign-out or a revocation on one
// ends the session on the other at its next request.
func TestSessionsAcrossReplicas(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "inbox_")
	open := func(t testing.TB, _ airlock.Clock) airlock.Store {
		s, err := postgres.Open(context.Background(), testkit.PostgresURL(t), postgres.WithSchema(schema))
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		return s
	}
	a := setup(t, func(o *options) { o.openStore = open })
	b := setup(t, func(o *options) { o.openStore = open })

	// One browser: its cookies (host-wide, whatever the port) go to both.
	ca := a.newClient(t)
	cb := b.newClient(t)
	cb.client.Jar = ca.client.Jar
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin"}

	token := ca.signin(t, a.reviewer)
	home := cb.do(t, "GET", "/", nil, nil)
	if home.status != http.StatusOK || !strings.Contains(home.body, "Carol (reviewer)") {
		t.Fatalf("replica B, signed in on A: %d", home.status)
	}
	if got := csrf(t, home.body); got != token {
		t.Fatalf("replica B's forms carry CSRF token %q, A's %q: not the session's one", got, token)
	}

	// A decision on B with the form of A's page; its message on A.
	id := a.toolCall(t, a.instance(t, "adapter"), "ls", map[string]any{}, "")
	if r := cb.do(t, "POST", "/requests/"+id+"/decide", url.Values{"action": {"approve"}, "csrf": {token}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("decide on B: %d\n%s", r.status, r.body)
	}
	if s := a.get(t, id).State; s != airlock.StateApproved {
		t.Fatalf("state %s, want approved", s)
	}
	if page := ca.do(t, "GET", "/requests/"+id, nil, nil).body; !strings.Contains(page, "Approved.</strong>") {
		t.Fatalf("A's page after B recorded the decision does not say so:\n%s", page)
	}

	// Sign-out on B ends the session on A.
	if r := cb.do(t, "POST", "/signout", url.Values{"csrf": {token}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("sign-out on B: %d", r.status)
	}
	if r := ca.do(t, "GET", "/", nil, nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/signin" {
		t.Fatalf("A after sign-out on B: %d %q", r.status, r.header.Get("Location"))
	}

	// Revocation through A ends the session on B.
	ca.signin(t, a.reviewer)
	if r := cb.do(t, "GET", "/", nil, nil); r.status != http.StatusOK {
		t.Fatalf("B after a new sign-in on A: %d", r.status)
	}
	if _, err := a.svc.RevokeToken(context.Background(), a.callers["admin"], a.callers["Carol (reviewer)"].ID); err != nil {
		t.Fatal(err)
	}
	if r := cb.do(t, "GET", "/", nil, nil); r.status != http.StatusSeeOther || r.header.Get("Location") != "/signin?why=revoked" {
		t.Fatalf("B after revocation on A: %d %q", r.status, r.header.Get("Location"))
	}
	if r := ca.do(t, "GET", "/", nil, nil); r.status != http.StatusSeeOther {
		t.Fatalf("A after revocation: %d", r.status)
	}
}
