package inbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/passkey"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/provider"
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

// registerPasskey signs tb in with token on base and registers a passkey
// named name; it returns the stored passkey.
func (tb *tab) registerPasskey(base, token, principal, name string) airlock.Passkey {
	tb.t.Helper()
	tb.openAt(base, "/signin")
	tb.do(chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS(`#signin-form button[type="submit"]`)))
	tb.waitFor(`document.body.dataset.page === "pending"`)
	tb.openAt(base, "/passkeys")
	tb.do(chromedp.SendKeys(chromedp.ID("passkey-name"), name), chromedp.Click(chromedp.ID("passkey-add")))
	tb.waitFor(`document.querySelector("#passkeys tbody tr") !== null`)
	ps, err := tb.b.st.ListPasskeys(context.Background(), principal)
	if err != nil || len(ps) != 1 {
		tb.t.Fatalf("%s's passkeys after registering: %d, %v", principal, len(ps), err)
	}
	return ps[0]
}

// TestBrowserPasskeyDecision: with --require-passkey-for naming a tool,
// a decision without a passkey is refused (as the REST API, the CLI and
// Slack make it), the inbox approves with the reviewer's passkey in
// Chromium's virtual authenticator, the store keeps the assertion, which
// verifies against the decision's challenge, and the same assertion is
// refused for another request.
func TestBrowserPasskeyDecision(t *testing.T) {
	need, err := policy.CompileExpression(`request.tool == "send_money"`)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, func(o *options) { o.requirePasskey = need })
	tb := b.tab(t)
	tb.virtualAuthenticator()
	base := b.localhost(t)
	pk := tb.registerPasskey(base, b.reviewer, "carol", "phone")

	inst := b.instance(t, "payments")
	id := b.toolCall(t, inst, "send_money", map[string]any{"to": "acme", "cents": 1200}, "pay the invoice")
	other := b.toolCall(t, inst, "send_money", map[string]any{"to": "acme", "cents": 1200}, "pay it again")
	plain := b.toolCall(t, inst, "read_file", map[string]any{"path": "/etc/motd"}, "look")
	carol := b.callers["Carol (reviewer)"]
	ctx := context.Background()

	// Without a passkey: refused, saying where to decide.
	_, err = b.svc.Decide(ctx, carol, id, airlock.DecisionInput{Status: airlock.StateApproved})
	if airlock.ErrorCode(err) != airlock.CodeForbidden || !strings.Contains(err.Error(), "passkey") || !strings.Contains(err.Error(), "/requests/"+id) {
		t.Fatalf("a decision without a passkey = %v; want forbidden, naming the inbox's page", err)
	}
	// A request the condition does not name is decided as ever.
	if _, err := b.svc.Decide(ctx, carol, plain, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
		t.Fatalf("a decision the condition does not name: %v", err)
	}

	// In the inbox: approve, and the passkey signs.
	tb.openAt(base, "/requests/"+id)
	if got := tb.text("#needs-passkey"); !strings.Contains(got, "signed with your passkey") {
		t.Fatalf("the request page says %q", got)
	}
	tb.do(chromedp.SendKeys(chromedp.ID("approve-note"), "paid per invoice"), chromedp.Click(chromedp.CSS(`#approve-form button[type="submit"]`)))
	tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
	tb.waitFor(`document.body.textContent.indexOf("Approved.") >= 0`)
	r := b.get(t, id)
	if r.State != airlock.StateApproved || r.Decision == nil || r.Decision.Note != "paid per invoice" {
		t.Fatalf("the signed approval left %s", r.State)
	}
	ds, err := b.st.PasskeyDecisions(ctx, id)
	if err != nil || len(ds) != 1 {
		t.Fatalf("PasskeyDecisions = %d, %v; want one", len(ds), err)
	}
	d := ds[0]
	if d.Principal != "carol" || d.Status != airlock.StateApproved || d.Note != "paid per invoice" || !bytes.Equal(d.Assertion.CredentialID, pk.ID) {
		t.Fatalf("the kept signed decision: %+v", d)
	}
	challenge, err := provider.DecisionChallenge(r, airlock.DecisionInput{Status: d.Status, ValidFor: d.ValidFor, Note: d.Note})
	if err != nil {
		t.Fatal(err)
	}
	if err := passkey.Verify(pk.PublicKey, d.Assertion, challenge, "localhost"); err != nil {
		t.Fatalf("the kept assertion does not verify: %v", err)
	}
	// Kept with its key, digest and relying party, Chromium's assertion
	// verifies as the audit log's record beside the approval's leaf.
	leaf, err := auditlog.NewLeaf(airlock.Event{Type: airlock.EventRequestApproved, UID: "u", At: time.Now().Truncate(time.Microsecond),
		Actor: d.Actor, RequestID: id, State: airlock.StateApproved}, func() *auditlog.Payloads {
		p, err := auditlog.RequestPayloads(r)
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}())
	if err != nil {
		t.Fatal(err)
	}
	l, err := auditlog.ParseLeaf(leaf)
	if err != nil {
		t.Fatal(err)
	}
	rec := auditlog.PasskeyRecord{Assertion: d.Assertion, PublicKey: d.PublicKey, RPID: d.RPID, Signed: passkey.Signed{RequestID: id,
		ArgsDigest: d.ArgsDigest, Status: d.Status, ValidFor: d.ValidFor, Note: d.Note}}
	if !bytes.Equal(d.PublicKey, pk.PublicKey) || d.RPID != "localhost" || d.ArgsDigest != l.Payloads.Arguments {
		t.Fatalf("kept with the decision: key %x, relying party %q, digest %q; want %x, localhost, %q", d.PublicKey, d.RPID, d.ArgsDigest, pk.PublicKey, l.Payloads.Arguments)
	}
	if err := auditlog.VerifyPasskey(l, rec); err != nil {
		t.Fatalf("Chromium's assertion as the audit log's record: %v", err)
	}

	// The same assertion offered for another request (same arguments,
	// another ID) is refused, and decides nothing.
	_, err = b.svc.Decide(ctx, carol, other, airlock.DecisionInput{Status: airlock.StateApproved, ValidFor: d.ValidFor, Note: d.Note, Passkey: &d.Assertion})
	if airlock.ErrorCode(err) != airlock.CodeForbidden || !strings.Contains(err.Error(), "another challenge") {
		t.Fatalf("an assertion made for another request = %v; want forbidden", err)
	}
	if got := b.get(t, other); got.State != airlock.StatePending {
		t.Fatalf("the other request is %s", got.State)
	}
}
