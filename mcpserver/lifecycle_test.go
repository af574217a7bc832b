package mcpserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestQuestionAnswered: a question with choices, answered by a reviewer's
// approval carrying answer, appears in approval_status and exactly once,
// as an instruction with a stable ID, on the session's next heartbeat.
func TestQuestionAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.connect(t, b.agent)
	sess := cl.ok(ToolSessionOpen, map[string]any{"name": "release prep"})
	sid := str(sess, "sessionId")
	if !strings.HasPrefix(sid, airlock.PrefixSession) || str(sess, "status") != "active" {
		t.Fatalf("session_open: %v", sess)
	}

	req := cl.ok(ToolApprovalRequest, requestArgs("q1", func(m map[string]any) {
		m["title"] = "Which colour for the banner?"
		m["sessionId"] = sid
		m["question"] = map[string]any{"choices": []string{"red", "blue"}}
	}))
	id := str(req, "approvalId")
	if str(req, "status") != "pending" || !strings.HasPrefix(str(req, "next"), "pending: a person will decide; check approval_status or your next session_heartbeat") {
		t.Errorf("approval_request: %v", req)
	}
	if got := get(req, "question.choices"); mustJSON(t, got) != `["red","blue"]` {
		t.Errorf("question.choices = %v", got)
	}

	hb := cl.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid})
	if str(hb, "session.status") != "waiting" || get(hb, "session.pendingCount") != 1.0 || len(get(hb, "instructions").([]any)) != 0 {
		t.Errorf("heartbeat while pending: %v", hb)
	}

	if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved, Answer: "green"}); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Errorf("an answer outside the choices: %v, want invalid_request", err)
	}
	if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved, Answer: "blue", Note: "matches the logo"}); err != nil {
		t.Fatal(err)
	}

	st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id})
	if str(st, "status") != "approved" || str(st, "answer") != "blue" || str(st, "decision.answer") != "blue" ||
		str(st, "decision.note") != "matches the logo" || str(st, "decision.expiresAt") == "" || !strings.HasPrefix(str(st, "next"), "answered:") {
		t.Errorf("approval_status after the answer: %v", st)
	}

	hb = cl.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid})
	ins := get(hb, "instructions").([]any)
	if len(ins) != 1 {
		t.Fatalf("first heartbeat after the answer: %d instructions, want 1: %v", len(ins), hb)
	}
	in := ins[0].(map[string]any)
	if !strings.HasPrefix(str(in, "instructionId"), airlock.PrefixInstruction) || str(in, "approvalId") != id ||
		str(in, "status") != "approved" || str(in, "answer") != "blue" || str(in, "note") != "matches the logo" ||
		!strings.Contains(str(in, "message"), `"blue"`) {
		t.Errorf("instruction: %v", in)
	}
	if str(hb, "session.status") != "active" {
		t.Errorf("session after the decision: %v", hb["session"])
	}
	hb = cl.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid})
	if n := len(get(hb, "instructions").([]any)); n != 0 {
		t.Errorf("second heartbeat repeated %d instructions", n)
	}
}

// TestQuestionFreeTextAndDeclined: question {} takes a free-text answer; a
// denial declines the question, and its note says why.
func TestQuestionFreeTextAndDeclined(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.connect(t, b.agent)
	free := str(cl.ok(ToolApprovalRequest, requestArgs("free", func(m map[string]any) { m["question"] = map[string]any{} })), "approvalId")
	if _, err := b.decide(t, free, airlock.DecisionInput{Status: airlock.StateApproved, Answer: "Friday at 10"}); err != nil {
		t.Fatal(err)
	}
	if st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": free}); str(st, "answer") != "Friday at 10" {
		t.Errorf("free-text answer: %v", st)
	}

	declined := str(cl.ok(ToolApprovalRequest, requestArgs("declined", func(m map[string]any) { m["question"] = map[string]any{} })), "approvalId")
	if _, err := b.decide(t, declined, airlock.DecisionInput{Status: airlock.StateDenied, Note: "ask the team lead"}); err != nil {
		t.Fatal(err)
	}
	st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": declined})
	if str(st, "status") != "denied" || str(st, "answer") != "" || str(st, "decision.note") != "ask the team lead" ||
		str(st, "decision.expiresAt") != "" || !strings.Contains(str(st, "next"), "declined to answer") {
		t.Errorf("declined question: %v", st)
	}
}

// TestAdvisoryExecutesNothing: an approved advisory proposal records the
// decision and changes nothing on the board.
func TestAdvisoryExecutesNothing(t *testing.T) {
	t.Parallel()
	b, item, cl := setupBoard(t)
	req := cl.ok(ToolApprovalRequest, requestArgs("adv", func(m map[string]any) {
		m["kind"] = "work_change"
		m["title"] = "Move the release notes to done"
		m["targetType"] = "work_item"
		m["targetId"] = item.ID
	}))
	id := str(req, "approvalId")
	if get(req, "commandOutcome") != nil || str(req, "proposal.mode") != "advisory" {
		t.Errorf("advisory request: %v", req)
	}
	if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id})
	if str(st, "status") != "approved" || get(st, "commandOutcome") != nil || !strings.Contains(str(st, "next"), "Airlock executed nothing") {
		t.Errorf("approved advisory: %v", st)
	}
	after := cl.ok(ToolWorkGet, map[string]any{"itemId": item.ID})
	if str(after, "columnKey") != "todo" || get(after, "version") != float64(item.Version) {
		t.Errorf("an advisory approval changed the item: %v", after)
	}
}

// move returns a work_move proposal.
func move(itemID, col string) map[string]any {
	return map[string]any{"mode": "command", "command": map[string]any{
		"method": "work_move", "input": map[string]any{"itemId": itemID, "columnKey": col}}}
}

// moveArgs are approval_request arguments with key: a work_change that
// proposes moving itemID to col.
func moveArgs(key, itemID, col string) map[string]any {
	return requestArgs(key, func(m map[string]any) {
		m["kind"] = "work_change"
		m["proposal"] = move(itemID, col)
	})
}

// askToMove starts a server with a board and asks, as the agent, to move
// its item to done; extra, when set, adjusts the request's arguments. It
// returns what the test needs next, and the request's ID.
func askToMove(t *testing.T, extra func(map[string]any)) (*bundle, airlock.WorkItem, *client, string) {
	t.Helper()
	b, item, cl := setupBoard(t)
	id := str(cl.ok(ToolApprovalRequest, requestArgs("mv", func(m map[string]any) {
		m["proposal"] = move(item.ID, "done")
		if extra != nil {
			extra(m)
		}
	})), "approvalId")
	return b, item, cl, id
}

// TestWorkMove: a work_move command executes in the step that records the
// approval; denied, expired and stale commands never execute.
func TestWorkMove(t *testing.T) {
	t.Parallel()

	t.Run("approved: applied with the approval", func(t *testing.T) {
		t.Parallel()
		b, item, cl := setupBoard(t)
		req := cl.ok(ToolApprovalRequest, moveArgs("mv", item.ID, "done"))
		id := str(req, "approvalId")
		if str(req, "commandOutcome.status") != "awaiting_decision" || str(req, "commandOutcome.observed.fromColumnKey") != "todo" ||
			!strings.Contains(str(req, "next"), "the command runs only if approved") {
			t.Errorf("pending command: %v", req)
		}
		if w := cl.ok(ToolWorkGet, map[string]any{"itemId": item.ID}); str(w, "columnKey") != "todo" {
			t.Fatalf("the command ran before approval: %v", w)
		}
		if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
			t.Fatal(err)
		}
		st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id})
		if str(st, "commandOutcome.status") != "applied" || str(st, "commandOutcome.appliedAt") != str(st, "decision.decidedAt") ||
			!strings.HasPrefix(str(st, "next"), "approved and applied") {
			t.Errorf("applied command: %v", st)
		}
		w := cl.ok(ToolWorkGet, map[string]any{"itemId": item.ID})
		if str(w, "columnKey") != "done" || get(w, "version") != float64(item.Version+1) {
			t.Errorf("item after the approval: %v", w)
		}
	})

	t.Run("denied: not executed", func(t *testing.T) {
		t.Parallel()
		b, item, cl, id := askToMove(t, nil)
		if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateDenied, Note: "not yet"}); err != nil {
			t.Fatal(err)
		}
		st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id})
		if str(st, "commandOutcome.status") != "not_executed" || !strings.Contains(str(st, "next"), "The command was not executed") {
			t.Errorf("denied command: %v", st)
		}
		if w := cl.ok(ToolWorkGet, map[string]any{"itemId": item.ID}); str(w, "columnKey") != "todo" {
			t.Errorf("a denied command moved the item: %v", w)
		}
	})

	t.Run("expired: not executed", func(t *testing.T) {
		t.Parallel()
		b, item, cl, id := askToMove(t, func(m map[string]any) { m["expiresInMinutes"] = 5 })
		b.clock.Advance(5 * time.Minute)
		st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id})
		if str(st, "status") != "expired" || str(st, "commandOutcome.status") != "not_executed" {
			t.Errorf("expired command: %v", st)
		}
		if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved}); err == nil {
			t.Error("an expired command was approved")
		}
		if w := cl.ok(ToolWorkGet, map[string]any{"itemId": item.ID}); str(w, "columnKey") != "todo" {
			t.Errorf("an expired command moved the item: %v", w)
		}
	})

	t.Run("item moved since: command_failed, nothing recorded", func(t *testing.T) {
		t.Parallel()
		b, item, cl, id := askToMove(t, nil)
		doing := "doing"
		if _, err := b.svc.UpdateWorkItem(t.Context(), b.reviewer, airlock.WorkItemPatch{ID: item.ID, ColumnKey: &doing}); err != nil {
			t.Fatal(err)
		}
		_, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved})
		if airlock.ErrorCode(err) != airlock.CodeCommandFailed {
			t.Fatalf("approving a command whose item moved: %v, want command_failed", err)
		}
		st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id})
		if str(st, "status") != "pending" || str(st, "commandOutcome.status") != "awaiting_decision" {
			t.Errorf("after command_failed the request must stay pending: %v", st)
		}
		if w := cl.ok(ToolWorkGet, map[string]any{"itemId": item.ID}); str(w, "columnKey") != "doing" {
			t.Errorf("item: %v", w)
		}
	})
}

// TestSessions: a session is waiting while a linked request is pending;
// closing it cancels its pending requests; a closed session takes no more
// requests or heartbeats.
func TestSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.connect(t, b.agent)
	sid := str(cl.ok(ToolSessionOpen, map[string]any{"name": "nightly cleanup", "metadata": map[string]any{"host": "ci-7"}}), "sessionId")
	var ids []string
	for _, key := range []string{"a", "b"} {
		ids = append(ids, str(cl.ok(ToolApprovalRequest, requestArgs(key, func(m map[string]any) { m["sessionId"] = sid })), "approvalId"))
	}
	// One is decided before the close, and is delivered on a heartbeat.
	if _, err := b.decide(t, ids[0], airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
		t.Fatal(err)
	}
	hb := cl.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid})
	if str(hb, "session.status") != "waiting" || get(hb, "session.pendingCount") != 1.0 {
		t.Errorf("heartbeat: %v", hb)
	}
	if ins := get(hb, "instructions").([]any); len(ins) != 1 || str(ins[0].(map[string]any), "status") != "denied" {
		t.Errorf("instructions: %v", ins)
	}

	cl2 := b.connect(t, b.agent) // another MCP connection of the same agent sees the same sessions
	closed := cl2.ok(ToolSessionClose, map[string]any{"sessionId": sid})
	if get(closed, "cancelledCount") != 1.0 || str(closed, "status") != "closed" {
		t.Errorf("session_close: %v", closed)
	}
	if st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": ids[1]}); str(st, "status") != "cancelled" {
		t.Errorf("a pending request of the closed session: %v", st)
	}
	if got := cl.fail(ToolSessionHeartbeat, map[string]any{"sessionId": sid}); !strings.Contains(got, "not found") {
		t.Errorf("heartbeat of a closed session: %q", got)
	}
	if got := cl.fail(ToolApprovalRequest, requestArgs("c", func(m map[string]any) { m["sessionId"] = sid })); !strings.Contains(got, "not found") {
		t.Errorf("approval_request on a closed session: %q", got)
	}
	if again := cl.ok(ToolSessionClose, map[string]any{"sessionId": sid}); get(again, "cancelledCount") != 0.0 {
		t.Errorf("closing twice: %v", again)
	}
	if got := cl.fail(ToolSessionOpen, map[string]any{"name": ""}); !strings.Contains(got, "name is required") {
		t.Errorf("session_open without a name: %q", got)
	}
	if got := cl.fail(ToolSessionOpen, map[string]any{"name": "x", "metadata": []int{1}}); !strings.Contains(got, "metadata must be a JSON object") {
		t.Errorf("session_open with array metadata: %q", got)
	}
}

// TestIdempotency: the same idempotencyKey with the same input replays the
// original request, even once it is decided; with other input it is an
// idempotency_conflict; another agent's same key is independent; a burst
// of identical calls creates one request.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.connect(t, b.agent)
	args := requestArgs("same-key", func(m map[string]any) { m["expiresInMinutes"] = 30 })
	first := cl.ok(ToolApprovalRequest, args)
	id := str(first, "approvalId")
	if first["replayed"] != nil {
		t.Errorf("the first call says replayed: %v", first)
	}
	again := cl.ok(ToolApprovalRequest, args)
	if str(again, "approvalId") != id || again["replayed"] != true || str(again, "deadlineAt") != str(first, "deadlineAt") {
		t.Errorf("replay: %v", again)
	}
	if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	if replay := cl.ok(ToolApprovalRequest, args); str(replay, "approvalId") != id || str(replay, "status") != "approved" {
		t.Errorf("replay of a decided request: %v", replay)
	}
	changed := requestArgs("same-key", func(m map[string]any) { m["expiresInMinutes"] = 31 })
	if got := cl.fail(ToolApprovalRequest, changed); !strings.HasPrefix(got, "idempotency_conflict: ") {
		t.Errorf("same key, other input: %q", got)
	}
	if other := b.connect(t, b.other).ok(ToolApprovalRequest, args); str(other, "approvalId") == id {
		t.Error("another agent's call with the same key replayed this agent's request")
	}

	const n = 20
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Go(func() {
			res, err := cl.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolApprovalRequest, Arguments: requestArgs("burst", nil)})
			if err != nil || res.IsError {
				t.Errorf("call %d: %v %v", i, err, res)
				return
			}
			var out map[string]any
			remarshal(t, res.StructuredContent, &out)
			got[i] = str(out, "approvalId")
		})
	}
	wg.Wait()
	for _, g := range got {
		if g != got[0] {
			t.Fatalf("concurrent identical calls created several requests: %v", got)
		}
	}
	page, err := b.svc.ListRequests(t.Context(), b.agent, provider.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Requests) != 2 {
		t.Errorf("%d requests stored, want 2 (same-key and burst)", len(page.Requests))
	}
}

// TestOtherAgentsNotFound: another agent's request or session is "not
// found" to every tool, never forbidden.
func TestOtherAgentsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice := b.connect(t, b.agent)
	sid := str(alice.ok(ToolSessionOpen, map[string]any{"name": "alice's"}), "sessionId")
	id := str(alice.ok(ToolApprovalRequest, requestArgs("k", func(m map[string]any) { m["sessionId"] = sid })), "approvalId")

	carol := b.connect(t, b.other)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{ToolApprovalStatus, map[string]any{"approvalId": id}},
		{ToolApprovalCancel, map[string]any{"approvalId": id}},
		{ToolSessionHeartbeat, map[string]any{"sessionId": sid}},
		{ToolSessionClose, map[string]any{"sessionId": sid}},
		{ToolApprovalRequest, requestArgs("k", func(m map[string]any) { m["sessionId"] = sid })},
	} {
		if got := carol.fail(c.tool, c.args); !strings.HasPrefix(got, "not_found: ") {
			t.Errorf("%s of another agent's: %q, want not_found", c.tool, got)
		}
	}
	if st := alice.ok(ToolApprovalStatus, map[string]any{"approvalId": id}); str(st, "status") != "pending" {
		t.Errorf("the other agent's calls changed the request: %v", st)
	}
	if hb := alice.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid}); str(hb, "session.status") != "waiting" {
		t.Errorf("the other agent's calls changed the session: %v", hb)
	}
}

// TestApprovalCancelAndStatus: cancel withdraws a pending request; a second
// cancel names the state that holds; status can wait for a decision.
func TestApprovalCancelAndStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.connect(t, b.agent)
	id := str(cl.ok(ToolApprovalRequest, requestArgs("c", nil)), "approvalId")
	if st := cl.ok(ToolApprovalCancel, map[string]any{"approvalId": id}); str(st, "status") != "cancelled" || !strings.HasPrefix(str(st, "next"), "cancelled:") {
		t.Errorf("approval_cancel: %v", st)
	}
	if got := cl.fail(ToolApprovalCancel, map[string]any{"approvalId": id}); !strings.HasPrefix(got, "not_pending: ") || !strings.Contains(got, "cancelled") {
		t.Errorf("second cancel: %q", got)
	}
	if got := cl.fail(ToolApprovalStatus, map[string]any{"approvalId": "apr_nope"}); !strings.HasPrefix(got, "not_found: ") {
		t.Errorf("status of an unknown request: %q", got)
	}
	for _, tt := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "approvalId is required"},
		{map[string]any{"approvalId": id, "waitSeconds": 61}, "waitSeconds must be between 0 and 60"},
		{map[string]any{"approvalId": id, "wait": 1}, `unknown field "wait"`},
	} {
		if got := cl.fail(ToolApprovalStatus, tt.args); !strings.Contains(got, tt.want) {
			t.Errorf("approval_status(%v): %q, want %q", tt.args, got, tt.want)
		}
	}

	// waitSeconds returns as soon as a decision is recorded.
	id = str(cl.ok(ToolApprovalRequest, requestArgs("w", nil)), "approvalId")
	done := make(chan map[string]any, 1)
	go func() {
		done <- cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id, "waitSeconds": 60})
	}()
	awaitWaiters(t, b, 1)
	if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-done:
		if str(st, "status") != "approved" {
			t.Errorf("waited status: %v", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("approval_status with waitSeconds did not return after the decision")
	}
}

// TestApprovalStatusWaitOfRevokedToken: an approval_status call waiting
// (waitSeconds) when its token is revoked ends within a second with an
// unauthorized tool error, not with the decision.
func TestApprovalStatusWaitOfRevokedToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.connect(t, b.agent)
	id := str(cl.ok(ToolApprovalRequest, requestArgs("revoked", nil)), "approvalId")
	done := make(chan string, 1)
	go func() { done <- cl.fail(ToolApprovalStatus, map[string]any{"approvalId": id, "waitSeconds": 60}) }()
	awaitWaiters(t, b, 1)
	if _, err := b.svc.RevokeToken(t.Context(), b.admin, b.agent.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "unauthorized: ") {
			t.Errorf("the waiting call of a revoked token: %q, want unauthorized", got)
		}
	case <-time.After(time.Second):
		t.Fatal("approval_status of a token revoked a second ago is still waiting")
	}
}

// TestWorkBoard: work_list shows the columns in order with their items;
// work_get reads one item; an unknown item is not found.
func TestWorkBoard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.connect(t, b.agent)
	if empty := cl.ok(ToolWorkList, nil); len(get(empty, "columns").([]any)) != 0 {
		t.Errorf("empty board: %v", empty)
	}
	item := b.board(t)
	board := cl.ok(ToolWorkList, map[string]any{})
	cols := get(board, "columns").([]any)
	var keys []string
	for _, c := range cols {
		keys = append(keys, str(c.(map[string]any), "key"))
	}
	if strings.Join(keys, ",") != "todo,doing,done" {
		t.Errorf("columns %v", keys)
	}
	items := get(cols[0].(map[string]any), "items").([]any)
	if len(items) != 1 || str(items[0].(map[string]any), "itemId") != item.ID {
		t.Errorf("items of todo: %v", items)
	}
	w := cl.ok(ToolWorkGet, map[string]any{"itemId": item.ID})
	if str(w, "title") != item.Title || str(w, "columnKey") != "todo" {
		t.Errorf("work_get: %v", w)
	}
	if got := cl.fail(ToolWorkGet, map[string]any{"itemId": "wi_nope"}); !strings.HasPrefix(got, "not_found: ") {
		t.Errorf("unknown item: %q", got)
	}
	if got := cl.fail(ToolWorkList, map[string]any{"column": "todo"}); !strings.Contains(got, `unknown field "column"`) {
		t.Errorf("work_list with an argument: %q", got)
	}
}

// failingCreates is a store whose inserts fail as a database would.
type failingCreates struct{ *sqlite.Store }

func (failingCreates) CreateRequest(context.Context, store.NewRequestParams) (airlock.Request, bool, error) {
	return airlock.Request{}, false, errors.New("disk I/O error")
}

// TestWorkMoveCreateErrors: a command proposal the store refuses comes
// back as an error result naming why, never as an empty request. (A
// shadowed err once returned these as success with an empty approvalId.)
func TestWorkMoveCreateErrors(t *testing.T) {
	t.Parallel()

	t.Run("reused idempotencyKey with another body", func(t *testing.T) {
		t.Parallel()
		_, item, cl := setupBoard(t)
		first := cl.ok(ToolApprovalRequest, moveArgs("mv", item.ID, "done"))
		if str(first, "approvalId") == "" {
			t.Fatalf("first proposal: %v", first)
		}
		got := cl.fail(ToolApprovalRequest, moveArgs("mv", item.ID, "doing"))
		if !strings.HasPrefix(got, "idempotency_conflict: ") {
			t.Errorf("same key, another move: %q", got)
		}
	})

	t.Run("session closed", func(t *testing.T) {
		t.Parallel()
		_, item, cl := setupBoard(t)
		sess := cl.ok(ToolSessionOpen, map[string]any{"name": "release"})
		sid := str(sess, "sessionId")
		cl.ok(ToolSessionClose, map[string]any{"sessionId": sid})
		got := cl.fail(ToolApprovalRequest, requestArgs("mv-closed", func(m map[string]any) {
			m["kind"] = "work_change"
			m["proposal"] = move(item.ID, "done")
			m["sessionId"] = sid
		}))
		if !strings.HasPrefix(got, "not_found: ") || !strings.Contains(got, "it is closed") {
			t.Errorf("a command in a closed session: %q", got)
		}
	})

	t.Run("database error", func(t *testing.T) {
		t.Parallel()
		b := setupWith(t, func(s *sqlite.Store) store.Store { return failingCreates{s} })
		item := b.board(t)
		cl := b.connect(t, b.agent)
		for _, proposal := range []any{move(item.ID, "done"), map[string]any{"mode": "advisory"}} {
			got := cl.fail(ToolApprovalRequest, requestArgs("mv-db", func(m map[string]any) {
				m["kind"] = "work_change"
				m["proposal"] = proposal
			}))
			if !strings.HasPrefix(got, "internal: ") {
				t.Errorf("%v with a failing store: %q", proposal, got)
			}
		}
	})
}
