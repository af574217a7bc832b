package inbox

import (
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// grantPermissions is the DevTools protocol's Browser.grantPermissions,
// which grants a browser context's origin permissions as if the person
// had allowed them in the browser's prompt.
var grantPermissions = cdp.Command[grantPermissionsParams, cdp.Empty]{Method: "Browser.grantPermissions"}

type grantPermissionsParams struct {
	Permissions      []string             `json:"permissions"`
	Origin           string               `json:"origin,omitempty"`
	BrowserContextID cdp.BrowserContextID `json:"browserContextId,omitempty"`
}

// notificationHook records, before any page script runs, every
// Notification the page constructs and every permission request, and
// still constructs the real notification.
const notificationHook = `
window.__notes = []; window.__asked = 0;
(function () {
  var Real = window.Notification;
  if (!Real) return;
  function Recorded(title, options) {
    window.__notes.push({ title: title, body: (options && options.body) || '', tag: (options && options.tag) || '' });
    try { return new Real(title, options); } catch (e) { window.__noteError = String(e); return {}; }
  }
  Recorded.prototype = Real.prototype;
  Object.defineProperty(Recorded, 'permission', { get: function () { return Real.permission; } });
  Recorded.requestPermission = function () { window.__asked++; return Real.requestPermission.apply(Real, arguments); };
  window.Notification = Recorded;
})();
`

type note struct {
	Title, Body, Tag string
}

// TestBrowserNotifications: with the permission granted through the
// DevTools protocol, loading the inbox asks nothing; the reviewer turns
// notifications on with a click; a new pending request then raises a
// desktop notification (tool, instance, arguments) while the tab is
// hidden, and none while it is in view.
func TestBrowserNotifications(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "payments-adapter")
	tb := b.tab(t)
	if _, err := chromedp.Call(tb.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: notificationHook}); err != nil {
		t.Fatal(err)
	}
	c := chromedp.FromContext(tb.ctx)
	if _, err := chromedp.CallBrowser(tb.ctx, grantPermissions, grantPermissionsParams{
		Permissions: []string{"notifications"}, Origin: b.srv.URL, BrowserContextID: c.BrowserContextID,
	}); err != nil {
		t.Fatalf("Browser.grantPermissions: %v", err)
	}
	tb.signin(b.reviewer)
	tb.waitLive()
	if got := eval[string](tb, "Notification.permission"); got != "granted" {
		t.Fatalf("permission %q after Browser.grantPermissions", got)
	}
	if n := eval[int](tb, "window.__asked"); n != 0 {
		t.Fatalf("the page asked for permission %d times on load", n)
	}
	// Granted, but not turned on: nothing is shown yet.
	if got := tb.text("#notify"); got != "Notify me of new requests" {
		t.Errorf("button %q", got)
	}
	tb.do(chromedp.Click(chromedp.ID("notify")))
	tb.waitFor(`document.getElementById("notify").textContent === "Notifications on: turn off"`)
	if n := eval[int](tb, "window.__asked"); n != 1 {
		t.Errorf("asked %d times after one click", n)
	}

	// In view: the list updates, no notification.
	seen := b.toolCall(t, inst, "issue_refund", refundArgs, "")
	tb.waitFor(`document.querySelector('.row[data-id="` + seen + `"]') !== null`)
	if n := eval[int](tb, "window.__notes.length"); n != 0 {
		t.Fatalf("%d notifications while the tab is in view", n)
	}

	// Hidden behind another tab: a new request raises one.
	other, err := chromedp.CallBrowser(tb.ctx, target.CreateTarget, target.CreateTargetParams{URL: "about:blank", BrowserContextID: c.BrowserContextID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.CallBrowser(tb.ctx, target.ActivateTarget, target.ActivateTargetParams(other)); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(`document.visibilityState === "hidden"`)
	id := b.toolCall(t, inst, "send_email", map[string]any{"to": "ana@example.com"}, "")
	tb.waitFor(`window.__notes.length > 0`)
	notes := eval[[]note](tb, "window.__notes")
	if len(notes) != 1 || notes[0].Title != "Airlock: send_email" || notes[0].Tag != id ||
		!contains(notes[0].Body, "payments-adapter") || !contains(notes[0].Body, "ana@example.com") {
		t.Fatalf("notifications %+v", notes)
	}
	if got := eval[string](tb, "window.__noteError || ''"); got != "" {
		t.Errorf("constructing the notification failed: %s", got)
	}

	// Turned off: nothing more.
	if _, err := chromedp.CallBrowser(tb.ctx, target.ActivateTarget, target.ActivateTargetParams{TargetID: c.Target.TargetID}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(`document.visibilityState === "visible"`)
	tb.do(chromedp.Click(chromedp.ID("notify")))
	tb.waitFor(`document.getElementById("notify").textContent === "Notify me of new requests"`)
	tb.noScriptRan()
}
