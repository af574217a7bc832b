package inbox

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserOIDCSignIn: a person signs in through the identity
// provider's pages in a real browser (its sign-in page, whose button
// sends them back), and out again. The inbox is reached
// as localhost and the provider as 127.0.0.1, two sites, as in
// production: the provider's redirect back is a cross-site navigation,
// which must carry the sign-in's SameSite=Lax cookie, and the session's
// SameSite=Strict cookie must serve the page the browser lands on.
func TestBrowserOIDCSignIn(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	p.loginPage = true
	local := func(u string) string { return strings.Replace(u, "127.0.0.1", "localhost", 1) }
	b := setup(t, func(o *options) {
		o.oidc = func(serverURL string) *OIDCConfig { return p.config()(local(serverURL)) }
	})
	p.m.QueueUser(ada())
	id := b.toolCall(t, b.instance(t, "adapter"), "ls", map[string]any{}, "")

	tb := b.tab(t)
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.NavigateResponse(local(b.srv.URL)+"/requests/"+id)); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(`document.body !== null && document.body.dataset.page === "signin"`)
	tb.do(chromedp.Click(chromedp.ID("signin-oidc")))
	// The provider's page; its button sends the browser back, a
	// navigation another site starts.
	tb.waitFor(`document.getElementById("idp-continue") !== null`)
	tb.do(chromedp.Click(chromedp.ID("idp-continue")))
	// Back from the provider, on the request the browser first asked for.
	tb.waitFor(`document.body !== null && document.body.dataset.page === "request"`)
	if who := tb.text(".who"); !strings.Contains(who, "Ada Lovelace") {
		t.Fatalf("signed in as %q, want Ada Lovelace", who)
	}
	if loc := tb.location(); !strings.HasSuffix(loc, "/requests/"+id) {
		t.Fatalf("after the sign-in the browser is at %s", loc)
	}
	tb.noScriptRan()

	tb.do(chromedp.Click(chromedp.CSS(`form.signout button`)))
	tb.waitFor(`document.body !== null && document.body.dataset.page === "signin"`)
	if _, err := chromedp.Run(ctx, chromedp.NavigateResponse(local(b.srv.URL)+"/")); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(`document.body !== null && document.body.dataset.page === "signin"`)
}
