package inbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/chromedp/chromedp"
)

// frame waits for two animation frames, so that scroll handlers have run.
const frame = `new Promise(function (r) { requestAnimationFrame(function () { requestAnimationFrame(function () { r(true); }); }); })`

// dropOnScreen is true when the "DROP TABLE" at the end of the arguments
// is laid out inside the viewport, above the decide bar.
const dropOnScreen = `(function () {
  var pre = document.getElementById("arguments");
  var walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  var node, at = -1;
  while ((node = walker.nextNode())) { at = node.data.indexOf("DROP TABLE"); if (at >= 0) break; }
  if (!node) return false;
  var range = document.createRange();
  range.setStart(node, at); range.setEnd(node, at + 10);
  var r = range.getBoundingClientRect();
  var bottom = window.innerHeight;
  var bar = document.getElementById("decide-bar");
  if (bar && !bar.classList.contains("away")) bottom = Math.min(bottom, bar.getBoundingClientRect().top);
  return r.height > 0 && r.top >= 0 && r.bottom <= bottom;
})()`

// TestBrowserSeeingAll: a 9 kB SQL argument whose DROP TABLE is at its
// end. The size and the approval token's digest come before the
// arguments; the part not yet on screen is marked; "Jump to the end" puts
// the DROP TABLE on screen in one action; the confirmation says the
// arguments were not seen in full until they were all scrolled through,
// and then says yes. At 390 and 1440 px.
func TestBrowserSeeingAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "sql-adapter")
	tb := b.signedInTab(t, b.reviewer)
	tb.phoneAndDesktop(t, func(t *testing.T, width int64) {
		sql := strings.Repeat("UPDATE accounts SET flagged = false WHERE id IN (SELECT id FROM staging);\n", 120) + "DROP TABLE users;"
		id := b.toolCall(t, inst, "run_sql", map[string]any{"sql": sql, "database": "prod"}, "routine cleanup")
		args := b.get(t, id).Arguments
		tb.open("/requests/" + id)
		tb.waitFor(frame)

		// Size and digest first, the token's digest, exactly.
		if !eval[bool](tb, `!!(document.getElementById("args-facts").compareDocumentPosition(document.getElementById("arguments")) & Node.DOCUMENT_POSITION_FOLLOWING)`) {
			t.Error("the size and digest do not come before the arguments")
		}
		if got := tb.text("#digest"); got != tokenDigest(args) {
			t.Errorf("digest %q, want the approval token's %q", got, tokenDigest(args))
		}
		if got := tb.text("#args-size"); got != byteCount(len(args)) {
			t.Errorf("size %q, want %q", got, byteCount(len(args)))
		}
		if eval[bool](tb, dropOnScreen) {
			t.Fatal("the DROP TABLE is on screen as the page opens: the test proves nothing")
		}
		if eval[bool](tb, `document.getElementById("args-unseen").hidden`) || !strings.HasPrefix(tb.text("#args-seen"), "Not yet seen") ||
			!strings.Contains(tb.text("#args-unseen-text"), "below") {
			t.Errorf("no marker on the unseen arguments: %q, %q", tb.text("#args-seen"), tb.text("#args-unseen-text"))
		}
		// The marker is on screen, above the decide bar, where the unseen
		// part begins.
		if !eval[bool](tb, `(function () { var r = document.getElementById("args-unseen").getBoundingClientRect(); var bar = document.getElementById("decide-bar");
			var bottom = bar && !bar.classList.contains("away") ? bar.getBoundingClientRect().top : window.innerHeight;
			return r.height > 0 && r.top >= 0 && r.bottom <= bottom + 1; })()`) {
			t.Error("the marker is not on screen as the page opens")
		}
		if width == 390 {
			tb.viewShot("seeing-marker")
		}

		// One action reaches the end.
		tb.do(chromedp.Click(chromedp.ID("args-jump")))
		tb.waitFor(frame)
		if !eval[bool](tb, dropOnScreen) {
			t.Error("after Jump to the end the DROP TABLE is not on screen")
		}
		if eval[bool](tb, `document.getElementById("args-unseen").hidden`) || !strings.Contains(tb.text("#args-unseen-text"), "above (skipped)") {
			t.Errorf("after a jump the middle is unseen, but the marker says %q", tb.text("#args-unseen-text"))
		}
		if width == 390 {
			tb.viewShot("seeing-jump") // the screen as it is: a full-page shot would show it all
		}

		tb.do(chromedp.Click(chromedp.ID("bar-approve")))
		tb.waitFor(`document.getElementById("confirm").open`)
		if got := tb.text("#confirm-seen"); !strings.HasPrefix(got, "no: ") {
			t.Errorf("seen in full %q, want no", got)
		}
		if got, want := tb.text("#confirm-digest"), byteCount(len(args))+", "+tokenDigest(args)[:19]+"…"; got != want {
			t.Errorf("the confirmation's size and digest %q, want %q", got, want)
		}
		tb.cancelConfirm(id)

		// Scrolled through, the marker goes and the confirmation says yes.
		eval[any](tb, `window.scrollTo(0, 0)`)
		tb.waitFor(frame)
		for i := 0; i < 200 && !strings.HasPrefix(tb.text("#args-seen"), "Seen in full"); i++ {
			eval[any](tb, `window.scrollBy(0, Math.floor(window.innerHeight / 3))`)
			tb.waitFor(frame)
		}
		if got := tb.text("#args-seen"); got != "Seen in full." {
			t.Fatalf("after scrolling through: %q", got)
		}
		if !eval[bool](tb, `document.getElementById("args-unseen").hidden`) {
			t.Error("the marker stays after the arguments were all seen")
		}
		tb.do(chromedp.Click(chromedp.ID("bar-approve")))
		tb.waitFor(`document.getElementById("confirm").open`)
		if got := tb.text("#confirm-seen"); got != "yes" {
			t.Errorf("seen in full %q, want yes", got)
		}
		if width == 1440 {
			tb.screenshot("seeing-confirm")
		}
		tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
		tb.waitFor(`document.body.dataset.page === "request" && document.getElementById("flash") !== null`)
		got := b.get(t, id)
		if got.State != airlock.StateApproved {
			t.Fatalf("after confirming: %s", got.State)
		}
		// What the page measured is recorded with the decision, as its
		// claim, and shown with the outcome.
		if rv := got.Decision.Review; rv == nil || rv.SeenFraction != 1 || rv.SecondsOpen < 0 || rv.SecondsOpen > 600 {
			t.Fatalf("the decision's review claim: %+v", rv)
		}
		if got := tb.text("#decision-review"); !strings.HasPrefix(got, "seen in full, open ") {
			t.Errorf("the outcome shows the claim %q", got)
		}
	})
}

// viewShot saves what the screen shows now, without the full page's
// resize that tb.screenshot makes (which would put everything on screen),
// under $AIRLOCK_SCREENSHOTS or the test's temp dir.
func (tb *tab) viewShot(name string) {
	tb.t.Helper()
	dir := os.Getenv("AIRLOCK_SCREENSHOTS")
	if dir == "" {
		dir = tb.t.TempDir()
	}
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s", path)
}
