package inbox

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/chromedp/chromedp"
)

// quorumPolicy sends refunds to the payments group, two approvals
// needed: Carol and Ada are in it, Dan is not.
const quorumPolicy = `groups:
  payments: [carol, ada]
rules:
  - {name: refunds, match: 'request.tool == "issue_refund"', action: ask, reviewers: payments, approvals: 2}
`

// TestBrowserQuorum: a request for the payments group needing two
// approvals says so in the list and on its page; Carol's approval is a
// vote, after which the page reads "1 of 2 approvals (Carol (reviewer))";
// Dan, who is not in the group, sees the request read-only, with no
// decision form, and his page, open before Carol voted, shows her vote
// live.
func TestBrowserQuorum(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.policy = quorumPolicy })
	inst := b.instance(t, "payments-adapter")
	status, out := b.createREST(t, inst, map[string]any{"tool": "issue_refund", "arguments": refundArgs, "timeout": "30m"})
	if status != 201 {
		t.Fatalf("create over REST: %d %v", status, out)
	}
	id := out["id"].(string)

	tb := b.signedInTab(t, b.reviewer)
	row := `.row[data-id="` + id + `"]`
	tb.waitFor(`document.querySelector('` + row + `') !== null`)
	if got := tb.text(row + " .badge.for"); got != "for payments" {
		t.Errorf("list badge %q, want “for payments”", got)
	}
	if got := tb.text(row + " .badge.quorum"); got != "0 of 2 approvals" {
		t.Errorf("list quorum %q, want “0 of 2 approvals”", got)
	}
	dan := b.signedInTab(t, b.reviewerB)
	dan.open("/requests/" + id)
	if got := dan.text("#quorum"); got != "0 of 2 approvals" {
		t.Errorf("non-member's quorum line before any vote %q", got)
	}

	tb.open("/requests/" + id)
	if got := tb.text("#for-badge"); got != "for payments" {
		t.Errorf("page badge %q", got)
	}
	// A click from script: the decide bar fixed at the foot of the screen
	// may cover the button, and a pointer click would land on it.
	eval[any](tb, `document.querySelector("#approve-form button.approve").click()`)
	tb.waitFor(`document.getElementById("confirm").open`)
	tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
	tb.waitFor(`document.getElementById("flash") && document.getElementById("flash").textContent.indexOf("Your vote is counted.") >= 0`)
	if got := tb.text("#quorum"); got != "1 of 2 approvals (Carol (reviewer))" {
		t.Errorf("quorum line %q, want “1 of 2 approvals (Carol (reviewer))”", got)
	}
	if got := tb.text("#votes"); !strings.Contains(got, "approved by Carol (reviewer)") {
		t.Errorf("votes %q", got)
	}
	if r := b.get(t, id); r.State != airlock.StatePending || len(r.Votes) != 1 {
		t.Fatalf("after one vote: %s with %d votes", r.State, len(r.Votes))
	}

	dan.waitFor(`document.getElementById("quorum").textContent === "1 of 2 approvals (Carol (reviewer))" &&
		document.getElementById("votes") !== null && document.getElementById("votes").textContent.indexOf("approved by Carol (reviewer)") >= 0`)
	if got := dan.text("#read-only"); !strings.Contains(got, "This request is for payments: only members decide it. You can read it.") {
		t.Errorf("read-only panel %q", got)
	}
	if n := eval[int](dan, `document.querySelectorAll("#approve-form, #deny-form, #decide-bar").length`); n != 0 {
		t.Errorf("%d decision controls shown to a non-member", n)
	}
	if got := dan.text("#quorum"); got != "1 of 2 approvals (Carol (reviewer))" {
		t.Errorf("non-member's quorum line %q", got)
	}
}
