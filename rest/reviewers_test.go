package rest

import (
	"net/http"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestReviewersAPI: admins list reviewer principals and link them; bad
// links are refused; one Slack user links one principal; clearing both
// fields removes the link.
func TestReviewersAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, req{method: "PUT", path: "/v1/reviewers/carol/link", token: b.admin,
		body: `{"slack_user_id":"U0CAROL","email":"carol@example.com"}`})
	want(t, r, http.StatusOK, "")
	got := r.obj(t)
	if got["principal"] != "carol" || got["slack_user_id"] != "U0CAROL" || got["email"] != "carol@example.com" ||
		got["name"] != "reviewer" || got["tokens"] != float64(1) || got["linked_by"] == nil {
		t.Fatalf("linked = %s", r.body)
	}
	r = b.do(t, req{method: "GET", path: "/v1/reviewers", token: b.admin})
	want(t, r, http.StatusOK, "")
	var found bool
	for _, it := range r.obj(t)["items"].([]any) {
		if m := it.(map[string]any); m["principal"] == "carol" {
			found = m["slack_user_id"] == "U0CAROL"
		}
	}
	if !found {
		t.Fatalf("GET /v1/reviewers lacks carol's link: %s", r.body)
	}
	for _, bad := range []struct{ principal, body, field string }{
		{"carol", `{"slack_user_id":"carol"}`, "slack_user_id"},
		{"carol", `{"email":"Carol <carol@example.com>"}`, "email"},
		{"carol", `{"email":"not an address"}`, "email"},
		{"carol", `{"nope":1}`, ""},
		{"dave", `{"slack_user_id":"U0CAROL"}`, "slack_user_id"}, // carol's already
	} {
		r = b.do(t, req{method: "PUT", path: "/v1/reviewers/" + bad.principal + "/link", token: b.admin, body: bad.body, invalid: true})
		want(t, r, http.StatusBadRequest, "invalid_request")
	}
	r = b.do(t, req{method: "PUT", path: "/v1/reviewers/carol/link", token: b.admin, body: `{}`})
	want(t, r, http.StatusOK, "")
	if m := r.obj(t); m["slack_user_id"] != nil || m["email"] != nil {
		t.Fatalf("after unlinking = %s", r.body)
	}
	r = b.do(t, req{method: "PUT", path: "/v1/reviewers/carol/link", token: b.admin, body: `{}`})
	want(t, r, http.StatusNotFound, "not_found")
}

// TestReviewersOIDC: GET /v1/reviewers lists a reviewer who signed in
// with OIDC, with name, email and groups; an admin ends their sessions
// with POST /v1/reviewers/end-sessions, and nobody else may.
func TestReviewersOIDC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	principal := "oidc:https://id.example.com#ada-1815"
	raw, _, err := b.svc.StartOIDCWebSession(t.Context(), airlock.ReviewerIdentity{Principal: principal, Name: "Ada Lovelace",
		Email: "ada@example.com", Groups: []string{"payments"}}, time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := b.do(t, req{method: "GET", path: "/v1/reviewers", token: b.admin})
	want(t, r, http.StatusOK, "")
	var found bool
	for _, it := range r.obj(t)["items"].([]any) {
		if m := it.(map[string]any); m["principal"] == principal {
			gs, _ := m["groups"].([]any)
			found = m["name"] == "Ada Lovelace" && m["email"] == "ada@example.com" && len(gs) == 1 && gs[0] == "payments" &&
				m["signed_in_at"] != nil && m["tokens"] == float64(0)
		}
	}
	if !found {
		t.Fatalf("GET /v1/reviewers lacks the OIDC reviewer: %s", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/reviewers/end-sessions", token: b.reviewer, body: `{"principal":"` + principal + `"}`})
	want(t, r, http.StatusForbidden, "forbidden")
	for _, bad := range []string{`{}`, `{"principal":""}`, `{"principal":"x","more":1}`} {
		r = b.do(t, req{method: "POST", path: "/v1/reviewers/end-sessions", token: b.admin, body: bad, invalid: true})
		want(t, r, http.StatusBadRequest, "invalid_request")
	}
	r = b.do(t, req{method: "POST", path: "/v1/reviewers/end-sessions", token: b.admin, body: `{"principal":"` + principal + `"}`})
	want(t, r, http.StatusOK, "")
	if m := r.obj(t); m["ended"] != float64(1) || m["principal"] != principal {
		t.Fatalf("end-sessions = %s", r.body)
	}
	if _, _, err := b.svc.WebSession(t.Context(), raw); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("the session after end-sessions: %v", err)
	}
}
