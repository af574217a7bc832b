package rest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
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

// TestEnableWebhook: an endpoint disabled for failing is enabled again by
// an admin, with its failed delivery due again; enabling an enabled one
// changes nothing, an unknown one is not found.
func TestEnableWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.webhook(t)
	r := b.do(t, req{method: "POST", path: "/v1/webhooks/" + id + "/test", token: b.admin})
	want(t, r, http.StatusAccepted, "")
	// Two failed attempts, the second past DisableAfter, disable it.
	for range 2 {
		ds, err := b.store.LeaseDeliveries(t.Context(), store.LeaseParams{EndpointID: id, Holder: "rep_t", For: time.Minute, Limit: 1})
		if err != nil || len(ds) != 1 {
			t.Fatalf("lease: %v, %v", ds, err)
		}
		if got, err := b.store.RecordAttempts(t.Context(), []store.AttemptParams{{DeliveryID: ds[0].ID, Holder: "rep_t",
			Attempt: airlock.DeliveryAttempt{At: time.Now(), Status: 502, Error: "HTTP 502"}, Outcome: airlock.OutcomeRetry,
			DisableAfter: time.Nanosecond}}); err != nil || got[0].ID == "" {
			t.Fatalf("record: %v, %v", got, err)
		}
		time.Sleep(time.Millisecond) // the second failure must come after the first's microsecond
	}
	r = b.do(t, req{method: "GET", path: "/v1/webhooks/" + id, token: b.admin})
	want(t, r, http.StatusOK, "")
	if w := r.obj(t); w["enabled"] != false || w["disabled_reason"] == nil {
		t.Fatalf("after failing: %s; want disabled", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/webhooks/" + id + "/enable", token: b.admin})
	want(t, r, http.StatusOK, "")
	w := r.obj(t)
	if w["enabled"] != true || w["disabled_at"] != nil || w["disabled_reason"] != nil || w["failing_since"] != nil || w["secret"] != nil {
		t.Fatalf("enabled: %s", r.body)
	}
	r = b.do(t, req{method: "GET", path: "/v1/webhooks/" + id + "/deliveries", token: b.admin})
	want(t, r, http.StatusOK, "")
	if items := r.obj(t)["items"].([]any); len(items) != 1 || items[0].(map[string]any)["state"] != "pending" {
		t.Fatalf("deliveries after enabling: %s; want the failed test delivery pending again", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/webhooks/" + id + "/enable", token: b.admin})
	want(t, r, http.StatusOK, "")
	r = b.do(t, req{method: "POST", path: "/v1/webhooks/whk_missing/enable", token: b.admin})
	want(t, r, http.StatusNotFound, airlock.CodeNotFound)
}
