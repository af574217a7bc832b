package rest

import (
	"net/http"
	"testing"
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
