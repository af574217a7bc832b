package replicas

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// TestRevocationAcrossReplicas: a token revoked on one replica stops at
// once on another that has seen it and remembers it (a PostgreSQL replica
// checks a remembered token with the call's first statement, not with a
// lookup of its own). Every kind of call is refused with 401: writes,
// reads, and calls the endpoint would refuse before reaching the store (a
// forbidden endpoint, an invalid body), which must not tell a revoked
// token 403 or 400. A refused call changes nothing, and a live token on
// the same replica goes on working.
func TestRevocationAcrossReplicas(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 2)
	a, b := cl.replicas[0].URL, cl.replicas[1].URL
	mint := func(role string) (id, secret string) {
		t.Helper()
		r := cl.c.call(t, "POST", b, "/v1/tokens", adminToken, fmt.Sprintf(`{"name":"revoked %s","role":%q}`, role, role))
		if !r.want(t, 201, "mint "+role) {
			t.FailNow()
		}
		return r.Str("id"), r.Str("secret")
	}
	agentID, agent := mint("agent")
	reviewerID, reviewer := mint("reviewer")
	r := cl.c.call(t, "POST", a, "/v1/instances", agent, `{"name":"revoked"}`)
	if !r.want(t, 201, "register") {
		t.FailNow()
	}
	inst := r.Str("id")
	create := "/v1/instances/" + inst + "/approval-requests"

	// Replica a sees both tokens, more than once.
	r = cl.c.call(t, "POST", a, create, agent, `{"tool":"pay","arguments":{"n":1}}`, "Idempotency-Key", "before")
	if !r.want(t, 201, "create before the revocation") {
		t.FailNow()
	}
	id := r.Str("id")
	for _, tok := range []string{agent, reviewer, agent, reviewer} {
		cl.c.call(t, "GET", a, "/v1/approval-requests/"+id, tok, "").want(t, 200, "read before the revocation")
	}

	for _, tok := range []string{agentID, reviewerID} {
		if r := cl.c.call(t, "DELETE", b, "/v1/tokens/"+tok, adminToken, ""); r.Status/100 != 2 {
			t.Fatalf("revoke %s on replica b: %d %s", tok, r.Status, r.Raw)
		}
	}

	calls := []struct{ what, method, path, token, body string }{
		{"create", "POST", create, agent, `{"tool":"pay","arguments":{"n":2}}`},
		{"read", "GET", "/v1/approval-requests/" + id, agent, ""},
		{"list", "GET", "/v1/approval-requests", reviewer, ""},
		{"approve", "POST", "/v1/approval-requests/" + id + "/decision", reviewer, `{"status":"approved"}`},
		{"deny", "POST", "/v1/approval-requests/" + id + "/decision", reviewer, `{"status":"denied"}`},
		{"cancel", "POST", "/v1/approval-requests/" + id + "/cancel", agent, ""},
		{"an instance", "GET", "/v1/instances/" + inst, agent, ""},
		{"a forbidden endpoint", "GET", "/v1/tokens", agent, ""},
		{"a decision by an agent", "POST", "/v1/approval-requests/" + id + "/decision", agent, `{"status":"approved"}`},
		{"an invalid body", "POST", create, agent, `{"tool":""}`},
		{"an invalid decision", "POST", "/v1/approval-requests/" + id + "/decision", reviewer, `{"status":"maybe"}`},
	}
	for _, c := range calls {
		r := cl.c.call(t, c.method, a, c.path, c.token, c.body, "Idempotency-Key", "after-"+c.what)
		if r.Status != 401 || r.Str("code") != string(airlock.CodeUnauthorized) {
			t.Errorf("%s on replica a after the revocation: %d %s, want 401 unauthorized", c.what, r.Status, r.Raw)
		}
		if r.Header.Get("Location") != "" {
			t.Errorf("%s: the 401 carries the endpoint's Location %q", c.what, r.Header.Get("Location"))
		}
	}

	s := cl.store(t)
	got, err := s.GetRequest(context.Background(), id)
	if err != nil || got.State != airlock.StatePending {
		t.Errorf("the request after refused calls: %s, %v; want still pending", got.State, err)
	}
	all, _, err := s.ListRequests(context.Background(), store.RequestFilter{})
	if err != nil || len(all) != 1 {
		t.Errorf("%d requests after a refused create (%v), want 1", len(all), err)
	}

	// A live token on the same replica is unaffected, seen before or not.
	cl.c.call(t, "GET", a, "/v1/approval-requests/"+id, cl.reviewer, "").want(t, 200, "a live reviewer's read")
	cl.c.call(t, "GET", a, "/v1/approval-requests/"+id, cl.reviewer, "").want(t, 200, "a live reviewer's second read")
	fresh := cl.c.mintToken(t, b, "reviewer")
	for range 2 {
		cl.c.call(t, "GET", a, "/v1/approval-requests/"+id, fresh, "").want(t, 200, "a new reviewer's read")
	}
}

// TestLongPollOfTokenRevokedOnAnotherReplica: a long-poll parked on
// replica b answers 401 unauthorized within a second of its token's
// revocation on replica a (the change feed carries the token's ID), while
// a long-poll of another token on the same request goes on waiting and
// hears the decision.
func TestLongPollOfTokenRevokedOnAnotherReplica(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 2)
	a, b := cl.replicas[0].URL, cl.replicas[1].URL
	r := cl.c.call(t, "POST", a, "/v1/tokens", adminToken, `{"name":"revoked while waiting","role":"agent"}`)
	if !r.want(t, 201, "mint") {
		t.FailNow()
	}
	agentID, agent := r.Str("id"), r.Str("secret")
	r = cl.c.call(t, "POST", a, "/v1/instances", agent, `{"name":"revoked while waiting"}`)
	if !r.want(t, 201, "register") {
		t.FailNow()
	}
	r = cl.c.call(t, "POST", a, "/v1/instances/"+r.Str("id")+"/approval-requests", agent,
		`{"tool":"pay","arguments":{},"timeout":"1h"}`, "Idempotency-Key", "revoked-while-waiting")
	if !r.want(t, 201, "create") {
		t.FailNow()
	}
	id := r.Str("id")

	revoked := cl.longPollAs(t, b, id, agent, 1)
	other := cl.longPollAs(t, b, id, cl.reviewer, 2)
	if r := cl.c.call(t, "DELETE", a, "/v1/tokens/"+agentID, adminToken, ""); !r.want(t, 200, "revoke on replica a") {
		t.FailNow()
	}
	revokedAt := time.Now()
	select {
	case p := <-revoked:
		if p.err != nil || p.r.Status != 401 || p.r.Str("code") != string(airlock.CodeUnauthorized) {
			t.Fatalf("the revoked token's long-poll on replica b answered %v %d %s; want 401 unauthorized", p.err, p.r.Status, p.r.Raw)
		}
		t.Logf("the long-poll on replica b answered 401 %s after the revocation on replica a", p.at.Sub(revokedAt))
	case <-time.After(time.Second):
		t.Fatalf("the long-poll on replica b of a token revoked on replica a a second ago has not answered:\n%s", cl.outputs())
	}

	cl.awaitWaiters(t, b, 1) // the other token's long-poll still waits
	cl.c.call(t, "POST", a, "/v1/approval-requests/"+id+"/decision", cl.reviewer, `{"status":"denied"}`).want(t, 200, "decide")
	select {
	case p := <-other:
		if p.err != nil || p.r.Status != 200 || p.r.Str("state") != "denied" {
			t.Fatalf("the live token's long-poll answered %v %d %s; want denied", p.err, p.r.Status, p.r.Raw)
		}
	case <-time.After(heardWithin):
		t.Fatalf("the live token's long-poll did not hear the decision within %s", heardWithin)
	}
}
