package inbox

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// luminanceJS is the relative luminance (0 black … 1 white) of an
// element's computed color property.
const luminanceJS = `(function (sel, prop) {
  var c = getComputedStyle(document.querySelector(sel))[prop].match(/[\d.]+/g).map(Number);
  var lin = function (v) { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
})`

// TestBrowserSmallThings: dark mode follows prefers-color-scheme; an
// unknown path shows the inbox's own 404 page, fit for a phone, while API
// clients keep JSON; board IDs are never broken mid-word; the sessions
// page shows each session's ID once.
func TestBrowserSmallThings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	reviewer := b.callers["Carol (reviewer)"]
	if _, err := b.svc.CreateColumn(ctx, reviewer, "doing", "Doing"); err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"Fix login timeout", "Upgrade Postgres to 17 and check every extension we use"} {
		if _, err := b.svc.CreateWorkItem(ctx, reviewer, title, "doing"); err != nil {
			t.Fatal(err)
		}
	}
	ses, err := b.svc.OpenSession(ctx, b.callers["release bot"], "Release 2.4", nil)
	if err != nil {
		t.Fatal(err)
	}
	inst := b.instance(t, "payments-adapter")
	id := b.toolCall(t, inst, "issue_refund", refundArgs, refundReasoning)

	tb := b.signedInTab(t, b.reviewer)

	t.Run("dark mode", func(t *testing.T) {
		tb.t = t
		for _, p := range []string{"/", "/requests/" + id, "/board"} {
			for _, scheme := range []string{"light", "dark"} {
				if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
					Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
				}); err != nil {
					t.Fatal(err)
				}
				tb.open(p)
				bg := eval[float64](tb, luminanceJS+`("body", "backgroundColor")`)
				ink := eval[float64](tb, luminanceJS+`("body", "color")`)
				panel := eval[float64](tb, luminanceJS+`(".panel, .row-link, .column", "backgroundColor")`)
				dark := bg < 0.05 && panel < 0.05 && ink > 0.6
				light := bg > 0.8 && ink < 0.05
				if scheme == "dark" && !dark || scheme == "light" && !light {
					t.Errorf("%s in %s: background %.2f, panel %.2f, text %.2f", p, scheme, bg, panel, ink)
				}
			}
		}
		if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("404 page", func(t *testing.T) {
		tb.t = t
		tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
		for _, p := range []string{"/nope", "/requests/apr_unknown/more", "/inbox/"} {
			tb.open(p) // checks the inbox's Content-Security-Policy
			if got := eval[string](tb, "document.body.dataset.page"); got != "error" {
				t.Errorf("%s: page %q, want the inbox's error page", p, got)
			}
			if got := tb.text("h1"); got != "Not found" {
				t.Errorf("%s: heading %q", p, got)
			}
			if w := eval[int](tb, "document.documentElement.scrollWidth"); w > 390 {
				t.Errorf("%s: %d px wide at 390", p, w)
			}
		}
		req, _ := http.NewRequest("GET", b.srv.URL+"/nope", nil)
		req.Header.Set("Accept", "application/json")
		res, err := b.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound || !strings.Contains(res.Header.Get("Content-Type"), "json") {
			t.Errorf("an API client got %d %s, want the API's JSON 404", res.StatusCode, res.Header.Get("Content-Type"))
		}
	})

	t.Run("board IDs whole", func(t *testing.T) {
		tb.t = t
		for _, w := range []int64{390, 1440} {
			tb.do(chromedp.EmulateViewport(w, 900))
			tb.open("/board")
			bad := eval[[]string](tb, `Array.prototype.filter.call(document.querySelectorAll(".card-id, .col-key code"), function (e) {
				var card = (e.closest(".card") || e.closest(".column")).getBoundingClientRect(), r = e.getBoundingClientRect();
				return e.getClientRects().length !== 1 || r.right > card.right + 0.5 || r.left < card.left - 0.5;
			}).map(function (e) { return e.textContent; })`)
			if len(bad) != 0 {
				t.Errorf("at %d px, IDs broken or out of their card: %v", w, bad)
			}
		}
	})

	t.Run("sessions", func(t *testing.T) {
		tb.t = t
		tb.open("/sessions")
		text := eval[string](tb, `document.querySelector('tr[data-id="`+ses.ID+`"]').innerText`)
		if n := strings.Count(text, ses.ID); n != 1 {
			t.Errorf("the session's ID shows %d times:\n%s", n, text)
		}
	})
	tb.t = t
}
