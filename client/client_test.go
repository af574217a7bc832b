package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit/apitest"
)

// TestRequestLifecycle drives every approval-request endpoint through the
// client: create and replay, read, list with filters and pages, long-poll,
// decide, claim, report, cancel.
func TestRequestLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	args := `{"payment_id": "payment_123", "amount": 4900, "note": "<b>&</b>"}`
	in := client.CreateRequestInput{
		Tool: "issue_refund", Arguments: []byte(args), Timeout: "30m",
		AgentReasoning: "The customer was charged twice.", Context: []byte(`{"session_id":"s1"}`),
	}
	r, created, err := b.agent.CreateRequest(ctx, b.instance, "refund-1", in)
	if err != nil || !created {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	if r.State != airlock.StatePending || r.Tool != "issue_refund" || r.Timeout != "30m" || r.Kind != airlock.KindToolCall {
		t.Fatalf("created %+v", r)
	}
	if string(r.Arguments) != args {
		t.Fatalf("arguments %s, want byte for byte %s", r.Arguments, args)
	}
	if r.DeadlineAt.Sub(r.CreatedAt) != 30*time.Minute {
		t.Fatalf("window %v, want 30m", r.DeadlineAt.Sub(r.CreatedAt))
	}
	again, created, err := b.agent.CreateRequest(ctx, b.instance, "refund-1", in)
	if err != nil || created || again.ID != r.ID {
		t.Fatalf("replay: id %s created=%v err=%v, want %s false nil", again.ID, created, err, r.ID)
	}

	got, err := b.reviewer.GetRequest(ctx, r.ID)
	if err != nil || got.ID != r.ID || got.AgentReasoning != in.AgentReasoning || string(got.Context) != `{"session_id":"s1"}` {
		t.Fatalf("get: %+v %v", got, err)
	}
	// A long poll answers with the request still pending when the wait ends.
	start := time.Now()
	got, err = b.agent.LongPollRequest(ctx, r.ID, 50*time.Millisecond)
	if err != nil || got.State != airlock.StatePending || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("long poll: %v %v after %v", got, err, time.Since(start))
	}

	other := b.create(t, "other", `{"amount":1}`)
	page, err := b.reviewer.ListRequests(ctx, client.ListRequestsOptions{State: airlock.StatePending, Limit: 1})
	if err != nil || len(page.Items) != 1 || page.NextCursor == "" || page.Items[0].ID != other.ID {
		t.Fatalf("list page 1: %+v %v", page, err)
	}
	var all []string
	for item, err := range b.agent.AllRequests(ctx, client.ListRequestsOptions{InstanceID: b.instance, Tool: "issue_refund", Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, item.ID)
	}
	if strings.Join(all, ",") != other.ID+","+r.ID {
		t.Fatalf("all requests %v, want [%s %s]", all, other.ID, r.ID)
	}

	cancelled, err := b.agent.CancelRequest(ctx, other.ID)
	if err != nil || cancelled.State != airlock.StateCancelled || cancelled.Decision == nil || cancelled.Decision.Status != airlock.StateCancelled {
		t.Fatalf("cancel: %+v %v", cancelled, err)
	}

	decided, err := b.reviewer.Decide(ctx, r.ID, client.DecisionInput{Status: airlock.StateApproved, Note: "confirmed", ValidFor: "2m"})
	if err != nil || decided.State != airlock.StateApproved || decided.Note() != "confirmed" {
		t.Fatalf("decide: %+v %v", decided, err)
	}
	exp, ok := decided.ExpiresAt()
	if !ok || exp.Sub(decided.Decision.DecidedAt) != 2*time.Minute {
		t.Fatalf("expires_at %v (ok %v), want decided_at + 2m", exp, ok)
	}
	claimed, err := b.agent.ClaimExecution(ctx, r.ID)
	if err != nil || claimed.Execution == nil || claimed.Execution.Status != airlock.ExecClaimed {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	reported, err := b.agent.ReportExecution(ctx, r.ID, airlock.ExecSucceeded, "refunded")
	if err != nil || reported.Execution.Status != airlock.ExecSucceeded || reported.Execution.Detail != "refunded" || reported.Execution.FinishedAt == nil {
		t.Fatalf("report: %+v %v", reported.Execution, err)
	}
	if _, err := b.agent.ReportExecution(ctx, r.ID, airlock.ExecSucceeded, "refunded"); err != nil {
		t.Fatalf("reporting the same outcome again: %v", err)
	}

	denied := b.create(t, "to-deny", `{"amount":2}`)
	if d, err := b.reviewer.Deny(ctx, denied.ID, "no"); err != nil || d.State != airlock.StateDenied || d.Note() != "no" {
		t.Fatalf("deny: %+v %v", d, err)
	}
}

// TestWaitRequest: WaitRequest rides several long polls (the server holds
// each for at most 30ms here), reports pending each time, rides out
// network failures, and returns the decision once made.
func TestWaitRequest(t *testing.T) {
	t.Parallel()
	b := setupWith(t, apitest.Config{MaxWait: 30 * time.Millisecond})
	ctx := context.Background()
	r := b.create(t, "wait", `{"amount":1}`)

	agent, ft := b.faulty(t, b.agentSecret)
	ft.add("GET", "/"+r.ID, false, 6) // more than one call's retries
	polls := make(chan *client.ApprovalRequest, 100)
	done := make(chan *client.ApprovalRequest, 1)
	errc := make(chan error, 1)
	go func() {
		got, err := agent.WaitRequest(ctx, r.ID, &client.WaitOptions{PollWait: time.Second, OnPending: func(p *client.ApprovalRequest) {
			select {
			case polls <- p:
			default:
			}
		}})
		done <- got
		errc <- err
	}()
	for range 3 {
		if p := <-polls; p.State != airlock.StatePending {
			t.Fatalf("OnPending got %s", p.State)
		}
	}
	if _, err := b.reviewer.Deny(ctx, r.ID, "not today"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if err := <-errc; err != nil || got.State != airlock.StateDenied || got.Note() != "not today" {
		t.Fatalf("wait: %+v %v", got, err)
	}

	// A request the caller cannot see ends the wait at once.
	_, err := agent.WaitRequest(ctx, "apr_nosuchrequest", nil)
	if !client.IsCode(err, airlock.CodeNotFound) {
		t.Fatalf("wait for a missing request: %v, want not_found", err)
	}
	// Ending ctx ends the wait.
	pending := b.create(t, "wait-ctx", `{"amount":1}`)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := agent.WaitRequest(cctx, pending.ID, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past ctx: %v", err)
	}
}

// TestRetrySameKey: a create whose answer is lost, or which never left,
// is sent again with the same Idempotency-Key, so exactly one request
// exists; calls that are not safe to repeat (claim, decide) are not sent
// again and surface a *NetworkError.
func TestRetrySameKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	agent, ft := b.faulty(t, b.agentSecret)

	lost := ft.add("POST", "/approval-requests", true, 2)
	r, created, err := agent.CreateRequest(ctx, b.instance, "retry-key", client.CreateRequestInput{Tool: "t", Arguments: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatalf("create through lost answers: %v", err)
	}
	if lost.hits != 2 || created {
		t.Fatalf("hits %d created %v: want the third attempt to be a replay of the first", lost.hits, created)
	}
	page, err := b.agent.ListRequests(ctx, client.ListRequestsOptions{Tool: "t"})
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != r.ID {
		t.Fatalf("requests with tool t: %+v %v, want exactly %s", page, err, r.ID)
	}

	ft.add("POST", "/approval-requests", false, 1)
	r2, created, err := agent.CreateRequest(ctx, b.instance, "retry-key-2", client.CreateRequestInput{Tool: "t", Arguments: []byte(`{"a":2}`)})
	if err != nil || !created {
		t.Fatalf("create after a refused connection: %v created %v", err, created)
	}

	// Too many failures: the error says no answer came, after Attempts tries.
	many := ft.add("GET", "/"+r2.ID, false, 100)
	_, err = agent.GetRequest(ctx, r2.ID)
	var ne *client.NetworkError
	if !errors.As(err, &ne) || many.hits != 4 {
		t.Fatalf("get with a dead network: %v after %d tries, want a NetworkError after 4", err, many.hits)
	}
	many.n = 0

	// A claim whose answer is lost is not sent again.
	approved := b.approved(t, "claim-lost")
	claimLost := ft.add("POST", "/execution", true, 1)
	if _, err := agent.ClaimExecution(ctx, approved.ID); !errors.As(err, &ne) || claimLost.hits != 1 {
		t.Fatalf("claim with a lost answer: %v (%d tries), want one NetworkError", err, claimLost.hits)
	}
	now, err := b.agent.GetRequest(ctx, approved.ID)
	if err != nil || now.Execution == nil {
		t.Fatalf("the lost claim landed once: %+v %v", now, err)
	}
	// Reports are retried: the same outcome again is harmless.
	ft.add("PUT", "/execution", true, 1)
	if rep, err := agent.ReportExecution(ctx, approved.ID, airlock.ExecFailed, "x"); err != nil || rep.Execution.Status != airlock.ExecFailed {
		t.Fatalf("report through a lost answer: %v", err)
	}
}

// TestRateLimitRetry: a 429 is retried for any call (the server did
// nothing), after its Retry-After.
func TestRateLimitRetry(t *testing.T) {
	t.Parallel()
	b := setupWith(t, apitest.Config{RateLimit: 1, RateBurst: 1})
	ctx := context.Background()
	noRetry := b.client(t, b.agentSecret, client.WithRetry(client.Retry{Attempts: 1}))
	// The setup used the agent's one request of burst; the next is refused.
	_, err := noRetry.GetInstance(ctx, b.instance)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != airlock.CodeRateLimited || ae.Status != http.StatusTooManyRequests {
		t.Fatalf("over the limit without retries: %v", err)
	}
	// With retries the client waits Retry-After (1s) and gets through.
	if _, err := b.agent.GetInstance(ctx, b.instance); err != nil {
		t.Fatalf("over the limit with retries: %v", err)
	}
}

// TestErrorCodes: each code the server answers comes back as a *Error with
// that code, its HTTP status and, for conflicts, the state that holds; the
// domain's airlock.ErrorCode reads it too.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	stranger := b.client(t, "airlock_not_a_token")
	pending := b.create(t, "pending", `{"amount":1}`)
	claimed := b.approved(t, "claimed")
	if _, err := b.agent.ClaimExecution(ctx, claimed.ID); err != nil {
		t.Fatal(err)
	}
	denied := b.create(t, "denied", `{"amount":1}`)
	if _, err := b.reviewer.Deny(ctx, denied.ID, ""); err != nil {
		t.Fatal(err)
	}
	lapsing := b.create(t, "lapsing", `{"amount":1}`)
	if _, err := b.reviewer.Decide(ctx, lapsing.ID, client.DecisionInput{Status: airlock.StateApproved, ValidFor: "1s"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		call   func() error
		code   airlock.Code
		status int
		state  airlock.State
		field  string
	}{
		{"an unknown token is unauthorized", func() error { _, err := stranger.GetInstance(ctx, b.instance); return err },
			airlock.CodeUnauthorized, 401, "", ""},
		{"an agent deciding is forbidden", func() error { _, err := b.agent.Approve(ctx, pending.ID, ""); return err },
			airlock.CodeForbidden, 403, "", ""},
		{"a missing request is not found", func() error { _, err := b.agent.GetRequest(ctx, "apr_missing"); return err },
			airlock.CodeNotFound, 404, "", ""},
		{"a bad tool name is invalid and names the field", func() error {
			_, _, err := b.agent.CreateRequest(ctx, b.instance, "bad-tool", client.CreateRequestInput{Tool: "rm -rf", Arguments: []byte(`{}`)})
			return err
		}, airlock.CodeInvalidRequest, 400, "", "tool"},
		{"duplicate keys in arguments are invalid", func() error {
			_, _, err := b.agent.CreateRequest(ctx, b.instance, "dup", client.CreateRequestInput{Tool: "ls", Arguments: []byte(`{"tool":"ls","TOOL":"rm"}`)})
			return err
		}, airlock.CodeInvalidRequest, 400, "", ""},
		{"the same key with another body is an idempotency conflict", func() error {
			_, _, err := b.agent.CreateRequest(ctx, b.instance, "pending", client.CreateRequestInput{Tool: "issue_refund", Arguments: []byte(`{"amount":2}`), Timeout: "10m"})
			return err
		}, airlock.CodeIdempotencyConflict, 422, "", ""},
		{"deciding a denied request is not_pending, naming denied", func() error { _, err := b.reviewer.Approve(ctx, denied.ID, ""); return err },
			airlock.CodeNotPending, 409, airlock.StateDenied, ""},
		{"claiming a pending request is not_approved", func() error { _, err := b.agent.ClaimExecution(ctx, pending.ID); return err },
			airlock.CodeNotApproved, 409, airlock.StatePending, ""},
		{"claiming twice is already_executed", func() error { _, err := b.agent.ClaimExecution(ctx, claimed.ID); return err },
			airlock.CodeAlreadyExecuted, 409, airlock.StateApproved, ""},
		{"a body over 1 MiB is payload_too_large", func() error {
			_, _, err := b.agent.CreateRequest(ctx, b.instance, "big", client.CreateRequestInput{Tool: "t", Arguments: []byte(`{"x":"` + strings.Repeat("a", 1<<20) + `"}`)})
			return err
		}, airlock.CodePayloadTooLarge, 413, "", ""},
	}
	for _, tt := range tests {
		err := tt.call()
		var ae *client.Error
		if !errors.As(err, &ae) {
			t.Errorf("%s: got %v, want a *client.Error", tt.name, err)
			continue
		}
		if ae.Code != tt.code || ae.Status != tt.status || (tt.state != "" && ae.State != tt.state) || (tt.field != "" && ae.Field != tt.field) || ae.Message == "" {
			t.Errorf("%s: got code %s status %d state %q field %q message %q; want %s %d %q %q",
				tt.name, ae.Code, ae.Status, ae.State, ae.Field, ae.Message, tt.code, tt.status, tt.state, tt.field)
		}
		if airlock.ErrorCode(err) != tt.code || !client.IsCode(err, tt.code) {
			t.Errorf("%s: airlock.ErrorCode = %s, want %s", tt.name, airlock.ErrorCode(err), tt.code)
		}
	}

	// Time-based conflicts: move the server's clock past the deadline of
	// the pending request and past the lapsing approval's expires_at.
	b.clock.Advance(time.Hour)
	_, err := b.agent.ClaimExecution(ctx, lapsing.ID)
	if !client.IsCode(err, airlock.CodeApprovalExpired) {
		t.Errorf("claim after expires_at: %v, want approval_expired", err)
	}
	_, err = b.reviewer.Approve(ctx, pending.ID, "")
	var ae *client.Error
	if !errors.As(err, &ae) || ae.State != airlock.StateExpired || (ae.Code != airlock.CodeDeadlinePassed && ae.Code != airlock.CodeNotPending) {
		t.Errorf("approve after the deadline: %v, want deadline_passed or not_pending naming expired", err)
	}
	var de *airlock.Error
	if !errors.As(err, &de) || de.State != airlock.StateExpired {
		t.Errorf("errors.As to *airlock.Error: %v", de)
	}
}

// TestInstancesTokensBoardSessions covers the remaining endpoints.
func TestInstancesTokensBoardSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	in, err := b.agent.RegisterInstance(ctx, "second", json.RawMessage(`{"pid": 42}`))
	if err != nil || !strings.HasPrefix(in.ID, "ins_") || string(in.Metadata) != `{"pid":42}` {
		t.Fatalf("register: %+v %v", in, err)
	}
	for i := range 3 {
		if _, _, err := b.agent.CreateRequest(ctx, in.ID, "k"+string(rune('a'+i)), client.CreateRequestInput{Tool: "t", Arguments: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.reviewer.GetInstance(ctx, in.ID)
	if err != nil || got.PendingCount != 3 || got.Name != "second" {
		t.Fatalf("get instance: %+v %v", got, err)
	}
	list, err := b.agent.ListInstances(ctx)
	if err != nil || len(list) != 2 || list[0].ID != in.ID || list[0].PendingCount != 3 || list[1].ID != b.instance {
		t.Fatalf("list instances: %+v %v; want [%s (3 pending) %s]", list, err, in.ID, b.instance)
	}
	n, err := b.agent.DeleteInstance(ctx, in.ID)
	if err != nil || n != 3 {
		t.Fatalf("delete: cancelled %d, %v; want 3", n, err)
	}
	if list, err := b.reviewer.ListInstances(ctx); err != nil || len(list) != 1 || list[0].ID != b.instance {
		t.Fatalf("instances after the delete: %+v %v; want only %s", list, err, b.instance)
	}

	tok, err := b.admin.CreateToken(ctx, client.CreateTokenInput{Name: "ci", Role: airlock.RoleAgent, Scopes: []string{"work:write"}})
	if err != nil || !strings.HasPrefix(tok.Secret, "airlock_") || tok.Role != airlock.RoleAgent || len(tok.Scopes) != 1 {
		t.Fatalf("create token: %+v %v", tok, err)
	}
	tokens, err := b.admin.ListTokens(ctx)
	if err != nil || len(tokens) < 4 || tokens[0].ID != tok.ID {
		t.Fatalf("list tokens: %d %v", len(tokens), err)
	}
	revoked, err := b.admin.RevokeToken(ctx, tok.ID)
	if err != nil || revoked.RevokedAt == nil {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	if _, err := b.client(t, tok.Secret).GetInstance(ctx, b.instance); !client.IsCode(err, airlock.CodeUnauthorized) {
		t.Fatalf("a revoked token: %v", err)
	}

	if _, err := b.reviewer.CreateColumn(ctx, "todo", "To do"); err != nil {
		t.Fatal(err)
	}
	col, err := b.reviewer.CreateColumn(ctx, "done", "Done")
	if err != nil || col.Position != 2 {
		t.Fatalf("column: %+v %v", col, err)
	}
	item, err := b.reviewer.CreateWorkItem(ctx, "card", "todo")
	if err != nil || item.Version != 1 {
		t.Fatalf("work item: %+v %v", item, err)
	}
	done := "done"
	moved, err := b.reviewer.UpdateWorkItem(ctx, item.ID, client.WorkItemUpdate{ColumnKey: &done, IfVersion: 1})
	if err != nil || moved.ColumnKey != "done" || moved.Version != 2 {
		t.Fatalf("move: %+v %v", moved, err)
	}
	if _, err := b.reviewer.UpdateWorkItem(ctx, item.ID, client.WorkItemUpdate{ColumnKey: &done, IfVersion: 1}); !client.IsCode(err, airlock.CodeInvalidRequest) {
		t.Fatalf("stale if_version: %v", err)
	}
	if w, err := b.agent.GetWorkItem(ctx, item.ID); err != nil || w.ColumnKey != "done" {
		t.Fatalf("get work item: %+v %v", w, err)
	}
	board, err := b.agent.Board(ctx)
	if err != nil || len(board.Columns) != 2 || len(board.Columns[1].Items) != 1 {
		t.Fatalf("board: %+v %v", board, err)
	}
	if _, err := b.reviewer.ListSessions(ctx); err != nil {
		t.Fatalf("sessions: %v", err)
	}
	if err := b.agent.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
}

// TestGrants: an approval with a grant returns it; the grant approves the
// next same call; the client lists, reads and revokes grants.
func TestGrants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.create(t, "g1", `{"amount":4900}`)
	uses := 2
	d, err := b.reviewer.Decide(ctx, r.ID, client.DecisionInput{Status: airlock.StateApproved,
		Grant: &airlock.DecisionGrant{Uses: &uses, ExpiresIn: "1h"}})
	if err != nil || d.Grant == nil || *d.Grant.UsesLeft != 2 || d.Grant.RequestID != r.ID {
		t.Fatalf("decide with a grant: %+v %v", d, err)
	}
	next := b.create(t, "g2", `{"amount":4900}`)
	if next.State != airlock.StateApproved || next.Decision.DecidedBy != "grant:"+d.Grant.ID {
		t.Fatalf("next call: %s by %+v", next.State, next.Decision)
	}
	g, err := b.reviewer.CreateGrant(ctx, airlock.GrantInput{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount":1}`),
		InstanceID: b.instance, ExpiresIn: "10m"})
	if err != nil || g.State != airlock.GrantLive || g.Match != "same_arguments" {
		t.Fatalf("create: %+v %v", g, err)
	}
	live, err := b.reviewer.ListGrants(ctx, true, "issue_refund")
	if err != nil || len(live) != 2 || live[0].ID != g.ID || *live[1].UsesLeft != 1 {
		t.Fatalf("list: %+v %v", live, err)
	}
	if rv, err := b.reviewer.RevokeGrant(ctx, g.ID); err != nil || rv.State != airlock.GrantRevoked || rv.RevokedAt == nil {
		t.Fatalf("revoke: %+v %v", rv, err)
	}
	if got, err := b.reviewer.GetGrant(ctx, g.ID); err != nil || got.State != airlock.GrantRevoked {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := b.agent.ListGrants(ctx, false, ""); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("an agent lists grants: %v", err)
	}
}

// TestEventsResume: the event stream delivers every state change; after
// the connection breaks it resumes with Last-Event-ID, missing and
// repeating nothing.
func TestEventsResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	bt := &breakingTransport{next: b.hc.Transport, after: 900, max: 3}
	rev := b.mint(t, "watcher", airlock.RoleReviewer, "dave")
	watcher, err := client.New(b.url, rev.Secret, client.WithHTTPClient(&http.Client{Transport: bt}),
		client.WithRetry(client.Retry{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}

	var ids []string
	for i := range 4 {
		r := b.create(t, "ev"+string(rune('0'+i)), `{"n":1}`)
		ids = append(ids, r.ID)
	}
	if _, err := b.reviewer.Approve(ctx, ids[0], ""); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	created := map[string]bool{}
	approved := false
	for ev, err := range watcher.Events(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if n := len(seen); n > 0 && ev.Event.ID != seen[n-1]+1 {
			t.Fatalf("event %d after %d: a gap or a repeat", ev.Event.ID, seen[n-1])
		}
		seen = append(seen, ev.Event.ID)
		switch ev.Event.Type {
		case airlock.EventRequestCreated:
			created[ev.Event.RequestID] = true
			if ev.Request == nil || ev.Request.ID != ev.Event.RequestID {
				t.Fatalf("request event without its request: %+v", ev)
			}
		case airlock.EventRequestApproved:
			approved = ev.Event.RequestID == ids[0]
		}
		if len(created) == 4 && approved {
			break
		}
	}
	if bt.breaks() == 0 {
		t.Fatal("the stream never broke: the test proves nothing about resuming")
	}
	// A stream from a later point starts after it.
	for ev, err := range watcher.Events(ctx, seen[len(seen)-1]-1) {
		if err != nil || ev.Event.ID != seen[len(seen)-1] {
			t.Fatalf("resume from %d: got %+v %v", seen[len(seen)-1]-1, ev.Event, err)
		}
		break
	}
	// An agent may not stream: the iteration yields forbidden and ends.
	for _, err := range b.agent.Events(ctx, 0) {
		if !client.IsCode(err, airlock.CodeForbidden) {
			t.Fatalf("agent stream: %v", err)
		}
	}
}

// breakingTransport cuts each event stream after some bytes, up to max
// times, as a dropped connection would.
type breakingTransport struct {
	next  http.RoundTripper
	after int
	max   int
	mu    sync.Mutex
	n     int
}

func (bt *breakingTransport) breaks() int {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.n
}

func (bt *breakingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := bt.next.RoundTrip(req)
	if err != nil || req.URL.Path != "/v1/events" || res.StatusCode != http.StatusOK {
		return res, err
	}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.n >= bt.max {
		return res, nil
	}
	res.Body = &breakingBody{ReadCloser: res.Body, left: bt.after, bt: bt}
	return res, nil
}

type breakingBody struct {
	io.ReadCloser
	left int
	bt   *breakingTransport
}

func (b *breakingBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.bt.mu.Lock()
		b.bt.n++
		b.bt.mu.Unlock()
		return 0, errors.New("injected: connection reset mid-stream")
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= n
	return n, err
}
