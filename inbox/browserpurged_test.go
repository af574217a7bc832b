package inbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/chromedp/chromedp"
)

// purgedRequest makes a denied request, purges its payloads with the
// retention an hour on, and returns its ID and when it was purged.
func purgedRequest(t *testing.T, b *bundle) (string, time.Time) {
	t.Helper()
	inst := b.instance(t, "payments-adapter")
	id := b.toolCall(t, inst, "issue_refund", refundArgs, refundReasoning)
	if _, err := b.svc.Decide(context.Background(), b.callers["Carol (reviewer)"], id, airlock.DecisionInput{Status: airlock.StateDenied, Note: "not twice"}); err != nil {
		t.Fatal(err)
	}
	b.clock.set(time.Now().Add(2 * time.Hour))
	if n, err := b.svc.PurgePayloads(context.Background()); err != nil || n != 1 {
		t.Fatalf("PurgePayloads = %d, %v; want the denied request", n, err)
	}
	purgedAt := b.get(t, id).PurgedAt
	if purgedAt == nil {
		t.Fatal("the request was not purged")
	}
	return id, *purgedAt
}

// TestPurgedRequestPage: the page of a purged request, as served, says
// when its arguments were purged and holds none of its payloads, and its
// row in the history says "(arguments purged)".
func TestPurgedRequestPage(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.retain = time.Hour })
	id, purgedAt := purgedRequest(t, b)
	c, _ := b.signedInClient(t, b.reviewer)
	page := c.do(t, "GET", "/requests/"+id, nil, nil)
	if page.status != 200 {
		t.Fatalf("GET the purged request: %d", page.status)
	}
	want := `Arguments purged on <time datetime="` + purgedAt.UTC().Format(time.RFC3339) + `">` + purgedAt.UTC().Format("2006-01-02 15:04:05 UTC") + `</time>`
	if !strings.Contains(page.body, want) {
		t.Fatalf("the purged request's page lacks %q:\n%s", want, page.body)
	}
	for _, gone := range []string{`id="arguments"`, `id="reasoning"`, `id="context"`, `id="digest"`, "cus_8812", "charged twice"} {
		if strings.Contains(page.body, gone) {
			t.Errorf("the purged request's page has %s", gone)
		}
	}
	// The history's row says so too, rather than showing no arguments.
	history := c.do(t, "GET", "/history", nil, nil)
	if history.status != 200 || !strings.Contains(history.body, "(arguments purged)") || strings.Contains(history.body, "cus_8812") {
		t.Errorf("the history (%d) of a purged request:\n%s", history.status, history.body)
	}
}

// TestBrowserPurgedRequest: once the payload retention purged a
// request's arguments, reasoning and context, its page says "Arguments
// purged on …" where the arguments were, and shows none of them, nor an
// empty box that would read as "no arguments".
func TestBrowserPurgedRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.retain = time.Hour })
	id, purgedAt := purgedRequest(t, b)
	tb := b.signedInTab(t, b.reviewer)
	tb.do(chromedp.Navigate(b.srv.URL + "/requests/" + id))
	tb.waitFor(`document.body.dataset.page === "request"`)
	got := tb.text("#purged")
	if want := "Arguments purged on " + purgedAt.UTC().Format("2006-01-02 15:04:05 UTC"); !strings.HasPrefix(got, want) {
		t.Fatalf("the purged request's page says %q; want it to start %q", got, want)
	}
	for _, gone := range []string{"#arguments", "#reasoning", "#context", "#digest"} {
		if n := eval[int](tb, `document.querySelectorAll("`+gone+`").length`); n != 0 {
			t.Errorf("the purged request's page has %s", gone)
		}
	}
	page := eval[string](tb, `document.body.innerText`)
	if strings.Contains(page, "cus_8812") || strings.Contains(page, refundReasoning[:20]) {
		t.Errorf("the purged request's page shows its payloads:\n%s", page)
	}
	if !strings.Contains(page, "issue_refund") || !strings.Contains(page, "not twice") {
		t.Errorf("the purged request's page lost its tool or decision:\n%s", page)
	}
}
