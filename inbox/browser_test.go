package inbox

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's Chromium (apt-get install chromium)
// headless through chromedp. Outside CI they skip when it is missing;
// under CI=true they fail, so a CI machine without it cannot pass.

// chromiumPath is where Debian installs Chromium; AIRLOCK_CHROMIUM overrides it.
func chromiumPath() string {
	if p := os.Getenv("AIRLOCK_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// browser is the one Chromium process the package's tests share; each test
// gets its own browser context (its own cookies) and tab.
var browser struct {
	once        sync.Once
	ctx         context.Context
	cancel      context.CancelFunc
	allocCancel context.CancelFunc
	dir         string
	err         error
	// tabs bounds the tabs open at once: the machines have 2 cores.
	tabs chan struct{}
}

func startBrowser() {
	dir, err := os.MkdirTemp("", "airlock-chromium-")
	if err != nil {
		browser.err = err
		return
	}
	browser.dir = dir
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.UserDataDir(dir),
	}
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// The first Run starts the browser, which lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		allocCancel()
		browser.err = fmt.Errorf("start Chromium at %s: %w", chromiumPath(), err)
		return
	}
	browser.ctx, browser.cancel, browser.allocCancel = ctx, cancel, allocCancel
	browser.tabs = make(chan struct{}, 2)
}

// stopBrowser ends Chromium after the package's tests.
func stopBrowser() {
	if browser.cancel != nil {
		browser.cancel()
		browser.allocCancel()
	}
	if browser.dir != "" {
		os.RemoveAll(browser.dir)
	}
}

// tab is one test's browser tab, in a fresh browser context, with a hook
// that counts any script an attacker's text manages to run.
type tab struct {
	t   *testing.T
	ctx context.Context
	b   *bundle
	// viewportOpts are the options of the last viewport, for screenshot.
	viewportOpts []chromedp.EmulateViewportOption
}

// viewport emulates a screen of width × height with opts, and remembers
// opts for screenshots.
func (tb *tab) viewport(width, height int64, opts ...chromedp.EmulateViewportOption) {
	tb.t.Helper()
	tb.viewportOpts = opts
	tb.do(chromedp.EmulateViewport(width, height, opts...))
}

// phoneAndDesktop runs run as two subtests on tb: "phone", a 390 × 844
// mobile screen, then "desktop", 1440 × 900. It passes run the width.
func (tb *tab) phoneAndDesktop(t *testing.T, run func(t *testing.T, width int64)) {
	t.Helper()
	for _, size := range []struct {
		name          string
		width, height int64
		opts          []chromedp.EmulateViewportOption
	}{{"phone", 390, 844, []chromedp.EmulateViewportOption{chromedp.EmulateMobile}}, {"desktop", 1440, 900, nil}} {
		t.Run(size.name, func(t *testing.T) {
			tb.t = t
			tb.do(chromedp.EmulateViewport(size.width, size.height, size.opts...))
			run(t, size.width)
		})
	}
	tb.t = t
}

// hookScript runs before any script of every page: calls of alert,
// confirm, prompt and console.log, and a payload's own marker, all leave a
// trace in window.__xss.
const hookScript = `
window.__xss = 0;
window.__xssCalls = [];
(function () {
  var note = function (what) { return function () { window.__xss++; window.__xssCalls.push(what + ':' + Array.prototype.join.call(arguments, ',')); }; };
  window.alert = note('alert'); window.confirm = note('confirm'); window.prompt = note('prompt');
  console.log = note('console.log'); console.info = note('console.info');
  Object.defineProperty(window, '__pwned', { set: function (v) { window.__xss++; window.__xssCalls.push('__pwned=' + v); }, get: function () { return undefined; } });
})();
`

func (b *bundle) tab(t *testing.T) *tab {
	t.Helper()
	if _, err := os.Stat(chromiumPath()); err != nil {
		testkit.Unavailable(t, fmt.Sprintf("Chromium is not installed at %s (apt-get install -y chromium); skipping the browser test", chromiumPath()))
	}
	browser.once.Do(startBrowser)
	if browser.err != nil {
		t.Fatal(browser.err)
	}
	browser.tabs <- struct{}{}
	t.Cleanup(func() { <-browser.tabs })
	ctx, cancel := chromedp.NewContext(browser.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: hookScript}); err != nil {
		t.Fatalf("install the script hook: %v", err)
	}
	tb := &tab{t: t, ctx: ctx, b: b}
	tb.viewport(1100, 800)
	return tb
}

// signedInTab opens a tab signed in with token.
func (b *bundle) signedInTab(t *testing.T, token string) *tab {
	t.Helper()
	tb := b.tab(t)
	tb.signin(token)
	return tb
}

// stepTimeout bounds one browser step: generous, since the test machines
// are shared and a loaded one takes seconds to start a page.
const stepTimeout = 45 * time.Second

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("browser: %v (page: %s)", err, tb.location())
	}
}

func (tb *tab) location() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return loc
}

// eval evaluates a JavaScript expression.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v (page: %s)", expr, err, tb.location())
	}
	return v
}

// waitFor waits until a JavaScript expression is truthy. A navigation
// under way (a form just submitted) destroys the page the poll runs in;
// the poll then starts again on the new page.
func (tb *tab) waitFor(expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(tb.ctx, deadline)
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		if err == nil {
			return
		}
		if time.Now().Before(deadline) && (strings.Contains(err.Error(), "navigated") || strings.Contains(err.Error(), "context") && strings.Contains(err.Error(), "destroyed") || strings.Contains(err.Error(), "Cannot find context")) {
			continue
		}
		text, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText.slice(0, 2000) : ''"))
		tb.t.Fatalf("waiting for %s: %v (page: %s)\n%s", expr, err, tb.location(), text)
	}
}

// open navigates to an inbox path and returns the response's headers,
// after checking that the page carries the CSP and that no script of an
// attacker ran.
func (tb *tab) open(path string) http.Header {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	res, err := chromedp.Run(ctx, chromedp.NavigateResponse(tb.b.srv.URL+path))
	if err != nil {
		tb.t.Fatalf("open %s: %v", path, err)
	}
	h := http.Header{}
	for k, v := range res.Headers {
		h.Set(k, fmt.Sprint(v))
	}
	if got := h.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
		tb.t.Errorf("%s: Content-Security-Policy %q", path, got)
	}
	tb.noScriptRan()
	return h
}

// noScriptRan fails the test when a hooked function was called.
func (tb *tab) noScriptRan() {
	tb.t.Helper()
	if n := eval[int](tb, "window.__xss"); n != 0 {
		tb.t.Errorf("%s: %d script runs: %v", tb.location(), n, eval[[]string](tb, "window.__xssCalls"))
	}
}

// signin signs in through the form, as a person does.
func (tb *tab) signin(token string) {
	tb.t.Helper()
	tb.open("/signin")
	tb.do(
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`#signin-form button[type="submit"]`)),
	)
	tb.waitFor(`document.body.dataset.page === "pending"`)
}

// screenshot saves the page as a PNG under $AIRLOCK_SCREENSHOTS (relative
// to this package, e.g. ../docs/screenshots) or the test's temp dir.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	dir := os.Getenv("AIRLOCK_SCREENSHOTS")
	if dir == "" {
		dir = tb.t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	// Countdowns tick: wait for fonts and layout to settle on a frame.
	tb.waitFor(`document.fonts.status === "loaded"`)
	// A screen as tall as the page, so that what stays in view (the
	// decide bar) is where a reader scrolled to the end sees it.
	width, height := eval[int64](tb, "window.innerWidth"), eval[int64](tb, "window.innerHeight")
	full := eval[int64](tb, "document.documentElement.scrollHeight")
	tb.do(chromedp.EmulateViewport(width, full, tb.viewportOpts...))
	tb.waitFor(`new Promise(function (r) { requestAnimationFrame(function () { requestAnimationFrame(function () { r(true); }); }); })`)
	defer tb.do(chromedp.EmulateViewport(width, height, tb.viewportOpts...))
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s", path)
}

// text returns the text of the first element matching a CSS selector.
func (tb *tab) text(selector string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`(function(){ var e = document.querySelector(%q); return e ? e.textContent : "<missing " + %q + ">"; })()`, selector, selector))
}

// bodyText is the whole page's text, as the DOM holds it.
func (tb *tab) bodyText() string {
	tb.t.Helper()
	return eval[string](tb, "document.body.textContent")
}

func contains(haystack, needle string) bool { return strings.Contains(haystack, needle) }

// waitLive waits until the pending page says its live updates are on. A
// page still being parsed after a sign-in's redirect may not have the
// status element yet, so its absence is waited out, not an error.
func (tb *tab) waitLive() {
	tb.t.Helper()
	tb.waitFor(`(function () { var s = document.getElementById("live-status"); return s !== null && s.textContent.indexOf("Live") === 0; })()`)
}
