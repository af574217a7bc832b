package inbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/passkey"
)

// virtualAuthenticator gives tb's browser context a platform
// authenticator that keeps discoverable credentials and verifies its user
// at once, as a phone's or laptop's does once unlocked.
func (tb *tab) virtualAuthenticator() webauthn.AuthenticatorID {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		tb.t.Fatalf("WebAuthn.enable: %v", err)
	}
	res, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true,
	}})
	if err != nil {
		tb.t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	return res.AuthenticatorID
}

// bogusSignatures makes the authenticator sign with zeros (on) or
// properly (off): a forged assertion.
func (tb *tab) bogusSignatures(id webauthn.AuthenticatorID, on bool) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, webauthn.SetResponseOverrideBits, webauthn.SetResponseOverrideBitsParams{AuthenticatorID: id, IsBogusSignature: &on}); err != nil {
		tb.t.Fatalf("WebAuthn.setResponseOverrideBits: %v", err)
	}
}

// localhost is the test server's address by the name a passkey's
// relying party may have: browsers refuse an IP address as an RP ID.
func (b *bundle) localhost(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(b.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return "http://localhost:" + u.Port()
}

// openAt navigates to base+path.
func (tb *tab) openAt(base, path string) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(base + path))
	tb.noScriptRan()
}

// recordPasskeyFinish keeps, in sessionStorage (which outlives the
// sign-in's navigation), the body of each
// passkey sign-in answer the page posts, so that a test can replay it.
const recordPasskeyFinish = `(function () {
  var real = window.fetch;
  window.fetch = function (url, init) {
    if (String(url).indexOf('/signin/passkey/finish') >= 0) {
      var kept = JSON.parse(sessionStorage.getItem('finish') || '[]');
      kept.push(String(init.body));
      sessionStorage.setItem('finish', JSON.stringify(kept));
    }
    return real.apply(this, arguments);
  };
  return true;
})()`

// TestBrowserPasskeys: in Chromium with a virtual authenticator (ctap2,
// internal, resident keys, user verification), a reviewer signed in with
// a token registers a passkey, signs out and signs in with it; a forged
// assertion (a zero signature) and a replayed one are refused; another
// origin's ceremony is refused; the passkey is deleted.
func TestBrowserPasskeys(t *testing.T) {
	b := setup(t)
	tb := b.tab(t)
	auth := tb.virtualAuthenticator()
	base := b.localhost(t)

	// Sign in with the token, on localhost.
	tb.openAt(base, "/signin")
	tb.do(chromedp.SendKeys(chromedp.ID("token"), b.reviewer), chromedp.Click(chromedp.CSS(`#signin-form button[type="submit"]`)))
	tb.waitFor(`document.body.dataset.page === "pending"`)

	// Register a passkey.
	tb.openAt(base, "/passkeys")
	if got := tb.text("#no-passkeys"); got != "None yet." {
		t.Fatalf("a new reviewer's Passkeys page says %q", got)
	}
	tb.do(chromedp.SendKeys(chromedp.ID("passkey-name"), "test laptop"), chromedp.Click(chromedp.ID("passkey-add")))
	tb.waitFor(`document.querySelector("#passkeys tbody tr") !== null`)
	ps, err := b.st.ListPasskeys(context.Background(), "carol")
	if err != nil || len(ps) != 1 {
		t.Fatalf("carol's passkeys after registering: %d, %v", len(ps), err)
	}
	p := ps[0]
	if p.Name != "test laptop" || p.TokenID != b.callers["Carol (reviewer)"].ID || len(p.PublicKey) == 0 || strings.Join(p.Transports, ",") != "internal" {
		t.Fatalf("stored passkey: name %q, token %q, %d-byte key, transports %q", p.Name, p.TokenID, len(p.PublicKey), p.Transports)
	}
	if got := tb.text("#passkeys tbody tr .name"); got != "test laptop" {
		t.Fatalf("the Passkeys page lists %q", got)
	}

	// Sign out, then in with the passkey. A forged assertion first.
	tb.do(chromedp.Click(chromedp.CSS(`form.signout button`)))
	tb.waitFor(`document.body.dataset.page === "signin"`)
	tb.waitFor(`!document.getElementById("passkey-signin-p").hidden`)
	_ = eval[bool](tb, recordPasskeyFinish)
	tb.bogusSignatures(auth, true)
	tb.do(chromedp.Click(chromedp.ID("signin-passkey")))
	tb.waitFor(`!document.getElementById("passkey-problem").hidden`)
	if got := tb.text("#passkey-problem"); !strings.Contains(got, "did not verify") {
		t.Fatalf("a forged assertion is answered %q", got)
	}
	if eval[string](tb, `document.body.dataset.page`) != "signin" {
		t.Fatal("a forged assertion signed the browser in")
	}
	tb.bogusSignatures(auth, false)
	tb.do(chromedp.Click(chromedp.ID("signin-passkey")))
	tb.waitFor(`document.body.dataset.page === "pending"`)
	if got := tb.text(".who"); got != "Carol (reviewer)" {
		t.Fatalf("signed in with the passkey as %q", got)
	}
	used, err := b.st.Passkey(context.Background(), p.ID)
	if err != nil || used.LastUsedAt == nil {
		t.Fatalf("the passkey's use was not recorded: %+v, %v", used, err)
	}

	// The answer that signed in, replayed by another client with the
	// same form and cookie, is refused: its ceremony was taken.
	bodies := eval[[]string](tb, `JSON.parse(sessionStorage.getItem("finish") || "[]")`)
	if len(bodies) != 2 {
		t.Fatalf("recorded %d sign-in answers, want the forged one and the good one", len(bodies))
	}
	form, err := url.ParseQuery(bodies[1])
	if err != nil {
		t.Fatal(err)
	}
	// The real assertion checks out with package passkey's Verify, the
	// check an auditor makes of a stored one, and fails once altered.
	var sent struct {
		Response struct{ AuthenticatorData, ClientDataJSON, Signature string }
	}
	if err := json.Unmarshal([]byte(form.Get("credential")), &sent); err != nil {
		t.Fatal(err)
	}
	b64 := func(s string) []byte {
		v, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	asserted := passkey.Assertion{CredentialID: p.ID, AuthenticatorData: b64(sent.Response.AuthenticatorData),
		ClientDataJSON: b64(sent.Response.ClientDataJSON), Signature: b64(sent.Response.Signature)}
	var cd struct{ Challenge string }
	json.Unmarshal(asserted.ClientDataJSON, &cd)
	if err := passkey.Verify(p.PublicKey, asserted, b64(cd.Challenge), "localhost"); err != nil {
		t.Fatalf("passkey.Verify of Chromium's assertion: %v", err)
	}
	asserted.Signature[len(asserted.Signature)-1] ^= 1
	if err := passkey.Verify(p.PublicKey, asserted, b64(cd.Challenge), "localhost"); !errors.Is(err, passkey.ErrSignature) {
		t.Fatalf("passkey.Verify of an altered signature: %v", err)
	}

	req, _ := http.NewRequest("POST", base+"/signin/passkey/finish", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: signinCookie, Value: form.Get("csrf")})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var refused struct{ Code, Message string }
	json.NewDecoder(res.Body).Decode(&refused)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(refused.Message, "no ceremony") || len(res.Cookies()) != 0 {
		t.Fatalf("a replayed assertion is answered %d %+v, cookies %v", res.StatusCode, refused, res.Cookies())
	}

	// A ceremony on an address that is not the inbox's name is refused:
	// with no --public-url, only localhost.
	req, _ = http.NewRequest("POST", b.srv.URL+"/signin/passkey/begin", strings.NewReader(url.Values{"csrf": {"x"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: signinCookie, Value: "x"})
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a passkey ceremony on %s is answered %d, want 403", b.srv.URL, res.StatusCode)
	}

	// Delete it: it no longer signs in.
	tb.openAt(base, "/passkeys")
	tb.do(chromedp.Click(chromedp.CSS(`form.passkey-delete button`)))
	tb.waitFor(`document.getElementById("no-passkeys") !== null`)
	if _, err := b.st.Passkey(context.Background(), p.ID); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("the deleted passkey: %v", err)
	}
}
