package rest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// webhook creates a webhook endpoint as the admin and returns its ID.
func (b *bundle) webhook(t *testing.T) string {
	t.Helper()
	e, err := b.svc.CreateWebhook(context.Background(), b.callers["admin"], airlock.WebhookInput{URL: "https://example.test/hook"})
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// TestWebhooksAPI: the secret is shown once, lists and reads never show
// it, a test delivery is queued and listed, bad input is refused.
func TestWebhooksAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, req{method: "POST", path: "/v1/webhooks", token: b.admin,
		body: `{"url":"https://example.test/hook","events":["approval_request.created","approval_request.reminder"],"description":"ops"}`})
	want(t, r, http.StatusCreated, "")
	created := r.obj(t)
	id, _ := created["id"].(string)
	secret, _ := created["secret"].(string)
	if !strings.HasPrefix(id, "whk_") || !strings.HasPrefix(secret, "whsec_") || created["enabled"] != true {
		t.Fatalf("created = %v", created)
	}
	for _, path := range []string{"/v1/webhooks", "/v1/webhooks/" + id} {
		r = b.do(t, req{method: "GET", path: path, token: b.admin})
		want(t, r, http.StatusOK, "")
		if strings.Contains(string(r.body), secret) || strings.Contains(string(r.body), `"secret"`) {
			t.Fatalf("GET %s shows the secret: %s", path, r.body)
		}
	}
	r = b.do(t, req{method: "POST", path: "/v1/webhooks/" + id + "/test", token: b.admin})
	want(t, r, http.StatusAccepted, "")
	d := r.obj(t)
	if d["type"] != "webhook.test" || d["state"] != "pending" || d["webhook_id"] != id {
		t.Fatalf("test delivery = %v", d)
	}
	r = b.do(t, req{method: "GET", path: "/v1/webhooks/" + id + "/deliveries?limit=1", token: b.admin})
	want(t, r, http.StatusOK, "")
	if items := r.obj(t)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != d["id"] {
		t.Fatalf("deliveries = %s", r.body)
	}

	for _, bad := range []struct{ body, field string }{
		{`{"url":"ftp://example.test/"}`, "url"},
		{`{"url":"https://user:pw@example.test/"}`, "url"},
		{`{"url":"/relative"}`, "url"},
		{`{"url":"https://example.test/#frag"}`, "url"},
		{`{"url":"https://example.test/","events":["approval_request.nope"]}`, "events"},
		{`{"url":"https://example.test/","events":["approval_request.created","approval_request.created"]}`, "events"},
		{`{"url":"https://example.test/","secret":"whsec_mine"}`, "secret"},
		{`{"url":"https://example.test/","description":"` + strings.Repeat("x", 501) + `"}`, "description"},
	} {
		r = b.do(t, req{method: "POST", path: "/v1/webhooks", token: b.admin, body: bad.body, invalid: true})
		want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
		if f, _ := r.obj(t)["field"].(string); f != bad.field {
			t.Errorf("%s: field %q, want %q", bad.body, f, bad.field)
		}
	}
	r = b.do(t, req{method: "GET", path: "/v1/webhooks/" + id + "/deliveries?cursor=x", token: b.admin, invalid: true})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	r = b.do(t, req{method: "DELETE", path: "/v1/webhooks/" + id, token: b.admin})
	want(t, r, http.StatusNoContent, "")
	r = b.do(t, req{method: "GET", path: "/v1/webhooks/" + id, token: b.admin})
	want(t, r, http.StatusNotFound, airlock.CodeNotFound)
}
