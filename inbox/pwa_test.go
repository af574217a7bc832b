package inbox

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestInstallable: the manifest and the service worker are served from
// the root with their types, the worker is never cached by HTTP, the
// manifest's icons and the worker's shell exist, and the CSP lets the
// manifest and the worker load (and nothing else new).
func TestInstallable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := b.newClient(t)
	sw := anon.do(t, "GET", "/sw.js", nil, nil)
	if sw.status != 200 || !strings.HasPrefix(sw.header.Get("Content-Type"), "text/javascript") || sw.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET /sw.js: %d %q %q", sw.status, sw.header.Get("Content-Type"), sw.header.Get("Cache-Control"))
	}
	wantHeaders(t, "GET /sw.js", sw)
	m := anon.do(t, "GET", "/manifest.webmanifest", nil, nil)
	wantHeaders(t, "GET /manifest.webmanifest", m)
	if m.status != 200 || m.header.Get("Content-Type") != "application/manifest+json" {
		t.Fatalf("GET /manifest.webmanifest: %d %q", m.status, m.header.Get("Content-Type"))
	}
	var man struct {
		Name, StartURL, Scope, Display string
		Icons                          []struct{ Src, Sizes, Type string }
	}
	if err := json.Unmarshal([]byte(m.body), &man); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	sizes := map[string]bool{}
	for _, ic := range man.Icons {
		r := anon.do(t, "GET", ic.Src, nil, nil)
		if r.status != 200 || r.header.Get("Content-Type") != ic.Type {
			t.Errorf("icon %s: %d %q; want 200 %s", ic.Src, r.status, r.header.Get("Content-Type"), ic.Type)
		}
		sizes[ic.Sizes] = true
	}
	if man.Name != "Airlock" || !sizes["192x192"] || !sizes["512x512"] {
		t.Errorf("manifest %s: an installable app needs a name and 192 and 512 pixel icons", m.body)
	}
	// Every file of the worker's shell is served.
	shell := sw.body[strings.Index(sw.body, "var SHELL = [")+len("var SHELL = ["):]
	shell = shell[:strings.Index(shell, "]")]
	for _, f := range strings.Split(shell, ",") {
		p := strings.Trim(strings.TrimSpace(f), "'")
		if r := anon.do(t, "GET", p, nil, nil); r.status != 200 {
			t.Errorf("shell file %s: %d", p, r.status)
		}
		if !strings.HasPrefix(p, "/static/") {
			t.Errorf("the shell lists %s, which is not a static file", p)
		}
	}
	for _, want := range []string{"manifest-src 'self'", "worker-src 'self'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("the CSP lacks %s", want)
		}
	}
	page := anon.do(t, "GET", "/signin", nil, nil)
	for _, want := range []string{`<link rel="manifest" href="/manifest.webmanifest">`, `<link rel="apple-touch-icon" href="/static/icon-180.png">`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("pages lack %s", want)
		}
	}
}

func browserSubscription(t *testing.T, endpoint string) string {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	js, _ := json.Marshal(map[string]any{"endpoint": endpoint, "expirationTime": nil,
		"keys": map[string]string{"p256dh": airlock.EncodePushKey(k.PublicKey().Bytes()), "auth": airlock.EncodePushKey(auth)}})
	return string(js)
}

// TestInboxPushSubscription: a signed-in reviewer's script reads the
// VAPID key and subscribes this browser with the session's CSRF token;
// without it, from another site, or signed out, nothing is stored; the
// reviewer removes the subscription again.
func TestInboxPushSubscription(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, csrf := b.signedInClient(t, b.reviewer)
	r := c.do(t, "GET", "/push/key", nil, nil)
	var key struct {
		PublicKey string `json:"public_key"`
	}
	if err := json.Unmarshal([]byte(r.body), &key); r.status != 200 || err != nil || len(key.PublicKey) != 87 {
		t.Fatalf("GET /push/key: %d %s", r.status, r.body)
	}
	sub := browserSubscription(t, "https://push.example.test/inbox")
	for name, tc := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"no CSRF token":    {url.Values{"subscription": {sub}}, nil},
		"a wrong token":    {url.Values{"csrf": {"nope"}, "subscription": {sub}}, nil},
		"another site":     {url.Values{"csrf": {csrf}, "subscription": {sub}}, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}},
		"bad subscription": {url.Values{"csrf": {csrf}, "subscription": {`{"endpoint":"http://push.example.test/x","keys":{"p256dh":"AA","auth":"AA"}}`}}, nil},
	} {
		if r := c.do(t, "POST", "/push/subscriptions", tc.form, tc.header); r.status < 400 {
			t.Errorf("%s: %d %s; want refused", name, r.status, r.body)
		}
	}
	if r := b.newClient(t).do(t, "POST", "/push/subscriptions", url.Values{"csrf": {csrf}, "subscription": {sub}}, nil); r.status == http.StatusCreated {
		t.Errorf("signed out: %d", r.status)
	}
	eps, err := b.st.ListEndpoints(context.Background(), airlock.EndpointPush)
	if err != nil || len(eps) != 0 {
		t.Fatalf("refused subscriptions stored: %v %v", eps, err)
	}
	r = c.do(t, "POST", "/push/subscriptions", url.Values{"csrf": {csrf}, "subscription": {sub}}, nil)
	var got airlock.PushSubscription
	if err := json.Unmarshal([]byte(r.body), &got); r.status != http.StatusCreated || err != nil || got.Endpoint != "https://push.example.test/inbox" || strings.Contains(r.body, "p256dh") {
		t.Fatalf("subscribe: %d %s", r.status, r.body)
	}
	if r := c.do(t, "POST", "/push/subscriptions/"+got.ID+"/delete", url.Values{"csrf": {"nope"}}, nil); r.status != http.StatusForbidden {
		t.Errorf("delete with a wrong token: %d", r.status)
	}
	if r := c.do(t, "POST", "/push/subscriptions/"+got.ID+"/delete", url.Values{"csrf": {csrf}}, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if eps, _ := b.st.ListEndpoints(context.Background(), airlock.EndpointPush); len(eps) != 0 {
		t.Errorf("after delete: %v", eps)
	}
}
