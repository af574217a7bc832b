package inbox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/chromedp/chromedp"
)

// TestBrowserBatch: on the pending list, ticked requests stay ticked when
// the live list changes; "Review selected" shows a table of every selected
// call in full (tool, arguments, size, digest, deadline) that fits the
// screen; Approve all opens one confirmation naming each call with its
// size and digest prefix, the validity and the note; confirming decides
// each as its own decision, and the page then shows each result, a
// refusal for one decided elsewhere in the meantime. At 390 and 1440 px.
func TestBrowserBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "ops-adapter")
	tb := b.signedInTab(t, b.reviewer)
	tb.phoneAndDesktop(t, func(t *testing.T, width int64) {
		long := strings.Repeat("INSERT INTO audit VALUES (1, 'x');\n", 40) + "DROP TABLE users;"
		ids := []string{
			b.toolCall(t, inst, "run_sql", map[string]any{"sql": long}, ""),
			b.toolCall(t, inst, "send_email", map[string]any{"to": "ops@example.com", "subject": "weekly report"}, ""),
			b.toolCall(t, inst, "restart_service", map[string]any{"name": "billing", "grace_seconds": 30}, ""),
		}
		tb.open("/")
		tb.waitLive()
		// Ticked in the page itself: the live list may be replaced between
		// a lookup and a click from outside (the ticks survive it).
		for _, id := range ids {
			tb.waitFor(fmt.Sprintf(`document.getElementById("pick-%s") !== null`, id))
			eval[any](tb, fmt.Sprintf(`document.getElementById("pick-%s").click()`, id))
		}
		// A new request changes the live list: the ticks stay.
		extra := b.toolCall(t, inst, "ls", map[string]any{"path": fmt.Sprint("/", width)}, "")
		tb.waitFor(fmt.Sprintf(`document.querySelector('.row[data-id=%q]') !== null`, extra))
		if n := eval[int](tb, `document.querySelectorAll("input.pick:checked").length`); n != 3 {
			t.Fatalf("%d rows ticked after the live list changed, want 3", n)
		}
		if width == 390 {
			tb.screenshot("batch-select")
		}
		tb.do(chromedp.Click(chromedp.ID("batch-review")))
		tb.waitFor(`document.body.dataset.page === "batch"`)
		if n := eval[int](tb, `document.querySelectorAll("#batch-table tbody tr").length`); n != 3 {
			t.Fatalf("the review shows %d rows, want 3", n)
		}
		text := tb.bodyText()
		for _, id := range ids {
			args := b.get(t, id).Arguments
			for _, want := range []string{argsDigest(args), byteCount(len(args))} {
				if !strings.Contains(text, want) {
					t.Errorf("the review lacks %s for %s", want, id)
				}
			}
		}
		// The whole of the long arguments is there, its end included.
		if got := eval[string](tb, `document.querySelector('.batch-row[data-id="`+ids[0]+`"] pre.json').textContent`); !strings.Contains(got, "DROP TABLE users;") {
			t.Errorf("the long arguments are not shown whole: …%s", got[max(0, len(got)-80):])
		}
		if over := eval[bool](tb, `document.documentElement.scrollWidth > window.innerWidth + 1`); over {
			t.Errorf("the review is wider than the %d px screen", width)
		}
		for _, id := range ids {
			if s := b.get(t, id).State; s != airlock.StatePending {
				t.Fatalf("the review recorded %s", s)
			}
		}
		// Decided elsewhere while the reviewer reads.
		if _, err := b.svc.Decide(context.Background(), b.callers["Dan (reviewer)"], ids[2], airlock.DecisionInput{Status: airlock.StateDenied, Note: "not now"}); err != nil {
			t.Fatal(err)
		}
		tb.do(chromedp.SetValue(chromedp.ID("batch-note"), "weekly run"))
		tb.do(chromedp.Click(chromedp.ID("batch-approve")))
		tb.waitFor(`document.getElementById("confirm").open`)
		if got := tb.text("#confirm-h"); got != "Approve 3 requests?" {
			t.Errorf("confirmation heading %q", got)
		}
		listed := tb.text("#confirm-batch")
		for _, want := range []string{"run_sql", "send_email", "restart_service", "sha256:", "bytes"} {
			if !strings.Contains(listed, want) {
				t.Errorf("the confirmation lacks %q: %s", want, listed)
			}
		}
		if got := tb.text("#confirm-note"); got != "weekly run" {
			t.Errorf("confirmation note %q", got)
		}
		if width == 390 {
			tb.screenshot("batch-confirm")
		}
		tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
		tb.waitFor(`document.body.dataset.page === "batch" && document.getElementById("batch-summary") !== null`)
		if got := tb.text("#batch-h"); got != "Approved 2 of 3" {
			t.Errorf("results heading %q", got)
		}
		if got := tb.text(`.batch-row[data-id="` + ids[2] + `"] .batch-result`); !strings.Contains(got, "already denied") {
			t.Errorf("the result of the one decided elsewhere: %q", got)
		}
		for i, want := range []airlock.State{airlock.StateApproved, airlock.StateApproved, airlock.StateDenied} {
			got := b.get(t, ids[i])
			if got.State != want {
				t.Errorf("%s is %s, want %s", ids[i], got.State, want)
			}
			if want == airlock.StateApproved && got.Decision.Note != "weekly run" {
				t.Errorf("%s note %q", ids[i], got.Decision.Note)
			}
		}
		if width == 1440 {
			tb.screenshot("batch-results")
		}
	})
}
