package inbox

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/chromedp/chromedp"
)

// TestBrowserFatiguePage: an admin's Fatigue page, with a suggestion whose
// rule is one long line, lays out inside the page at 1440 and 390 px (no
// sideways scrolling), and shows the decider and the rule to paste.
func TestBrowserFatiguePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "infra-adapter")
	carol := b.callers["Carol (reviewer)"]
	start := time.Now().UTC()
	for i := range 12 {
		b.clock.set(start.Add(time.Duration(i) * time.Minute))
		id := b.toolCall(t, inst, "kubectl.rollout_restart", map[string]any{"namespace": "staging", "deployment": "search-indexer-" + string(rune('a'+i%3))}, "")
		b.clock.set(start.Add(time.Duration(i)*time.Minute + time.Duration(1+i)*time.Second))
		if _, err := b.svc.Decide(t.Context(), carol, id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.set(start.Add(20 * time.Minute))
	tb := b.signedInTab(t, b.admin)
	for _, w := range []int{1440, 390} {
		if w == 390 {
			tb.viewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)
		}
		tb.open("/fatigue")
		text := eval[string](tb, "document.body.innerText")
		for _, want := range []string{carol.Token.ID, "Suggestions (", "shadow: true", "namespace", "kubectl.rollout_restart"} {
			if !strings.Contains(text, want) {
				t.Fatalf("at %d px the page lacks %q:\n%s", w, want, text)
			}
		}
		if sw := eval[int](tb, "document.documentElement.scrollWidth"); sw > w {
			t.Errorf("the fatigue page at %d px scrolls sideways: %d px wide", w, sw)
		}
		name := "fatigue"
		if w == 390 {
			name = "phone-fatigue"
		}
		tb.screenshot(name)
	}
}
