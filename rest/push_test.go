package rest

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// pushKeys returns a browser's subscription keys, fresh.
func pushKeys(t *testing.T) airlock.PushKeys {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return airlock.PushKeys{P256DH: airlock.EncodePushKey(k.PublicKey().Bytes()), Auth: airlock.EncodePushKey(auth)}
}

func pushBody(t *testing.T, endpoint string) string {
	t.Helper()
	js, err := json.Marshal(airlock.PushSubscriptionInput{Endpoint: endpoint, Keys: pushKeys(t)})
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// pushSubscription stores a subscription of the reviewer's.
func (b *bundle) pushSubscription(t *testing.T) string {
	t.Helper()
	s, err := b.svc.CreatePushSubscription(context.Background(), b.callers["reviewer"],
		airlock.PushSubscriptionInput{Endpoint: "https://push.example.test/" + airlock.NewID("s_"), Keys: pushKeys(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// TestPushAPI: the VAPID key is one and the same for every read; a
// subscription is answered without its keys; the same browser subscribing
// again replaces its subscription; only its maker deletes it; bad
// endpoints and keys are refused naming the field.
func TestPushAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, req{method: "GET", path: "/v1/push/vapid-public-key", token: b.reviewer})
	want(t, r, http.StatusOK, "")
	key := r.obj(t)["public_key"].(string)
	raw, err := airlock.DecodePushKey(key)
	if err != nil || len(raw) != 65 || raw[0] != 4 {
		t.Fatalf("public_key %q is not an uncompressed P-256 point (%v)", key, err)
	}
	if again := b.do(t, req{method: "GET", path: "/v1/push/vapid-public-key", token: b.admin}).obj(t)["public_key"]; again != key {
		t.Fatalf("a second read gave key %v, want %s", again, key)
	}

	body := pushBody(t, "https://push.example.test/abc")
	r = b.do(t, req{method: "POST", path: "/v1/push/subscriptions", token: b.reviewer, body: body})
	want(t, r, http.StatusCreated, "")
	first := r.obj(t)
	if strings.Contains(string(r.body), "p256dh") || strings.Contains(string(r.body), "auth") || first["endpoint"] != "https://push.example.test/abc" ||
		!strings.HasPrefix(first["id"].(string), airlock.PrefixPushSubscription) || r.header.Get("Location") != "/v1/push/subscriptions/"+first["id"].(string) {
		t.Fatalf("created subscription %s (Location %q)", r.body, r.header.Get("Location"))
	}
	r = b.do(t, req{method: "POST", path: "/v1/push/subscriptions", token: b.reviewer, body: pushBody(t, "https://push.example.test/abc")})
	want(t, r, http.StatusCreated, "")
	second := r.obj(t)["id"].(string)
	if second == first["id"] {
		t.Fatalf("subscribing again kept the id %s", second)
	}
	eps, err := b.st.ListEndpoints(context.Background(), airlock.EndpointPush)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || eps[0].ID != second {
		t.Fatalf("after subscribing twice from one browser the store holds %v; want only %s", eps, second)
	}
	// Webhook routes do not see subscriptions.
	want(t, b.do(t, req{method: "GET", path: "/v1/webhooks/" + second, token: b.admin}), http.StatusNotFound, airlock.CodeNotFound)
	// Only the maker deletes it.
	want(t, b.do(t, req{method: "DELETE", path: "/v1/push/subscriptions/" + second, token: b.reviewerA}), http.StatusNotFound, airlock.CodeNotFound)
	want(t, b.do(t, req{method: "DELETE", path: "/v1/push/subscriptions/" + second, token: b.admin}), http.StatusNotFound, airlock.CodeNotFound)
	want(t, b.do(t, req{method: "DELETE", path: "/v1/push/subscriptions/" + second, token: b.reviewer}), http.StatusNoContent, "")
	want(t, b.do(t, req{method: "DELETE", path: "/v1/push/subscriptions/" + second, token: b.reviewer}), http.StatusNotFound, airlock.CodeNotFound)

	keys := pushKeys(t)
	for _, tc := range []struct{ body, field string }{
		{`{"endpoint":"http://push.example.test/a","keys":{"p256dh":"` + keys.P256DH + `","auth":"` + keys.Auth + `"}}`, "endpoint"},
		{`{"endpoint":"https://u:p@push.example.test/a","keys":{"p256dh":"` + keys.P256DH + `","auth":"` + keys.Auth + `"}}`, "endpoint"},
		{`{"endpoint":"https://push.example.test/` + strings.Repeat("a", airlock.MaxEndpointURL) + `","keys":{"p256dh":"` + keys.P256DH + `","auth":"` + keys.Auth + `"}}`, "endpoint"},
		{`{"endpoint":"https://push.example.test/a","keys":{"p256dh":"AAAA","auth":"` + keys.Auth + `"}}`, "keys.p256dh"},
		{`{"endpoint":"https://push.example.test/a","keys":{"p256dh":"` + keys.P256DH + `","auth":"AAAA"}}`, "keys.auth"},
		{`{"endpoint":"https://push.example.test/a","keys":{"p256dh":"` + strings.Repeat("A", airlock.MaxPushKey+1) + `","auth":"` + keys.Auth + `"}}`, "keys"},
		{`{"endpoint":"https://push.example.test/a","keys":{"p256dh":"` + keys.P256DH + `","auth":"` + keys.Auth + `"},"extra":1}`, ""},
	} {
		r := b.do(t, req{method: "POST", path: "/v1/push/subscriptions", token: b.reviewer, body: tc.body, invalid: true})
		want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
		if tc.field != "" && !strings.Contains(string(r.body), tc.field) {
			t.Errorf("refusal of %.80s… does not name %s: %s", tc.body, tc.field, r.body)
		}
	}
}

// TestPushSubscriptionLimit: one caller holds at most
// MaxPushSubscriptionsPerCaller subscriptions; another caller is not
// counted against it.
func TestPushSubscriptionLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range airlock.MaxPushSubscriptionsPerCaller {
		want(t, b.do(t, req{method: "POST", path: "/v1/push/subscriptions", token: b.reviewer,
			body: pushBody(t, fmt.Sprintf("https://push.example.test/%d", i))}), http.StatusCreated, "")
	}
	r := b.do(t, req{method: "POST", path: "/v1/push/subscriptions", token: b.reviewer, body: pushBody(t, "https://push.example.test/more")})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	want(t, b.do(t, req{method: "POST", path: "/v1/push/subscriptions", token: b.admin, body: pushBody(t, "https://push.example.test/more")}),
		http.StatusCreated, "")
}
