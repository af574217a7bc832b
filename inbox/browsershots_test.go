package inbox

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestBrowserScreenshots fills a server with a realistic morning's work and
// saves a screenshot of each page — pending list, request, question,
// sessions, board, history, and the list and a request at phone width
// (390 px), the confirmation and the request in dark mode — to $AIRLOCK_SCREENSHOTS or the test's temp dir. It checks
// that the phone layout does not scroll sideways.
func TestBrowserScreenshots(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	reviewer := b.callers["Carol (reviewer)"]
	agent := b.callers["release bot"]

	for _, col := range [][2]string{{"todo", "To do"}, {"doing", "Doing"}, {"review", "In review"}, {"done", "Done"}} {
		if _, err := b.svc.CreateColumn(ctx, reviewer, col[0], col[1]); err != nil {
			t.Fatal(err)
		}
	}
	items := map[string]airlock.WorkItem{}
	for _, it := range [][2]string{{"Fix login timeout", "doing"}, {"Rotate API keys", "todo"}, {"Upgrade Postgres to 17", "todo"}, {"Write release notes", "review"}, {"Remove legacy export", "done"}} {
		w, err := b.svc.CreateWorkItem(ctx, reviewer, it[0], it[1])
		if err != nil {
			t.Fatal(err)
		}
		items[it[0]] = w
	}
	deploy, err := b.svc.OpenSession(ctx, agent, "Release 2.4: login fix", nil)
	if err != nil {
		t.Fatal(err)
	}
	triage, err := b.svc.OpenSession(ctx, agent, "Nightly dependency triage", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.svc.Heartbeat(ctx, agent, triage.ID); err != nil {
		t.Fatal(err)
	}
	old, err := b.svc.OpenSession(ctx, agent, "Docs cleanup", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.CloseSession(ctx, agent, old.ID); err != nil {
		t.Fatal(err)
	}

	payments := b.instance(t, "payments-adapter")
	infra := b.instance(t, "infra-adapter")
	refund := b.toolCall(t, payments, "issue_refund", refundArgs, refundReasoning)
	b.toolCall(t, infra, "kubectl.scale", map[string]any{"namespace": "prod", "deployment": "api", "replicas": 6}, "Traffic is 3x the usual for a Monday; p99 latency is 1.8 s.")
	move := b.mcp(t, provider.MCPRequestInput{Title: "Move “Fix login timeout” to review", Description: "The fix is merged and deployed to staging; tests pass.",
		SessionID: deploy.ID, TargetType: "work_item", TargetID: items["Fix login timeout"].ID,
		Proposal: &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{Method: airlock.MethodWorkMove,
			Input: json.RawMessage(`{"itemId":"` + items["Fix login timeout"].ID + `","columnKey":"review"}`)}}})
	question := b.mcp(t, provider.MCPRequestInput{Kind: airlock.KindAgentRequest, Title: "Which environment should I deploy the hotfix to first?",
		Description: "The login-timeout fix (PR #311) is ready. Staging is two versions behind production.", SessionID: deploy.ID,
		Question: &airlock.Question{Choices: []string{"Staging", "Production", "Both at once"}}})
	b.mcp(t, provider.MCPRequestInput{Kind: airlock.KindMemoryChange, Title: "Remember: the billing team owns refunds over €500", TargetType: "memory", TargetID: "team-ownership"})
	done := b.toolCall(t, payments, "issue_refund", map[string]any{"customer_id": "cus_1207", "amount_cents": 129900, "currency": "EUR"}, "Customer asked nicely.")
	if _, err := b.svc.Decide(ctx, reviewer, done, airlock.DecisionInput{Status: airlock.StateDenied, Note: "Over €500: billing team decides refunds this size."}); err != nil {
		t.Fatal(err)
	}
	ok := b.toolCall(t, infra, "restart_service", map[string]any{"service": "search-indexer"}, "The indexer is stuck since 03:12.")
	if _, err := b.svc.Decide(ctx, reviewer, ok, airlock.DecisionInput{Status: airlock.StateApproved, ValidFor: "15m"}); err != nil {
		t.Fatal(err)
	}

	tb := b.signedInTab(t, b.reviewer)
	tb.open("/")
	tb.waitLive()
	tb.do(chromedp.KeyEvent("j"))
	tb.screenshot("list")
	tb.open("/requests/" + refund)
	tb.screenshot("request")
	tb.do(chromedp.SetValue(chromedp.ID("valid_for"), "15m"))
	// The viewport just shrank back from the full-page screenshot, and the
	// decide bar steps aside only once the form is seen on screen: a click
	// at the button's coordinates could land on the moving bar. Pressing the
	// button from script submits the form the same way; the real clicks are
	// TestBrowserConfirmEveryDecision's.
	eval[bool](tb, `(document.querySelector("#approve-form button.approve").click(), true)`)
	tb.waitFor(`document.getElementById("confirm").open`)
	tb.screenshot("confirm")
	tb.cancelConfirm(refund)
	tb.open("/requests/" + move.ID)
	tb.screenshot("command")
	tb.open("/requests/" + question.ID)
	tb.screenshot("question")
	tb.open("/sessions")
	tb.screenshot("sessions")
	tb.open("/board")
	tb.screenshot("board")
	tb.open("/history")
	tb.screenshot("history")
	if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	}); err != nil {
		t.Fatal(err)
	}
	tb.open("/requests/" + refund)
	tb.screenshot("dark-request")
	if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		t.Fatal(err)
	}

	tb.viewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)
	for _, p := range []struct{ path, name string }{{"/", "phone-list"}, {"/requests/" + refund, "phone-request"}} {
		tb.open(p.path)
		if w := eval[int](tb, "document.documentElement.scrollWidth"); w > 390 {
			t.Errorf("%s at 390 px scrolls sideways: %d px wide", p.path, w)
		}
		tb.screenshot(p.name)
	}
}
