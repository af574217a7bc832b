package inbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestBrowserNoScriptConfirmation: with JavaScript off, Approve and Deny
// lead to the inbox's confirmation page, which restates the call (tool,
// arguments whole, size, digest), the validity and the note; nothing is
// recorded until Confirm, and Cancel records nothing. Then what the page
// said is recorded.
func TestBrowserNoScriptConfirmation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "payments-adapter")
	id := b.toolCall(t, inst, "issue_refund", refundArgs, refundReasoning)
	stored := b.get(t, id).Arguments

	tb := b.signedInTab(t, b.reviewer)
	if _, err := chromedp.Call(tb.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	navigate := func(path string) {
		t.Helper()
		tb.do(chromedp.Navigate(b.srv.URL + path))
	}
	state := func() airlock.State { return b.get(t, id).State }

	navigate("/requests/" + id)
	if ran := eval[bool](tb, `document.getElementById("reasoning-more").hidden === false`); ran {
		t.Fatal("the page's script ran: scripts are not disabled")
	}
	tb.do(chromedp.SetValue(chromedp.ID("valid_for"), "15m"))
	tb.do(chromedp.SendKeys(chromedp.ID("approve-note"), "refund once"))
	tb.do(chromedp.Click(chromedp.CSS("#approve-form button.approve")))
	tb.waitFor(`document.body.dataset.page === "confirm"`)
	if s := state(); s != airlock.StatePending {
		t.Fatalf("Approve recorded %s before any confirmation", s)
	}
	for sel, want := range map[string]string{
		"#confirm-h": "Approve this request?", "#confirm-tool": "issue_refund", "#confirm-validity": "15m",
		"#confirm-note": "refund once", "#digest": tokenDigest(stored), "#args-size": fmt.Sprintf("%d bytes", len(stored)),
		"#confirm-digest": fmt.Sprintf("%d bytes, %s…", len(stored), tokenDigest(stored)[:19]),
		"#confirm-seen":   "not measured: no script ran on the request page (the arguments are shown whole above)",
	} {
		if got := tb.text(sel); got != want {
			t.Errorf("the confirmation page's %s shows %q, want %q", sel, got, want)
		}
	}
	if got := tb.text("#arguments"); !contains(got, `"customer_id": "cus_8812"`) || !contains(got, `"Espresso grinder"`) {
		t.Errorf("the confirmation page's arguments:\n%s", got)
	}

	// Cancel goes back to the request and records nothing.
	tb.do(chromedp.Click(chromedp.ID("confirm-cancel")))
	tb.waitFor(`document.body.dataset.page === "request"`)
	if s := state(); s != airlock.StatePending {
		t.Fatalf("Cancel recorded %s", s)
	}

	// Deny, too, is confirmed first.
	tb.do(chromedp.SendKeys(chromedp.ID("deny-note"), "not this week"))
	tb.do(chromedp.Click(chromedp.CSS("#deny-form button.deny")))
	tb.waitFor(`document.body.dataset.page === "confirm"`)
	if got := tb.text("#confirm-h"); got != "Deny this request?" {
		t.Errorf("deny's confirmation heading %q", got)
	}
	if s := state(); s != airlock.StatePending {
		t.Fatalf("Deny recorded %s before any confirmation", s)
	}

	// Approve again, and confirm: what the page said is recorded.
	navigate("/requests/" + id)
	tb.do(chromedp.SetValue(chromedp.ID("valid_for"), "15m"))
	tb.do(chromedp.SendKeys(chromedp.ID("approve-note"), "refund once"))
	tb.do(chromedp.Click(chromedp.CSS("#approve-form button.approve")))
	tb.waitFor(`document.body.dataset.page === "confirm"`)
	tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
	tb.waitFor(`document.body.dataset.page === "request" && document.getElementById("flash") !== null`)
	if got := tb.text("#flash"); !contains(got, "Approved.") {
		t.Errorf("after Confirm the page says %q", got)
	}
	got := b.get(t, id)
	if got.State != airlock.StateApproved || got.Decision.Note != "refund once" || got.Decision.ExpiresAt.Sub(got.Decision.DecidedAt) != 15*time.Minute {
		t.Fatalf("recorded %s, decision %+v", got.State, got.Decision)
	}
}
