package inbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/ratelimit"
)

// answer is PublicKeyCredential.toJSON() of an assertion over challenge
// (base64url, as the begin options carry it) for principal, made on
// origin for the relying party localhost, user present and verified.
func (p softPasskey) answer(t *testing.T, challenge, origin, principal string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(challenge)
	if err != nil {
		t.Fatal(err)
	}
	a := p.assert(t, raw, "localhost", origin)
	b64 := base64.RawURLEncoding.EncodeToString
	out, _ := json.Marshal(map[string]any{
		"id": b64(p.ID), "rawId": b64(p.ID), "type": "public-key", "clientExtensionResults": map[string]any{},
		"response": map[string]string{"authenticatorData": b64(a.AuthenticatorData), "clientDataJSON": b64(a.ClientDataJSON),
			"signature": b64(a.Signature), "userHandle": b64(userHandle(principal))},
	})
	return string(out)
}

// TestPasskeySigninThrottled: failed passkey sign-ins are throttled by
// client address with the token sign-in's budget (20, no refill here).
// From one address (behind a trusted proxy), 19 answers from a passkey
// the inbox does not know are refused with 401; Carol's real passkey,
// the 20th attempt, signs her in; the next unknown answer is the 20th
// failure, and every one after it is 429 with Retry-After before any
// lookup. Carol's passkey, accepted before, still signs her in from that
// address, and another address is not held back.
func TestPasskeySigninThrottled(t *testing.T) {
	t.Parallel()
	logs := &logtest.Recorder{}
	guard := ratelimit.NewGuard(ratelimit.GuardConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Logger:         logs.Logger(), Now: func() time.Time { return time.Unix(1000, 0) }, // no refill
	})
	b := setup(t, func(o *options) { o.guard = guard })
	carol := newSoftPasskey(t, "carol-soft-credential")
	if _, err := b.svc.RegisterPasskey(context.Background(), b.callers["Carol (reviewer)"],
		airlock.Passkey{ID: carol.ID, PublicKey: carol.COSE, Name: "soft"}); err != nil {
		t.Fatal(err)
	}
	// The relying party is localhost (no --public-url): the requests name
	// it as the browser would, over the test server's address.
	host := "localhost:" + strings.TrimPrefix(b.srv.Listener.Addr().String(), "127.0.0.1:")
	origin := "http://" + host
	post := func(path, addr string, form url.Values) (int, http.Header, map[string]string) {
		t.Helper()
		form.Set("csrf", "pre-session")
		req, err := http.NewRequest("POST", b.srv.URL+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", addr)
		req.AddCookie(&http.Cookie{Name: signinCookie, Value: "pre-session"})
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]string
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, res.Header, out
	}
	// signin begins a ceremony and answers it with p's assertion.
	signin := func(p softPasskey, addr string) (int, http.Header, map[string]string) {
		t.Helper()
		req, err := http.NewRequest("POST", b.srv.URL+"/signin/passkey/begin", strings.NewReader(url.Values{"csrf": {"pre-session"}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: signinCookie, Value: "pre-session"})
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var opts struct {
			PublicKey struct{ Challenge string } `json:"publicKey"`
		}
		err = json.NewDecoder(res.Body).Decode(&opts)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || opts.PublicKey.Challenge == "" {
			t.Fatalf("begin a passkey sign-in: %d %v %+v", res.StatusCode, err, opts)
		}
		return post("/signin/passkey/finish", addr, url.Values{"next": {"/"}, "credential": {p.answer(t, opts.PublicKey.Challenge, origin, "carol")}})
	}
	const attacker, bystander = "203.0.113.7", "198.51.100.2"
	for i := range 19 {
		if status, _, out := signin(newSoftPasskey(t, airlock.NewID("cred_")), attacker); status != http.StatusUnauthorized {
			t.Fatalf("unknown passkey %d: %d %v, want 401", i+1, status, out)
		}
	}
	if status, _, out := signin(carol, attacker); status != http.StatusOK || out["next"] != "/" {
		t.Fatalf("Carol's passkey as the 20th attempt, before the limit: %d %v", status, out)
	}
	statuses := map[int]int{}
	for range 10 {
		status, h, out := signin(newSoftPasskey(t, airlock.NewID("cred_")), attacker)
		statuses[status]++
		if status == http.StatusTooManyRequests && (h.Get("Retry-After") != "3" || out["code"] != "rate_limited" ||
			!strings.Contains(out["message"], "too many failed sign-ins from your address ("+attacker+"); try again in 3 seconds")) {
			t.Fatalf("a throttled passkey sign-in: Retry-After %q, %v", h.Get("Retry-After"), out)
		}
	}
	if statuses[http.StatusUnauthorized] != 1 || statuses[http.StatusTooManyRequests] != 9 {
		t.Fatalf("10 more unknown passkeys: %v, want 1 × 401 (the 20th failure) then 9 × 429", statuses)
	}
	if status, _, out := signin(carol, attacker); status != http.StatusOK {
		t.Fatalf("Carol's passkey, accepted before, from the throttled address: %d %v", status, out)
	}
	if status, _, out := signin(newSoftPasskey(t, airlock.NewID("cred_")), bystander); status != http.StatusUnauthorized {
		t.Fatalf("an unknown passkey from another address: %d %v, want 401, not throttled", status, out)
	}
	if got := logs.Containing("address=" + attacker); len(got) != 1 {
		t.Fatalf("log lines naming the attacker: %q, want one", got)
	}
}
