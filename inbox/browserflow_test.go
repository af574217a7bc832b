package inbox

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
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
	tb := b.tab(t)
	tb.signin(b.reviewer)
	tb.waitFor(`document.getElementById("live-status").textContent.indexOf("Live") === 0`)
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
	if got := tb.text("#digest"); got != sha256hex(b.get(t, id).Arguments) {
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
	tb.waitFor(`document.getElementById("live-status").textContent.indexOf("Live") === 0`)
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
	r := b.mcp(t, airlock.MCPRequestInput{Kind: airlock.KindAgentRequest, Title: "Which environment should I deploy the hotfix to first?",
		Description: "The fix for the login timeout is ready (PR #311). Staging is 2 versions behind production.",
		Question:    &airlock.Question{Choices: []string{"Staging", "Production", "Both at once"}}})
	tb := b.tab(t)
	tb.signin(b.reviewer)
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
	tb := b.tab(t)
	tb.signin(b.reviewer)
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
	tb.do(chromedp.Click(chromedp.ID("confirm-cancel")))
	tb.waitFor(`!document.getElementById("confirm").open`)
	if s := b.get(t, id2).State; s != airlock.StatePending {
		t.Fatalf("a cancelled confirmation recorded %s", s)
	}
}

// TestBrowserConfirmEveryDecision: a click or tap on Approve or Deny asks
// for the same confirmation as the keys, restating the tool, the validity
// and the note; cancelling records nothing; confirming records exactly
// what the dialog said. At desktop and phone sizes.
func TestBrowserConfirmEveryDecision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "payments-adapter")
	tb := b.tab(t)
	tb.signin(b.reviewer)
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
			tb.do(chromedp.Click(chromedp.ID("confirm-cancel")))
			tb.waitFor(`!document.getElementById("confirm").open`)
			if got := b.get(t, id).State; got != airlock.StatePending {
				t.Fatalf("a cancelled confirmation recorded %s", got)
			}

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
			tb.do(chromedp.Click(chromedp.ID("confirm-cancel")))
			tb.waitFor(`!document.getElementById("confirm").open`)

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

	tb := b.tab(t)
	tb.signin(b.reviewer)
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
