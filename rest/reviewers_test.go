package rest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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

// TestReviewersLinkOIDC: an OIDC principal, which holds "//" and "#", is
// linked with its principal percent-encoded in the path, as
// url.PathEscape or url.QueryEscape writes it.
func TestReviewersLinkOIDC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	principal := "oidc:https://id.example.com#ada-1815"
	r := b.do(t, req{method: "PUT", path: "/v1/reviewers/" + url.PathEscape(principal) + "/link", token: b.admin,
		body: `{"slack_user_id":"U0ADA"}`})
	want(t, r, http.StatusOK, "")
	if m := r.obj(t); m["principal"] != principal || m["slack_user_id"] != "U0ADA" {
		t.Fatalf("linked = %s", r.body)
	}
	r = b.do(t, req{method: "PUT", path: "/v1/reviewers/" + url.QueryEscape(principal) + "/link", token: b.admin,
		body: `{"slack_user_id":"U0ADA2"}`})
	want(t, r, http.StatusOK, "")
	if m := r.obj(t); m["principal"] != principal || m["slack_user_id"] != "U0ADA2" {
		t.Fatalf("linked, fully escaped = %s", r.body)
	}
}

// TestRefuseUncleanPaths: a doubled slash or a dot segment is refused
// with a problem naming the clean path; an escaped slash inside a
// segment (an OIDC principal's "//") is not unclean, and the mux hands
// the wildcard its unescaped value.
func TestRefuseUncleanPaths(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/reviewers/{principal}/link", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.PathValue("principal"))
	})
	srv := httptest.NewServer(RefuseUncleanPaths(mux))
	t.Cleanup(srv.Close)
	put := func(path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("PUT", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := put("/v1/reviewers/" + url.PathEscape("oidc:https://id.example.com#ada") + "/link"); code != 200 || body != "oidc:https://id.example.com#ada" {
		t.Fatalf("escaped OIDC principal: %d %s", code, body)
	}
	for _, bad := range []string{"/v1//reviewers/carol/link", "/v1/reviewers/./carol/link", "/v1/x/../reviewers/carol/link", "/v1/reviewers/oidc:https://id.example.com/link"} {
		if code, body := put(bad); code != http.StatusNotFound || !strings.Contains(body, "paths are not cleaned") {
			t.Errorf("%s: %d %s, want 404 naming the clean path", bad, code, body)
		}
	}
}

// TestReviewersGroups: GET /v1/reviewers shows the groups the policy file
// lists a token's principal in, and an OIDC reviewer's claim groups
// (in the claim's order) merged with the file's, each once.
func TestReviewersGroups(t *testing.T) {
	t.Parallel()
	b := setup(t, withPolicy(t, `groups:
  payments: [carol, "oidc:https://id.example.com#ada-1815"]
  leads: [carol]
  oncall: []
rules:
  - {name: payments, match: 'request.tool == "issue_refund"', action: ask, reviewers: payments}
`))
	principal := "oidc:https://id.example.com#ada-1815"
	if _, _, err := b.svc.StartOIDCWebSession(t.Context(), airlock.ReviewerIdentity{Principal: principal, Name: "Ada",
		Groups: []string{"payments", "oncall"}}, time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	r := b.do(t, req{method: "GET", path: "/v1/reviewers", token: b.admin})
	want(t, r, http.StatusOK, "")
	groups := map[string]string{}
	for _, it := range r.obj(t)["items"].([]any) {
		m := it.(map[string]any)
		var gs []string
		raw, _ := m["groups"].([]any)
		for _, g := range raw {
			gs = append(gs, g.(string))
		}
		groups[m["principal"].(string)] = strings.Join(gs, ",")
	}
	if groups["carol"] != "leads,payments" || groups[principal] != "payments,oncall" {
		t.Fatalf("groups = %v, want carol in leads,payments and Ada in payments,oncall: %s", groups, r.body)
	}
}
