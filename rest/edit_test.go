package rest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestEditOverREST (T37): an approval with arguments denies the original,
// naming its replacement, and approves a new request with the reviewer's
// exact bytes; the agent can claim only the replacement, and its approval
// token holds a tool server to the edited arguments, never the original
// ones. Agents never edit; commands and questions are never edited.
func TestEditOverREST(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var opts []func(*options)
			if pg {
				opts = append(opts, func(o *options) { o.postgres = true })
			}
			testEdit(t, setup(t, opts...))
		})
	}
}

func testEdit(t *testing.T, b *bundle) {
	_, id := b.pending(t, "10m")
	edited := `{"amount": 1200,  "reason":"partial"}`
	decide := func(token, body string) resp {
		return b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: token, body: body})
	}

	// An agent never edits, its own request or another's.
	for _, tok := range []string{b.agentA, b.agentB} {
		want(t, decide(tok, `{"status":"approved","arguments":`+edited+`}`), http.StatusForbidden, airlock.CodeForbidden)
	}
	want(t, decide(b.reviewer, `{"status":"denied","arguments":`+edited+`}`), http.StatusBadRequest, airlock.CodeInvalidRequest)
	want(t, b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer,
		body: `{"status":"approved","arguments":[1]}`, invalid: true}), http.StatusBadRequest, airlock.CodeInvalidRequest)
	if got := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id, token: b.reviewer}).obj(t); got["state"] != "pending" {
		t.Fatalf("after refused edits the request is %v", got["state"])
	}

	r := decide(b.reviewer, `{"status":"approved","note":"refund part of it","valid_for":"2m","arguments":`+edited+`}`)
	want(t, r, http.StatusOK, "")
	m := r.obj(t)
	d, _ := m["decision"].(map[string]any)
	rep, _ := m["replacement"].(map[string]any)
	if m["state"] != "denied" || d == nil || rep == nil || d["replaced_by"] != rep["id"] || d["note"] != "refund part of it" {
		t.Fatalf("edit answered %s; want the original denied, replaced_by the replacement", r.body)
	}
	newID := rep["id"].(string)
	if rep["state"] != "approved" || rep["derived_from"] != id || rep["tool"] != "issue_refund" || rep["deadline_at"] != m["deadline_at"] {
		t.Fatalf("replacement = %v", rep)
	}
	got := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + newID, token: b.agentA})
	want(t, got, http.StatusOK, "")
	if !strings.Contains(string(got.body), `"arguments":`+edited) {
		t.Fatalf("the replacement's arguments are not the reviewer's bytes: %s", got.body)
	}

	// The original never runs; the replacement runs once, held to its bytes.
	claim := func(rid string) resp {
		return b.do(t, req{method: "POST", path: "/v1/approval-requests/" + rid + "/execution", token: b.agentA})
	}
	c := claim(id)
	want(t, c, http.StatusConflict, airlock.CodeNotApproved)
	if !strings.Contains(string(c.body), newID) {
		t.Fatalf("the claim on the original does not name the replacement: %s", c.body)
	}
	c = claim(newID)
	want(t, c, http.StatusOK, "")
	token := c.obj(t)["execution"].(map[string]any)["approval_token"].(string)
	orig := b.consume(t, token, "issue_refund", `{"amount":4900}`, "")
	want(t, orig, http.StatusBadRequest, airlock.CodeInvalidToken)
	if reason := orig.obj(t)["reason"]; reason != "arguments" {
		t.Fatalf("consume with the original arguments: reason %v; want arguments", reason)
	}
	want(t, b.consume(t, token, "issue_refund", `{"reason":"partial","amount":1200}`, ""), http.StatusOK, "")

	// Decided is decided: a second edit loses as a decision does.
	want(t, decide(b.reviewer, `{"status":"approved","arguments":{"amount":1}}`), http.StatusConflict, airlock.CodeNotPending)
}
