package provider

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// boardBundle is a bundle with a board (columns todo, doing, done; one
// item in doing) and an agent holding work:write.
type boardBundle struct {
	*bundle
	mover airlock.Caller // agent with work:write, principal "alice"
	item  airlock.WorkItem
}

func setupBoard(t *testing.T, opt options) *boardBundle {
	t.Helper()
	b := &boardBundle{bundle: setup(t, opt)}
	ctx := t.Context()
	for _, k := range []string{"todo", "doing", "done"} {
		if _, err := b.svc.CreateColumn(ctx, b.reviewer, k, strings.ToUpper(k)); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if b.item, err = b.svc.CreateWorkItem(ctx, b.reviewer, "Ship it", "doing"); err != nil {
		t.Fatal(err)
	}
	b.mover = b.mint(t, airlock.RoleAgent, "alice", airlock.ScopeWorkWrite)
	return b
}

// moveInput is a work_move approval_request of item to column.
func moveInput(itemID, column string) MCPRequestInput {
	return MCPRequestInput{
		Kind: airlock.KindWorkChange, Title: "Move to " + column, IdempotencyKey: newKey(),
		Proposal: &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{
			Method: airlock.MethodWorkMove, Input: json.RawMessage(`{"itemId":"` + itemID + `","columnKey":"` + column + `"}`)}},
	}
}

// propose creates a work_move request as the mover and fails the test if
// it cannot.
func (b *boardBundle) propose(t *testing.T, column string) airlock.Request {
	t.Helper()
	r, created, err := b.svc.CreateMCPRequest(t.Context(), b.mover, moveInput(b.item.ID, column))
	if err != nil || !created {
		t.Fatalf("propose work_move: created=%v err=%v", created, err)
	}
	// Its ID starts with the clock's millisecond (airlock.NewRequestID).
	if n := len(airlock.PrefixRequest) + 9; r.ID[:n] != airlock.NewRequestID(b.clock.Now())[:n] {
		t.Fatalf("propose work_move: ID %s, want one made at the clock's %s", r.ID, b.clock.Now())
	}
	return r
}

// TestCreateMCPRequest checks the approval_request rules the provider
// adds to the input's own: who may ask, which session, deadlines, and
// idempotency.
func TestCreateMCPRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	sess := b.openSession(t, b.agent)
	advisory := func(mod func(*MCPRequestInput)) MCPRequestInput {
		in := MCPRequestInput{
			Kind: airlock.KindMemoryChange, Title: "Remember my birthday", IdempotencyKey: newKey(),
			Proposal: &airlock.Proposal{Mode: airlock.ProposalAdvisory},
		}
		if mod != nil {
			mod(&in)
		}
		return in
	}

	t.Run("the input's rules, by field", func(t *testing.T) {
		_, _, err := b.svc.CreateMCPRequest(ctx, b.agent, advisory(func(in *MCPRequestInput) { in.ExpiresInMinutes = new(4) }))
		wantField(t, err, "expiresInMinutes", "expiresInMinutes must be between 5 and 10080")
		_, _, err = b.svc.CreateMCPRequest(ctx, b.agent, advisory(func(in *MCPRequestInput) { in.Question = &airlock.Question{} }))
		wantField(t, err, "question", "question is only allowed with kind agent_request and an advisory proposal")
	})

	t.Run("agents only", func(t *testing.T) {
		for _, c := range []airlock.Caller{b.reviewer, b.admin} {
			_, _, err := b.svc.CreateMCPRequest(ctx, c, advisory(nil))
			wantCode(t, err, airlock.CodeForbidden, "")
		}
	})

	t.Run("without a session: the agent's default MCP instance", func(t *testing.T) {
		r1, _, err := b.svc.CreateMCPRequest(ctx, b.otherAgent, advisory(nil))
		if err != nil {
			t.Fatal(err)
		}
		r2, _, err := b.svc.CreateMCPRequest(ctx, b.otherAgent, advisory(nil))
		if err != nil {
			t.Fatal(err)
		}
		inst, err := b.svc.Instance(ctx, b.otherAgent, r1.InstanceID)
		if err != nil || r2.InstanceID != r1.InstanceID || r1.SessionID != "" || inst.Name != "mcp" || inst.Kind != airlock.InstanceAdapter {
			t.Fatalf("requests without a session: instances %s and %s (%+v, %v), want one default instance named mcp", r1.InstanceID, r2.InstanceID, inst, err)
		}
		if r1.Tool != "" || r1.Arguments != nil || r1.Proposal.Mode != airlock.ProposalAdvisory {
			t.Fatalf("an advisory request = %+v, want no tool and no arguments", r1)
		}
	})

	t.Run("with a session: linked to it", func(t *testing.T) {
		r, _, err := b.svc.CreateMCPRequest(ctx, b.agent, advisory(func(in *MCPRequestInput) { in.SessionID = sess.ID }))
		if err != nil || r.InstanceID != sess.ID || r.SessionID != sess.ID {
			t.Fatalf("linked request = %+v, %v; want instance and session %s", r, err, sess.ID)
		}
	})

	t.Run("another agent's, an unknown or a closed session is not found", func(t *testing.T) {
		theirs := b.openSession(t, b.otherAgent)
		closed := b.openSession(t, b.agent)
		if _, err := b.svc.CloseSession(ctx, b.agent, closed.ID); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{theirs.ID, "ses_missing", closed.ID, b.inst.ID} {
			_, _, err := b.svc.CreateMCPRequest(ctx, b.agent, advisory(func(in *MCPRequestInput) { in.SessionID = id }))
			wantCode(t, err, airlock.CodeNotFound, "")
			if !strings.Contains(err.Error(), "session") {
				t.Fatalf("sessionId %s: %q, want it to name the session", id, err)
			}
		}
	})

	t.Run("deadlines: as asked, the maximum when absent", func(t *testing.T) {
		r, _, err := b.svc.CreateMCPRequest(ctx, b.agent, advisory(func(in *MCPRequestInput) { in.ExpiresInMinutes = new(30) }))
		if err != nil || !r.DeadlineAt.Equal(r.CreatedAt.Add(30*time.Minute)) || r.Timeout != "30m" {
			t.Fatalf("expiresInMinutes 30: deadline %v after %v, timeout %q, %v", r.DeadlineAt, r.CreatedAt, r.Timeout, err)
		}
		r, _, err = b.svc.CreateMCPRequest(ctx, b.agent, advisory(nil))
		if err != nil || !r.DeadlineAt.Equal(r.CreatedAt.Add(b.svc.Limits().MaxTimeout)) || r.Timeout != "" {
			t.Fatalf("no expiresInMinutes: deadline %v after %v, want the maximum window", r.DeadlineAt, r.CreatedAt)
		}
	})

	t.Run("idempotency: replay, conflict, and replay after the session closed", func(t *testing.T) {
		s2 := b.openSession(t, b.agent)
		in := advisory(func(in *MCPRequestInput) { in.SessionID = s2.ID; in.Description = "the 4th" })
		first, created, err := b.svc.CreateMCPRequest(ctx, b.agent, in)
		if err != nil || !created {
			t.Fatal(created, err)
		}
		b.wantReplayed(t, b.agent, in, first, "replay")
		// The same key is independent for another agent.
		if _, created, err := b.svc.CreateMCPRequest(ctx, b.otherAgent, advisory(func(x *MCPRequestInput) { x.IdempotencyKey = in.IdempotencyKey })); err != nil || !created {
			t.Fatalf("another agent's same key: created=%v %v", created, err)
		}
		if _, err := b.svc.CloseSession(ctx, b.agent, s2.ID); err != nil {
			t.Fatal(err)
		}
		after, created, err := b.svc.CreateMCPRequest(ctx, b.agent, in)
		if err != nil || created || after.ID != first.ID || after.State != airlock.StateCancelled {
			t.Fatalf("replay after close = %s %s created=%v %v, want the original, cancelled", after.ID, after.State, created, err)
		}
	})
}

// wantReplayed checks that agent's in, made again, answers with first and
// creates nothing, and that in with another title is an idempotency
// conflict; what names the replay, for messages.
func (b *bundle) wantReplayed(t *testing.T, agent airlock.Caller, in MCPRequestInput, first airlock.Request, what string) {
	t.Helper()
	again, created, err := b.svc.CreateMCPRequest(t.Context(), agent, in)
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("%s = %s created=%v %v, want the original %s not created", what, again.ID, created, err, first.ID)
	}
	changed := in
	changed.Title = "something else"
	_, _, err = b.svc.CreateMCPRequest(t.Context(), agent, changed)
	wantCode(t, err, airlock.CodeIdempotencyConflict, "")
}

// wantField fails the test unless err is invalid_request naming field with
// a message containing msg.
func wantField(t *testing.T, err error, field, msg string) {
	t.Helper()
	var e *airlock.Error
	if !errors.As(err, &e) || e.Code != airlock.CodeInvalidRequest || e.Field != field || !strings.Contains(e.Message, msg) {
		t.Fatalf("err = %v, want invalid_request on %s saying %q", err, field, msg)
	}
}

// TestWorkMoveRequest checks a work_move proposal when it is made: scope,
// item and column, and what is observed.
func TestWorkMoveRequest(t *testing.T) {
	t.Parallel()
	b := setupBoard(t, options{})
	ctx := t.Context()

	r := b.propose(t, "done")
	if r.Tool != airlock.MethodWorkMove || string(r.Arguments) != string(r.Proposal.Command.Input) || r.Kind != airlock.KindWorkChange {
		t.Fatalf("command request = %+v, want tool work_move and the input as arguments", r)
	}
	var obs airlock.WorkMoveObserved
	if err := json.Unmarshal(r.Proposal.Command.Observed, &obs); err != nil || obs.FromColumnKey != "doing" || obs.ItemTitle != "Ship it" {
		t.Fatalf("observed = %s (%v), want from doing, title Ship it", r.Proposal.Command.Observed, err)
	}

	_, _, err := b.svc.CreateMCPRequest(ctx, b.agent, moveInput(b.item.ID, "done")) // no work:write
	wantCode(t, err, airlock.CodeForbidden, "")
	if !strings.Contains(err.Error(), "work:write") {
		t.Fatalf("without the scope: %q, want it to name work:write", err)
	}
	_, _, err = b.svc.CreateMCPRequest(ctx, b.mover, moveInput("wi_missing", "done"))
	wantField(t, err, "proposal.command.input.itemId", "does not exist")
	_, _, err = b.svc.CreateMCPRequest(ctx, b.mover, moveInput(b.item.ID, "archive"))
	wantField(t, err, "proposal.command.input.columnKey", "todo, doing, done")
	_, _, err = b.svc.CreateMCPRequest(ctx, b.mover, moveInput(b.item.ID, "doing"))
	wantField(t, err, "proposal.command.input.columnKey", "already in column doing")

	// A replay answers with the original even after the item moved, when
	// the same request made now would be refused.
	in := moveInput(b.item.ID, "todo")
	first, _, err := b.svc.CreateMCPRequest(ctx, b.mover, in)
	if err != nil {
		t.Fatal(err)
	}
	todo := "todo"
	if _, err := b.svc.UpdateWorkItem(ctx, b.reviewer, airlock.WorkItemPatch{ID: b.item.ID, ColumnKey: &todo}); err != nil {
		t.Fatal(err)
	}
	b.wantReplayed(t, b.mover, in, first, "replay after the item moved")
}

// TestWorkMoveDecision checks that an approval applies the move in its
// transaction, and that a command that can no longer apply leaves the
// request pending with command_failed.
func TestWorkMoveDecision(t *testing.T) {
	t.Parallel()
	approve := airlock.DecisionInput{Status: airlock.StateApproved}

	t.Run("approve moves the item", func(t *testing.T) {
		t.Parallel()
		b := setupBoard(t, options{})
		r := b.propose(t, "done")
		got, err := b.svc.Decide(t.Context(), b.reviewer, r.ID, approve)
		if err != nil || got.CommandResult == nil || got.CommandResult.Status != airlock.CommandApplied {
			t.Fatalf("approve = %+v, %v; want the command applied", got, err)
		}
		item, err := b.svc.WorkItem(t.Context(), b.mover, b.item.ID)
		if err != nil || item.ColumnKey != "done" || item.Version != b.item.Version+1 {
			t.Fatalf("item after approval = %+v, %v; want in done, one version later", item, err)
		}
		read, err := b.svc.Request(t.Context(), b.mover, r.ID, 0)
		if err != nil || read.CommandResult == nil {
			t.Fatalf("the agent reads %+v, %v; want the command's result", read, err)
		}
	})

	t.Run("item moved meanwhile", func(t *testing.T) {
		t.Parallel()
		b := setupBoard(t, options{})
		r := b.propose(t, "done")
		todo := "todo"
		if _, err := b.svc.UpdateWorkItem(t.Context(), b.reviewer, airlock.WorkItemPatch{ID: b.item.ID, ColumnKey: &todo}); err != nil {
			t.Fatal(err)
		}
		_, err := b.svc.Decide(t.Context(), b.reviewer, r.ID, approve)
		wantCode(t, err, airlock.CodeCommandFailed, airlock.StatePending)
		if !strings.Contains(err.Error(), "no longer in column doing (now in todo)") {
			t.Fatalf("command_failed says %q", err)
		}
		if got := b.stored(t, r.ID); got.State != airlock.StatePending {
			t.Fatalf("request after command_failed is %s, want pending", got.State)
		}
	})

	// The mover's token changes between the proposal and the approval: the
	// command fails and the item stays where it was.
	for _, tc := range []struct {
		name, token string
		change      func(t *testing.T, b *boardBundle)
	}{
		{"token revoked meanwhile", "a revoked token", func(t *testing.T, b *boardBundle) {
			if _, err := b.svc.RevokeToken(t.Context(), b.admin, b.mover.ID); err != nil {
				t.Fatal(err)
			}
		}},
		{"token lost work:write meanwhile", "a token without work:write", func(t *testing.T, b *boardBundle) {
			tok, err := b.store.GetToken(t.Context(), b.mover.ID)
			if err != nil {
				t.Fatal(err)
			}
			tok.Scopes = nil
			if err := b.store.PutToken(t.Context(), tok); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupBoard(t, options{})
			r := b.propose(t, "done")
			tc.change(t, b)
			_, err := b.svc.Decide(t.Context(), b.reviewer, r.ID, approve)
			wantCode(t, err, airlock.CodeCommandFailed, airlock.StatePending)
			if item, _ := b.store.GetWorkItem(t.Context(), b.item.ID); item.ColumnKey != "doing" {
				t.Fatalf("item moved to %s for %s", item.ColumnKey, tc.token)
			}
		})
	}

	t.Run("denied and expired commands never execute", func(t *testing.T) {
		t.Parallel()
		b := setupBoard(t, options{})
		denied := b.propose(t, "done")
		in := moveInput(b.item.ID, "todo")
		in.ExpiresInMinutes = new(5)
		expiring, _, err := b.svc.CreateMCPRequest(t.Context(), b.mover, in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.svc.Decide(t.Context(), b.reviewer, denied.ID, airlock.DecisionInput{Status: airlock.StateDenied, Note: "no"}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(5 * time.Minute)
		_, err = b.svc.Decide(t.Context(), b.reviewer, expiring.ID, approve)
		wantCode(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)
		item, _ := b.store.GetWorkItem(t.Context(), b.item.ID)
		if item.ColumnKey != "doing" || item.Version != b.item.Version {
			t.Fatalf("item after a denial and an expiry = %+v, want unchanged", item)
		}
		for _, id := range []string{denied.ID, expiring.ID} {
			if got := b.stored(t, id); got.CommandResult != nil {
				t.Fatalf("%s has a command result %+v", id, got.CommandResult)
			}
		}
	})
}
