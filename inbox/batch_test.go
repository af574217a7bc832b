package inbox

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
)

// TestBatchInInbox: without JavaScript, the pending list offers a
// checkbox per request and "Review selected"; the review page shows every
// selected call in full (tool, arguments, size, the approval token's
// digest, deadline) and records nothing; its one form decides each id as
// its own decision, and the page after shows each result, a refusal for
// one already decided.
func TestBatchInInbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter")
	c, token := b.signedInClient(t, b.reviewer)
	a := b.toolCall(t, inst, "drop_table", map[string]any{"table": "users"}, "")
	bb := b.toolCall(t, inst, "send_email", map[string]any{"to": "ops@example.com", "body": "<b>hi</b>"}, "")
	done := b.toolCall(t, inst, "ls", map[string]any{"path": "/"}, "")
	if _, err := b.svc.Decide(context.Background(), b.callers["Carol (reviewer)"], done, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
		t.Fatal(err)
	}

	list := c.do(t, "GET", "/", nil, nil)
	for _, id := range []string{a, bb} {
		if want := `name="id" value="` + id + `" form="batch"`; !strings.Contains(list.body, want) {
			t.Errorf("the pending list has no checkbox for %s (%s)", id, want)
		}
	}
	if !strings.Contains(list.body, `<form id="batch" class="batch-bar" method="get" action="/batch"`) {
		t.Fatalf("the pending list has no Review selected form:\n%s", list.body)
	}

	review := c.do(t, "GET", "/batch?"+url.Values{"id": {a, bb, done}}.Encode(), nil, nil)
	if review.status != http.StatusOK {
		t.Fatalf("review: %d\n%s", review.status, review.body)
	}
	for _, id := range []string{a, bb} {
		args := b.get(t, id).Arguments
		digest, _ := approvaltoken.ArgsDigest(args)
		if !strings.Contains(review.body, digest) || !strings.Contains(review.body, byteCount(len(args))) {
			t.Errorf("the review does not show %s's size and digest %s", id, digest)
		}
		if !strings.Contains(review.body, `<input type="hidden" name="id" value="`+id+`">`) {
			t.Errorf("the review's form does not carry %s", id)
		}
	}
	for _, want := range []string{"drop_table", "&#34;table&#34;: &#34;users&#34;", "send_email", "&#34;body&#34;: &#34;&lt;b&gt;hi&lt;/b&gt;&#34;",
		"Already denied: not decided again.", "Approve all 2", "Deny all 2", `name="csrf" value="` + token + `"`} {
		if !strings.Contains(review.body, want) {
			t.Errorf("the review lacks %s", want)
		}
	}
	if strings.Contains(review.body, `name="id" value="`+done+`"`) {
		t.Error("the review's form carries a request already decided")
	}
	if b.get(t, a).State != airlock.StatePending || b.get(t, bb).State != airlock.StatePending {
		t.Fatal("the review recorded something")
	}

	if r := c.do(t, "POST", "/batch", url.Values{"id": {a, bb}, "action": {"approve"}, "csrf": {"forged"}}, nil); r.status != http.StatusForbidden {
		t.Fatalf("a forged batch form: %d, want 403", r.status)
	}
	if r := c.do(t, "POST", "/batch", url.Values{"id": {a, bb}, "action": {"approve"}, "csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
		t.Fatalf("a cross-site batch form: %d, want 403", r.status)
	}
	if b.get(t, a).State != airlock.StatePending {
		t.Fatal("a refused form recorded something")
	}

	// The form as a stale tab might send it: the decided one is refused in
	// its row, the others decided.
	r := c.do(t, "POST", "/batch", url.Values{"id": {a, bb, done}, "action": {"approve"}, "csrf": {token}, "valid_for": {"15m"}, "note": {"both"}}, nil)
	if r.status != http.StatusOK {
		t.Fatalf("decide: %d\n%s", r.status, r.body)
	}
	for _, want := range []string{"Approved 2 of 3", "This request is already denied.", "The agent may start this exact call once"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the results lack %q:\n%s", want, r.body)
		}
	}
	for _, id := range []string{a, bb} {
		got := b.get(t, id)
		if got.State != airlock.StateApproved || got.Decision.Note != "both" || got.Decision.ExpiresAt.Sub(got.Decision.DecidedAt).Minutes() != 15 {
			t.Errorf("%s after the batch: %s %+v", id, got.State, got.Decision)
		}
	}
	if got := b.get(t, done); got.State != airlock.StateDenied {
		t.Fatalf("the decided one is now %s", got.State)
	}

	// Only reviewers: an admin's session gets no checkboxes and no review.
	ac, _ := b.signedInClient(t, b.admin)
	if r := ac.do(t, "GET", "/batch?id="+a, nil, nil); r.status != http.StatusForbidden {
		t.Fatalf("an admin's review: %d", r.status)
	}
	if r := c.do(t, "GET", "/batch", nil, nil); r.status != http.StatusSeeOther {
		t.Fatalf("a review of nothing: %d, want a redirect to the list", r.status)
	}
}

// TestBatchReviewBounded: a selection whose arguments pass what one list
// page may hold is not rendered whole at once: the reviewer is sent back
// to the list, told to select fewer, and nothing is recorded.
func TestBatchReviewBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.pageBytes = 300 })
	inst := b.instance(t, "adapter")
	c, _ := b.signedInClient(t, b.reviewer)
	big := strings.Repeat("x", 200)
	a, bb := b.toolCall(t, inst, "write", map[string]any{"body": big}, ""), b.toolCall(t, inst, "write", map[string]any{"body": big + "y"}, "")
	r := c.do(t, "GET", "/batch?"+url.Values{"id": {a, bb}}.Encode(), nil, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		t.Fatalf("an oversized review: %d to %q", r.status, r.header.Get("Location"))
	}
	if list := c.do(t, "GET", "/", nil, nil); !strings.Contains(list.body, "Too much to review at once.") {
		t.Fatal("the list does not say why")
	}
	if one := c.do(t, "GET", "/batch?id="+a, nil, nil); one.status != http.StatusOK || !strings.Contains(one.body, big) {
		t.Fatalf("one of them alone: %d", one.status)
	}
}
