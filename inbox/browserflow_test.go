package inbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
	"github.com/chromedp/chromedp"
)

// refundArgs and refundReasoning make a realistic tool call for pages and
// screenshots.
var refundArgs = map[string]any{
	"customer_id": "cus_8812", "amount_cents": 4900, "currency": "EUR",
	"reason": "duplicate charge", "order": map[string]any{"id": "5521", "lines": []any{"Espresso grinder"}},
}

const refundReasoning = "The customer was charged twice for order #5521 (see the two charges in the context).\nA refund of the second charge fixes it; I checked the order history and no refund was issued yet."

// TestBrowserReviewFlow: sign in; a request created over REST appears in
// the open list without a reload; approve it from its page with the
// keyboard (a, then confirm); it leaves the list; one decided elsewhere
// leaves the open list live too.
func TestBrowserReviewFlow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "payments-adapter")
	tb := b.signedInTab(t, b.reviewer)
	tb.waitLive()
	eval[int](tb, "window.__sameDocument = 42")

	status, out := b.createREST(t, inst, map[string]any{"tool": "issue_refund", "arguments": refundArgs, "timeout": "30m",
		"agent_reasoning": refundReasoning, "context": map[string]any{"charges": []any{"ch_1 4900 EUR 09:14", "ch_2 4900 EUR 09:14"}}})
	if status != 201 {
		t.Fatalf("create over REST: %d %v", status, out)
	}
	id := out["id"].(string)
	tb.waitFor(`document.querySelector('.row[data-id="` + id + `"]') !== null`)
	if eval[int](tb, "window.__sameDocument") != 42 {
		t.Fatal("the page reloaded: the request should have appeared live")
	}
	tb.waitFor(`document.title === "(1) Pending · Airlock"`)
	if got := tb.text("#nav-count"); got != "1" {
		t.Errorf("nav count %q, want 1", got)
	}

	// Keyboard: j selects the first row, Enter opens it.
	tb.do(chromedp.KeyEvent("j"))
	tb.waitFor(`document.activeElement.classList.contains("row-link")`)
	tb.do(chromedp.KeyEvent("\r"))
	tb.waitFor(`document.body.dataset.page === "request"`)
	tb.noScriptRan()
	if got := tb.text("#claim-h"); got != "The agent's claim (unverified)" {
		t.Errorf("claim heading %q", got)
	}
	if got := tb.text("#digest"); got != tokenDigest(b.get(t, id).Arguments) {
		t.Errorf("digest %q", got)
	}

	tb.do(chromedp.SetValue(chromedp.ID("valid_for"), "15m"))
	tb.do(chromedp.KeyEvent("a"))
	tb.waitFor(`document.getElementById("confirm").open`)
	if got := tb.text("#confirm-text"); !contains(got, "issue_refund") || !contains(got, "15m") {
		t.Errorf("confirmation text %q", got)
	}
	tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
	tb.waitFor(`document.getElementById("flash") && document.getElementById("flash").textContent.indexOf("Approved.") >= 0`)
	got := b.get(t, id)
	if got.State != airlock.StateApproved || got.Decision.DecidedBy != b.callers["Carol (reviewer)"].ID {
		t.Fatalf("state %s, decision %+v", got.State, got.Decision)
	}

	tb.open("/")
	tb.waitLive()
	if eval[bool](tb, `document.querySelector('.row[data-id="`+id+`"]') !== null`) {
		t.Fatal("the approved request is still listed")
	}
	eval[int](tb, "window.__sameDocument = 43")
	other := b.toolCall(t, inst, "deploy", map[string]any{"service": "api", "version": "2.4.1"}, "")
	tb.waitFor(`document.querySelector('.row[data-id="` + other + `"]') !== null`)
	if _, err := b.svc.Decide(context.Background(), b.callers["Dan (reviewer)"], other, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(`document.querySelector('.row[data-id="` + other + `"]') === null`)
	tb.waitFor(`document.title === "Pending · Airlock"`)
	if eval[int](tb, "window.__sameDocument") != 43 {
		t.Fatal("the page reloaded: the request should have left live")
	}
	tb.noScriptRan()
}

// TestBrowserQuestion: a question with choices shows one button per
// choice; clicking one answers it.
func TestBrowserQuestion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.mcp(t, provider.MCPRequestInput{Kind: airlock.KindAgentRequest, Title: "Which environment should I deploy the hotfix to first?",
		Description: "The fix for the login timeout is ready (PR #311). Staging is 2 versions behind production.",
		Question:    &airlock.Question{Choices: []string{"Staging", "Production", "Both at once"}}})
	tb := b.signedInTab(t, b.reviewer)
	tb.open("/requests/" + r.ID)
	if n := eval[int](tb, `document.querySelectorAll("button.choice").length`); n != 3 {
		t.Fatalf("%d choice buttons, want 3", n)
	}
	tb.do(chromedp.Click(chromedp.CSS(`button.choice[value="Production"]`)))
	tb.waitFor(`document.getElementById("confirm").open`)
	if got := tb.text("#confirm-answer"); got != "Production" {
		t.Errorf("the confirmation shows the answer %q", got)
	}
	tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
	tb.waitFor(`document.getElementById("flash") && document.getElementById("flash").textContent.indexOf("Answered.") >= 0`)
	got := b.get(t, r.ID)
	if got.State != airlock.StateApproved || got.Decision.Answer != "Production" {
		t.Fatalf("state %s, decision %+v", got.State, got.Decision)
	}
	if got := tb.text("#decision-answer"); got != "Production" {
		t.Errorf("the page shows the answer %q", got)
	}
	tb.noScriptRan()
}

// TestBrowserDenyWithNote: write a note, press d, confirm: denied, with
// the note, and the page says so.
func TestBrowserDenyWithNote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "infra-adapter")
	id := b.toolCall(t, inst, "drop_table", map[string]any{"database": "prod", "table": "sessions"}, "The sessions table is unused.")
	tb := b.signedInTab(t, b.reviewer)
	tb.open("/requests/" + id)
	tb.do(chromedp.SendKeys(chromedp.ID("deny-note"), "Not on production. Open a ticket first."))
	eval[bool](tb, "(document.activeElement.blur(), true)")
	tb.do(chromedp.KeyEvent("d"))
	tb.waitFor(`document.getElementById("confirm").open`)
	if got := tb.text("#confirm-text"); !contains(got, "Not on production. Open a ticket first.") {
		t.Errorf("the confirmation does not show the note: %q", got)
	}
	tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
	tb.waitFor(`document.getElementById("flash") && document.getElementById("flash").textContent.indexOf("Denied.") >= 0`)
	got := b.get(t, id)
	if got.State != airlock.StateDenied || got.Decision.Note != "Not on production. Open a ticket first." {
		t.Fatalf("state %s, decision %+v", got.State, got.Decision)
	}
	if got := tb.text("#decision-note"); got != "Not on production. Open a ticket first." {
		t.Errorf("the page shows the note %q", got)
	}

	// Cancelling the confirmation records nothing.
	id2 := b.toolCall(t, inst, "drop_table", map[string]any{"database": "prod", "table": "users"}, "")
	tb.open("/requests/" + id2)
	tb.do(chromedp.KeyEvent("d"))
	tb.waitFor(`document.getElementById("confirm").open`)
	tb.cancelConfirm(id2)
}

// TestBrowserConfirmEveryDecision: a click or tap on Approve or Deny asks
// for the same confirmation as the keys, restating the tool, the validity
// and the note; cancelling records nothing; confirming records exactly
// what the dialog said. At desktop and phone sizes.
func TestBrowserConfirmEveryDecision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "payments-adapter")
	tb := b.signedInTab(t, b.reviewer)
	for _, size := range []struct {
		name   string
		mobile bool
	}{{"desktop", false}, {"phone", true}} {
		t.Run(size.name, func(t *testing.T) {
			tb.t = t
			if size.mobile {
				tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
			} else {
				tb.do(chromedp.EmulateViewport(1440, 900))
			}
			id := b.toolCall(t, inst, "issue_refund", refundArgs, refundReasoning)
			tb.open("/requests/" + id)
			// The reviewer reads the arguments to their end (on a phone the
			// decide bar hides their lower lines as the page opens).
			eval[any](tb, `document.getElementById("args-end").scrollIntoView({block: "center"})`)
			tb.waitFor(`new Promise(function (r) { requestAnimationFrame(function () { requestAnimationFrame(function () { r(true); }); }); })`)
			tb.do(chromedp.SetValue(chromedp.ID("valid_for"), "15m"))
			tb.do(chromedp.SendKeys(chromedp.ID("approve-note"), "refund once"))
			tb.do(chromedp.Click(chromedp.CSS("#approve-form button.approve")))
			tb.waitFor(`document.getElementById("confirm").open`)
			if got := b.get(t, id).State; got != airlock.StatePending {
				t.Fatalf("a click on Approve recorded %s before any confirmation", got)
			}
			for sel, want := range map[string]string{"#confirm-tool": "issue_refund", "#confirm-validity": "15m", "#confirm-note": "refund once", "#confirm-h": "Approve this request?"} {
				if got := tb.text(sel); got != want {
					t.Errorf("%s shows %q, want %q", sel, got, want)
				}
			}
			// The call itself: the arguments whole, as the page shows them,
			// with their size and digest.
			if got, want := tb.text("#confirm-arguments"), tb.text("#arguments"); got != want || !contains(got, `"customer_id": "cus_8812"`) {
				t.Errorf("the confirmation shows the arguments %q, want the page's %q", got, want)
			}
			stored := b.get(t, id).Arguments
			if got := tb.text("#confirm-digest"); !contains(got, tokenDigest(stored)[:19]+"…") || !contains(got, fmt.Sprintf("%d bytes", len(stored))) {
				t.Errorf("the confirmation's size and digest %q", got)
			}
			// Short arguments are on screen as the page opens: seen in full.
			if got := tb.text("#confirm-seen"); got != "yes" {
				t.Errorf("the confirmation's seen in full %q, want yes", got)
			}
			tb.cancelConfirm(id)

			// Deny by click: the same dialog, with the deny note.
			tb.do(chromedp.SendKeys(chromedp.ID("deny-note"), "not this week"))
			tb.do(chromedp.Click(chromedp.CSS("#deny-form button.deny")))
			tb.waitFor(`document.getElementById("confirm").open`)
			if got := tb.text("#confirm-note"); got != "not this week" {
				t.Errorf("deny confirmation shows the note %q", got)
			}
			if got := tb.text("#confirm-tool"); got != "issue_refund" {
				t.Errorf("deny confirmation shows the tool %q", got)
			}
			tb.cancelConfirm(id)
			if n := eval[int](tb, `document.querySelectorAll('input[name="confirmed"]').length`); n != 0 {
				t.Errorf("a cancelled confirmation left %d confirmed marks in the forms", n)
			}

			// Approve by click, confirmed: what the dialog said is recorded.
			tb.do(chromedp.Click(chromedp.CSS("#approve-form button.approve")))
			tb.waitFor(`document.getElementById("confirm").open`)
			tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
			tb.waitFor(`document.getElementById("flash") && document.getElementById("flash").textContent.indexOf("Approved.") >= 0`)
			got := b.get(t, id)
			if got.State != airlock.StateApproved || got.Decision.Note != "refund once" || got.Decision.ExpiresAt.Sub(got.Decision.DecidedAt) != 15*time.Minute {
				t.Fatalf("recorded %s, decision %+v", got.State, got.Decision)
			}
			tb.noScriptRan()
		})
	}
	tb.t = t
}

// TestBrowserNames: people and instances appear by name, token IDs only as
// secondary detail: in the history, the outcome panel, the request's
// source and the sessions page. A decider that is no token (expiry) shows
// as it is.
func TestBrowserNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	inst := b.instance(t, "payments-adapter")
	id := b.toolCall(t, inst, "issue_refund", refundArgs, "")
	if _, err := b.svc.Decide(ctx, b.callers["Dan (reviewer)"], id, airlock.DecisionInput{Status: airlock.StateDenied, Note: "no"}); err != nil {
		t.Fatal(err)
	}
	status, out := b.createREST(t, inst, map[string]any{"tool": "deploy", "arguments": map[string]any{}, "timeout": "1ms"})
	if status != 201 {
		t.Fatalf("create: %d %v", status, out)
	}
	expired := out["id"].(string)
	ses, err := b.svc.OpenSession(ctx, b.callers["release bot"], "Release 2.4", nil)
	if err != nil {
		t.Fatal(err)
	}
	danID := b.callers["Dan (reviewer)"].ID
	botID := b.callers["release bot"].ID

	tb := b.signedInTab(t, b.reviewer)
	tb.open("/requests/" + id)
	if got := tb.text("#decided-by"); got != "Dan (reviewer)" {
		t.Errorf("outcome: decided by %q, want the token's name", got)
	}
	if got := tb.text("#asked-by"); !contains(got, "release bot") || !contains(got, botID) {
		t.Errorf("source: asked by %q, want the agent's name and, secondary, its ID", got)
	}
	// A long poll returns once the scheduler has expired it.
	if r, err := b.svc.Request(ctx, b.callers["Carol (reviewer)"], expired, 15*time.Second); err != nil || r.State != airlock.StateExpired {
		t.Fatalf("the 1ms request: %v, %v", r.State, err)
	}
	tb.open("/history")
	row := `.row[data-id="` + id + `"] .decider`
	if got := tb.text(row); got != "Dan (reviewer)" {
		t.Errorf("history: decided by %q, want Dan (reviewer)", got)
	}
	if got := eval[string](tb, `document.querySelector('`+row+`').title`); got != danID {
		t.Errorf("history: the decider's ID %q is not kept as detail", got)
	}
	if got := tb.text(`.row[data-id="` + expired + `"] .decider`); got != airlock.ActorExpiry {
		t.Errorf("history: expiry decided by %q, want %q", got, airlock.ActorExpiry)
	}
	if contains(eval[string](tb, `document.getElementById("history-list").innerText`), "tok_") {
		t.Errorf("history shows token IDs as text:\n%s", eval[string](tb, `document.getElementById("history-list").innerText`))
	}
	tb.open("/sessions")
	if got := tb.text(`tr[data-id="` + ses.ID + `"] .owner`); got != "release bot" {
		t.Errorf("sessions: agent %q, want release bot", got)
	}
}

// TestBrowserLongClaimFolds: 4 KB of reasoning folds after a few lines
// with a "Show all" that unfolds it, and the decide bar is within the
// screen as the page opens, at phone and desktop sizes; the bar's Approve
// asks the same confirmation as the form.
func TestBrowserLongClaimFolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "payments-adapter")
	reasoning := strings.Repeat("The customer was charged twice and I checked every ledger entry again. ", 57) + "END"
	if len(reasoning) < 4000 {
		t.Fatalf("reasoning is %d bytes, want 4 KB", len(reasoning))
	}
	tb := b.signedInTab(t, b.reviewer)
	tb.phoneAndDesktop(t, func(t *testing.T, _ int64) {
		id := b.toolCall(t, inst, "issue_refund", refundArgs, reasoning)
		tb.open("/requests/" + id)
		if h := eval[float64](tb, `document.getElementById("reasoning").getBoundingClientRect().height`); h > 250 {
			t.Errorf("the folded claim is %.0f px tall", h)
		}
		if eval[bool](tb, `document.getElementById("reasoning-more").hidden`) {
			t.Fatal("no Show all for a long claim")
		}
		inView := `(function (id) { var r = document.getElementById(id).getBoundingClientRect();
				return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0 && r.right <= document.documentElement.clientWidth; })`
		// The decide bar, or, when the Decide form is on screen (the bar
		// then steps aside), the form's own buttons.
		reach := `(` + inView + `("bar-approve") && ` + inView + `("bar-deny")) || (function () {
				var r = document.querySelector("#approve-form button.approve").getBoundingClientRect();
				return r.top >= 0 && r.bottom <= window.innerHeight; })()`
		if !eval[bool](tb, reach) {
			t.Errorf("no decision control is within the screen: %v", eval[any](tb, `JSON.stringify(document.getElementById("bar-approve").getBoundingClientRect())`))
		}
		tb.do(chromedp.Click(chromedp.ID("reasoning-more")))
		tb.lastVisible("#reasoning", "END")
		// Scrolled half-way, the bar is still within reach.
		eval[bool](tb, `(window.scrollTo(0, document.documentElement.scrollHeight / 3), true)`)
		tb.waitFor(inView + `("bar-approve")`)
		tb.do(chromedp.Click(chromedp.ID("bar-approve")))
		tb.waitFor(`document.getElementById("confirm").open`)
		if got := tb.text("#confirm-tool"); got != "issue_refund" {
			t.Errorf("the bar's confirmation names %q", got)
		}
		tb.cancelConfirm(id)
	})
}

// TestBrowserDecidedElsewhere: a request page open while another reviewer
// decides shows the outcome at once, without a reload: who, when and the
// note; its countdown stops and its controls are disabled.
func TestBrowserDecidedElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "payments-adapter")
	id := b.toolCall(t, inst, "issue_refund", refundArgs, refundReasoning)
	tb := b.signedInTab(t, b.reviewer)
	tb.open("/requests/" + id)
	eval[int](tb, "window.__sameDocument = 7")
	// Decided before or after the page's stream opens, the page learns
	// it from the stream's first or next event.
	tb.do(chromedp.SendKeys(chromedp.ID("approve-note"), "half-written"))
	if _, err := b.svc.Decide(context.Background(), b.callers["Dan (reviewer)"], id, airlock.DecisionInput{Status: airlock.StateDenied, Note: "Refunded by phone already."}); err != nil {
		t.Fatal(err)
	}
	tb.waitFor(`document.getElementById("outcome") !== null`)
	if eval[int](tb, "window.__sameDocument") != 7 {
		t.Fatal("the page reloaded")
	}
	if got := tb.text("#decided-by"); got != "Dan (reviewer)" {
		t.Errorf("decided by %q", got)
	}
	if got := tb.text("#decision-note"); got != "Refunded by phone already." {
		t.Errorf("note %q", got)
	}
	if got := tb.text("#outcome time"); !contains(got, "UTC") {
		t.Errorf("when %q", got)
	}
	if got := tb.text("#live-state"); !contains(got, "denied") || !contains(got, "Dan (reviewer)") {
		t.Errorf("the notice says %q", got)
	}
	if n := eval[int](tb, `document.querySelectorAll("[data-deadline]").length`); n != 0 {
		t.Errorf("%d countdowns still running", n)
	}
	if got := tb.text(".deadline-line .countdown"); got != "denied" {
		t.Errorf("the countdown shows %q", got)
	}
	if n := eval[int](tb, `Array.prototype.filter.call(document.querySelectorAll("#decide button, #decide textarea, #decide select, #decide-bar button"), function (e) { return !e.disabled; }).length`); n != 0 {
		t.Errorf("%d decision controls still enabled", n)
	}
	if eval[bool](tb, `getComputedStyle(document.getElementById("decide-bar")).display !== "none"`) {
		t.Error("the decide bar is still shown")
	}
	// The keys do nothing now.
	eval[bool](tb, "(document.activeElement.blur(), true)")
	tb.do(chromedp.KeyEvent("a"))
	if eval[bool](tb, `document.getElementById("confirm").open`) {
		t.Error("a opened a confirmation on a decided request")
	}
}

// TestBrowserHistoryLookAlikes: a history search matches the confusable
// skeleton (Unicode TS #39) as well as the text: "paypal" finds the
// request whose arguments say "pаypal" with a Cyrillic а, marked as a
// look-alike match, and the plain "paypal" one unmarked.
func TestBrowserHistoryLookAlikes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	inst := b.instance(t, "payments-adapter")
	spoof := b.toolCall(t, inst, "send_payment", map[string]any{"to": "billing@p\u0430ypal.com", "amount": 100}, "")
	real := b.toolCall(t, inst, "send_payment", map[string]any{"to": "billing@paypal.com", "amount": 100}, "")
	other := b.toolCall(t, inst, "send_payment", map[string]any{"to": "billing@stripe.com", "amount": 100}, "")
	for _, id := range []string{spoof, real, other} {
		if _, err := b.svc.Decide(ctx, b.callers["Dan (reviewer)"], id, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
			t.Fatal(err)
		}
	}
	tb := b.signedInTab(t, b.reviewer)
	tb.open("/history?q=PayPal")
	ids := eval[[]string](tb, `Array.prototype.map.call(document.querySelectorAll("#history-list .row"), function (r) { return r.dataset.id; })`)
	if len(ids) != 2 || !slices.Contains(ids, spoof) || !slices.Contains(ids, real) {
		t.Fatalf("found %v, want the look-alike %s and the plain %s", ids, spoof, real)
	}
	if !eval[bool](tb, `document.querySelector('.row[data-id="`+spoof+`"] .badge.lookalike') !== null`) {
		t.Error("the look-alike hit is not marked")
	}
	if eval[bool](tb, `document.querySelector('.row[data-id="`+real+`"] .badge.lookalike') !== null`) {
		t.Error("the plain hit is marked as a look-alike")
	}
	// The look-alike itself finds both too.
	tb.open("/history?q=p%D0%B0ypal")
	if n := eval[int](tb, `document.querySelectorAll("#history-list .row").length`); n != 2 {
		t.Errorf("searching the look-alike found %d, want 2", n)
	}
}

// cancelConfirm answers the open confirmation dialog with Cancel, waits
// for it to close, and checks that it recorded nothing: request id is
// still pending.
func (tb *tab) cancelConfirm(id string) {
	tb.t.Helper()
	tb.do(chromedp.Click(chromedp.ID("confirm-cancel")))
	tb.waitFor(`!document.getElementById("confirm").open`)
	if s := tb.b.get(tb.t, id).State; s != airlock.StatePending {
		tb.t.Fatalf("a cancelled confirmation recorded %s", s)
	}
}
