package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/airlockhq/airlock"
)

// grant makes a grant of the reviewer's on a fresh instance of agent A's,
// through the service, and returns its ID.
func (b *bundle) grant(t *testing.T) string {
	t.Helper()
	inst, _ := b.pending(t, "10m")
	g, err := b.svc.CreateGrant(context.Background(), b.callers["reviewer"], airlock.GrantInput{
		Tool: "issue_refund", Arguments: json.RawMessage(`{"amount":4900}`), InstanceID: inst, ExpiresIn: "1h",
	})
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	return g.ID
}

// TestGrantOverREST: an approval with a grant answers the grant; the next
// same call is created approved by it (201, decided_by grant:<id>); the
// grants list shows its uses left; a revoked grant approves nothing more;
// the audit log names the grant.
func TestGrantOverREST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	call := `{"tool":"issue_refund","arguments":{"amount":4900,"currency":"GBP"}}`
	first := b.create(t, b.agentA, inst, "k1", call)
	want(t, first, http.StatusCreated, "")
	id := first.obj(t)["id"].(string)

	d := b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer,
		body: `{"status":"approved","grant":{"uses":2,"expires_in":"1h","match":"same_arguments"}}`})
	want(t, d, http.StatusOK, "")
	g, _ := d.obj(t)["grant"].(map[string]any)
	if g == nil || g["uses_left"] != 2.0 || g["request_id"] != id || g["instance_id"] != inst || g["state"] != "live" {
		t.Fatalf("decision answered grant %v", d.obj(t)["grant"])
	}
	gid := g["id"].(string)

	second := b.create(t, b.agentA, inst, "k2", call)
	want(t, second, http.StatusCreated, "")
	dec, _ := second.obj(t)["decision"].(map[string]any)
	if second.obj(t)["state"] != "approved" || dec["decided_by"] != "grant:"+gid || dec["decided_by_name"] != "grant:"+gid {
		t.Fatalf("second call: %s", second.body)
	}

	list := b.do(t, req{method: "GET", path: "/v1/grants?state=live&tool=issue_refund", token: b.reviewer})
	want(t, list, http.StatusOK, "")
	items := list.obj(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["uses_left"] != 1.0 {
		t.Fatalf("live grants: %s", list.body)
	}
	want(t, b.do(t, req{method: "GET", path: "/v1/grants?state=nope", token: b.reviewer, invalid: true}), http.StatusBadRequest, airlock.CodeInvalidRequest)

	rv := b.do(t, req{method: "DELETE", path: "/v1/grants/" + gid, token: b.admin})
	want(t, rv, http.StatusOK, "")
	if rv.obj(t)["state"] != "revoked" {
		t.Fatalf("revoked: %s", rv.body)
	}
	third := b.create(t, b.agentA, inst, "k3", call)
	want(t, third, http.StatusCreated, "")
	if third.obj(t)["state"] != "pending" {
		t.Fatalf("after revocation: %s", third.body)
	}
	want(t, b.do(t, req{method: "GET", path: "/v1/grants/grt_missing", token: b.reviewer}), http.StatusNotFound, airlock.CodeNotFound)

	evs, err := b.store.ListEvents(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range evs {
		if e.Subject == gid || e.Actor == "grant:"+gid {
			seen = append(seen, string(e.Type))
		}
	}
	if len(seen) != 3 || seen[0] != "grant.created" || seen[1] != "request.approved" || seen[2] != "grant.revoked" {
		t.Fatalf("events naming the grant: %v", seen)
	}
}

// TestCreateGrantOverREST: POST /v1/grants answers 201 with a Location;
// refusals are problems naming the field.
func TestCreateGrantOverREST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	r := b.do(t, req{method: "POST", path: "/v1/grants", token: b.reviewer,
		body: `{"tool":"issue_refund","match":"request.arguments.amount < 5000","agent":"` + b.callers["agentA"].ID + `","uses":5,"expires_in":"30m","valid_for":"1m"}`})
	want(t, r, http.StatusCreated, "")
	o := r.obj(t)
	if r.header.Get("Location") != "/v1/grants/"+o["id"].(string) || o["match"] != "request.arguments.amount < 5000" ||
		o["agent"] != b.callers["agentA"].ID || o["uses"] != 5.0 || o["valid_for"] != "1m0s" {
		t.Fatalf("created grant: %s", r.body)
	}
	small := b.create(t, b.agentA, inst, "s1", `{"tool":"issue_refund","arguments":{"amount":100}}`)
	if small.obj(t)["state"] != "approved" {
		t.Fatalf("a call the expression matches: %s", small.body)
	}
	want(t, b.do(t, req{method: "POST", path: "/v1/grants", token: b.reviewer,
		body: `{"tool":"issue_refund","arguments":{},"instance_id":"` + inst + `"}`, invalid: true}), http.StatusBadRequest, airlock.CodeInvalidRequest)
	want(t, b.do(t, req{method: "POST", path: "/v1/grants", token: b.reviewerA,
		body: `{"tool":"issue_refund","arguments":{},"instance_id":"` + inst + `","expires_in":"1h"}`}), http.StatusForbidden, airlock.CodeForbidden)
}
