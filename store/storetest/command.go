package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testCommands checks work_move command proposals: applied in the
// transaction of their approval, re-checked at that moment, never applied
// when denied or expired.
func (s *mcpSuite) testCommands(t *testing.T) {
	runAll(t, []test{
		{"approve moves the item atomically", s.commandApplied},
		{"item moved meanwhile: command_failed, request still pending", s.commandItemMoved},
		{"token lost work:write or was revoked: command_failed", s.commandTokenLost},
		{"every command failure says why in the same words", s.commandFailures},
		{"denied and expired commands never execute", s.commandNeverRuns},
		{"two moves of one item: the second approval fails", s.commandTwoMoves},
		{"an advisory proposal executes nothing", s.commandAdvisory},
	})
}

// boardWithItem sets up a bundle whose board has columns todo, doing,
// review and done, and one item in doing.
func (s *mcpSuite) boardWithItem(t *testing.T) (*mcpBundle, airlock.WorkItem) {
	t.Helper()
	b := s.setup(t)
	for _, k := range []string{"todo", "doing", "review", "done"} {
		b.column(t, k, strings.ToUpper(k[:1])+k[1:])
	}
	return b, b.item(t, "Ship it", "doing")
}

// unchanged fails t unless the item is exactly as it was and r is still
// pending without a decision or a command result.
func unchanged(t *testing.T, b *mcpBundle, item airlock.WorkItem, r airlock.Request) {
	t.Helper()
	if got := b.getItem(t, item.ID); show(got) != show(item) {
		t.Fatalf("item changed: %s, want %s", show(got), show(item))
	}
	got := b.get(t, r.ID)
	if got.State != airlock.StatePending || got.Decision != nil || got.CommandResult != nil {
		t.Fatalf("request after a failed approval = %s, want still pending with no decision or result", show(got))
	}
	for _, e := range b.allEvents(t) {
		if e.RequestID == r.ID && (e.Type == airlock.EventRequestApproved || e.Type == airlock.EventWorkItemMoved) {
			t.Fatalf("a failed approval left the event %s", show(e))
		}
	}
}

func (s *mcpSuite) commandApplied(t *testing.T) {
	b, item := s.boardWithItem(t)
	r := b.move(t, item, "done")
	if got := b.get(t, r.ID); string(got.Proposal.Command.Observed) != string(r.Proposal.Command.Observed) || got.CommandResult != nil {
		t.Fatalf("stored command = %s, want the observation kept and no result yet", show(got.Proposal))
	}
	at := b.clock.Advance(time.Second).Truncate(time.Microsecond)
	approved, err := b.decide(r.ID, airlock.StateApproved, "ship it", "")
	wantOK(t, err)
	res := approved.CommandResult
	if approved.State != airlock.StateApproved || res == nil || res.Status != airlock.CommandApplied || !res.AppliedAt.Equal(at) ||
		!strings.Contains(res.Detail, item.ID) || !strings.Contains(res.Detail, "done") {
		t.Fatalf("approved command = %s, want applied at %v with a detail naming the item and column", show(approved), at)
	}
	sameRequest(t, "read back", b.get(t, r.ID), approved)
	moved := b.getItem(t, item.ID)
	if moved.ColumnKey != "done" || moved.Version != item.Version+1 || !moved.UpdatedAt.Equal(at) {
		t.Fatalf("item after approval = %s, want in done at version %d", show(moved), item.Version+1)
	}
	evs := b.eventsOf(t, airlock.EventWorkItemMoved)
	if len(evs) != 1 || evs[0].RequestID != r.ID || evs[0].Subject != item.ID || evs[0].Actor != reviewer || !evs[0].At.Equal(at) {
		t.Fatalf("work_item.moved events = %s, want one for %s by the reviewer", show(evs), r.ID)
	}
	_, err = b.decide(r.ID, airlock.StateApproved, "", "")
	wantErr(t, err, airlock.CodeNotPending, airlock.StateApproved)
	if got := b.getItem(t, item.ID); got.Version != moved.Version {
		t.Fatalf("a second approval moved the item again (version %d)", got.Version)
	}
}

func (s *mcpSuite) commandItemMoved(t *testing.T) {
	b, item := s.boardWithItem(t)
	r := b.move(t, item, "done")
	review := "review"
	item, err := b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: item.ID, ColumnKey: &review}, reviewer)
	wantOK(t, err)
	_, err = b.decide(r.ID, airlock.StateApproved, "", "")
	wantErr(t, err, airlock.CodeCommandFailed, airlock.StatePending)
	if msg := err.Error(); !strings.Contains(msg, "item "+item.ID+" is no longer in column doing (now in review)") {
		t.Fatalf("command_failed says %q; want it to say the item is no longer in doing (now in review)", msg)
	}
	unchanged(t, b, item, r)
	// The reviewer can still deny it; nothing runs.
	_, err = b.decide(r.ID, airlock.StateDenied, "it moved", "")
	wantOK(t, err)
	if got := b.getItem(t, item.ID); got.Version != item.Version {
		t.Fatalf("a denial moved the item")
	}
}

func (s *mcpSuite) commandTokenLost(t *testing.T) {
	b, item := s.boardWithItem(t)
	lost := b.move(t, item, "done")
	noScope := b.agent
	noScope.Scopes = nil
	wantOK(t, b.store.PutToken(b.ctx, noScope))
	_, err := b.decide(lost.ID, airlock.StateApproved, "", "")
	wantErr(t, err, airlock.CodeCommandFailed, airlock.StatePending)
	if !strings.Contains(err.Error(), airlock.ScopeWorkWrite) {
		t.Fatalf("command_failed says %q, want it to name the missing scope", err)
	}
	unchanged(t, b, item, lost)

	wantOK(t, b.store.PutToken(b.ctx, b.agent)) // scope back
	revoked := b.move(t, item, "todo")
	_, err = b.store.RevokeToken(b.ctx, b.agent.ID, "tok_admin")
	wantOK(t, err)
	_, err = b.decide(revoked.ID, airlock.StateApproved, "", "")
	wantErr(t, err, airlock.CodeCommandFailed, airlock.StatePending)
	if !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("command_failed says %q, want it to say the token was revoked", err)
	}
	unchanged(t, b, item, revoked)
}

// Every reason a command cannot apply is refused with the same words
// by every store (the domain's CommandFailed and WorkMove), and leaves
// the request pending.
func (s *mcpSuite) commandFailures(t *testing.T) {
	b, item := s.boardWithItem(t)
	failed := func(method string, r airlock.Request, reason string) string {
		return method + " cannot apply: " + reason + "; nothing was recorded and request " + r.ID +
			" is still pending (deny it, or let it expire)"
	}
	approve := func(t *testing.T, r airlock.Request, method, reason string) {
		t.Helper()
		_, err := b.decide(r.ID, airlock.StateApproved, "", "")
		wantMessage(t, err, airlock.CodeCommandFailed, airlock.StatePending, failed(method, r, reason))
		if got := b.get(t, r.ID); got.State != airlock.StatePending || got.CommandResult != nil {
			t.Fatalf("request after a failed approval = %s, want still pending", show(got))
		}
	}
	move := func(t *testing.T, r airlock.Request, reason string) {
		t.Helper()
		approve(t, r, airlock.MethodWorkMove, reason)
	}

	moved := b.move(t, item, "done")
	review := "review"
	now, err := b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: item.ID, ColumnKey: &review}, reviewer)
	wantOK(t, err)
	move(t, moved, "item "+item.ID+" is no longer in column doing (now in review)")
	item = now

	move(t, b.move(t, item, "nowhere"), "column nowhere no longer exists")
	move(t, b.move(t, airlock.WorkItem{ID: "wi_missing", Title: "Gone", ColumnKey: "todo"}, "done"), "item wi_missing no longer exists")
	move(t, b.move(t, item, "done", func(p *store.NewRequestParams) { p.Request.Proposal.Command.Observed = nil }),
		"the request records no observed state of item "+item.ID+" to check it against")
	unknown := b.move(t, item, "done", func(p *store.NewRequestParams) { p.Request.Proposal.Command.Method = "work_delete" })
	approve(t, unknown, "work_delete", `this server does not know the command "work_delete"`)

	other := b.instance(t, ownerB) // ownerB has no token
	move(t, b.move(t, item, "done", func(p *store.NewRequestParams) {
		p.Request.InstanceID, p.Request.OwnerID, p.Actor = other.ID, other.OwnerID, other.OwnerID
	}), "the requesting token "+ownerB+" no longer exists")

	noScope := b.agent
	noScope.Scopes = nil
	wantOK(t, b.store.PutToken(b.ctx, noScope))
	move(t, b.move(t, item, "done"), "the requesting agent's token "+ownerA+" no longer has the work:write scope")
	wantOK(t, b.store.PutToken(b.ctx, b.agent))
	revoked := b.move(t, item, "done")
	tok, err := b.store.RevokeToken(b.ctx, b.agent.ID, "tok_admin")
	wantOK(t, err)
	move(t, revoked, "the requesting agent's token "+ownerA+" was revoked at "+tok.RevokedAt.Format(time.RFC3339Nano))

	if got := b.getItem(t, item.ID); show(got) != show(item) {
		t.Fatalf("item after failed approvals = %s, want unchanged %s", show(got), show(item))
	}
}

func (s *mcpSuite) commandNeverRuns(t *testing.T) {
	b, item := s.boardWithItem(t)
	denied := b.move(t, item, "done")
	_, err := b.decide(denied.ID, airlock.StateDenied, "no", "")
	wantOK(t, err)
	swept := b.move(t, item, "done", func(p *store.NewRequestParams) { p.Window = time.Minute })
	late := b.move(t, item, "review", func(p *store.NewRequestParams) { p.Window = time.Minute })
	b.clock.Set(swept.DeadlineAt)
	_, err = b.store.ExpireDue(b.ctx, 1)
	wantOK(t, err)
	_, err = b.decide(late.ID, airlock.StateApproved, "", "")
	wantErr(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)
	for _, id := range []string{denied.ID, swept.ID, late.ID} {
		if r := b.get(t, id); r.CommandResult != nil || r.State == airlock.StateApproved {
			t.Fatalf("%s = %s, want not approved and no command result", id, show(r))
		}
	}
	if got := b.getItem(t, item.ID); show(got) != show(item) {
		t.Fatalf("item after denial and expiry = %s, want unchanged %s", show(got), show(item))
	}
	if evs := b.eventsOf(t, airlock.EventWorkItemMoved); len(evs) != 0 {
		t.Fatalf("work_item.moved events %s after no approval", show(evs))
	}
}

func (s *mcpSuite) commandTwoMoves(t *testing.T) {
	b, item := s.boardWithItem(t)
	first, second := b.move(t, item, "done"), b.move(t, item, "review")
	_, err := b.decide(first.ID, airlock.StateApproved, "", "")
	wantOK(t, err)
	_, err = b.decide(second.ID, airlock.StateApproved, "", "")
	wantErr(t, err, airlock.CodeCommandFailed, airlock.StatePending)
	unchanged(t, b, b.getItem(t, item.ID), second)
}

func (s *mcpSuite) commandAdvisory(t *testing.T) {
	b, item := s.boardWithItem(t)
	r := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Kind, p.Request.Tool, p.Request.Arguments = airlock.KindWorkChange, "", nil
		p.Request.Proposal = &airlock.Proposal{Mode: airlock.ProposalAdvisory}
	})
	got, err := b.decide(r.ID, airlock.StateApproved, "", "")
	wantOK(t, err)
	if got.CommandResult != nil || b.getItem(t, item.ID).Version != item.Version {
		t.Fatalf("an advisory approval ran something: %s", show(got))
	}
}

// testAtomicCommand is T12: a fault injected between recording an approval
// and its command's effect leaves neither; over many iterations, and with
// concurrent approvals, moves by reviewers and faults, there are 0
// approvals without effect and 0 effects without approval.
func (s *mcpSuite) testAtomicCommand(t *testing.T) {
	runAll(t, []test{
		{"a fault at every point rolls back both", s.faultAtEveryPoint},
		{"concurrent approvals, moves and faults", s.faultsUnderRace},
	})
}

func (s *mcpSuite) faultAtEveryPoint(t *testing.T) {
	b := s.setup(t)
	b.column(t, "left", "Left")
	b.column(t, "right", "Right")
	item := b.item(t, "Ping-pong", "left")
	other := map[string]string{"left": "right", "right": "left"}

	// A clean approval shows the driver's fault points.
	r := b.move(t, item, "right")
	_, err := b.decide(r.ID, airlock.StateApproved, "", "")
	wantOK(t, err)
	points := b.fault.points()
	if len(points) == 0 {
		t.Fatalf("the driver called the fault hook at no point of a command's approval")
	}
	item = b.getItem(t, item.ID)

	const iterations = 60
	for i := range iterations {
		point := points[i%len(points)]
		r := b.move(t, item, other[item.ColumnKey])
		b.fault.arm(func(p string) bool { return p == point })
		_, err := b.decide(r.ID, airlock.StateApproved, "", "")
		b.fault.arm(nil)
		if !errors.Is(err, errInjected) && (err == nil || !strings.Contains(err.Error(), errInjected.Error())) {
			t.Fatalf("iteration %d: approval with a fault at %s = %v, want the injected fault", i, point, err)
		}
		if got := b.getItem(t, item.ID); got.Version != item.Version || got.ColumnKey != item.ColumnKey {
			t.Fatalf("iteration %d: fault at %s left an effect without approval: %s", i, point, show(got))
		}
		if got := b.get(t, r.ID); got.State != airlock.StatePending || got.CommandResult != nil {
			t.Fatalf("iteration %d: fault at %s left an approval without effect: %s", i, point, show(got))
		}
		approved, err := b.decide(r.ID, airlock.StateApproved, "", "")
		wantOK(t, err)
		moved := b.getItem(t, item.ID)
		if approved.CommandResult == nil || moved.Version != item.Version+1 || moved.ColumnKey != other[item.ColumnKey] {
			t.Fatalf("iteration %d: the retried approval = %s, item %s", i, show(approved), show(moved))
		}
		item = moved
	}
	checkAtomic(t, b)
}

func (s *mcpSuite) faultsUnderRace(t *testing.T) {
	b := s.setup(t)
	cols := []string{"a", "b", "c"}
	for _, k := range cols {
		b.column(t, k, strings.ToUpper(k))
	}
	var items []airlock.WorkItem
	for i := range 3 {
		items = append(items, b.item(t, fmt.Sprintf("item %d", i), cols[i]))
	}
	rng := rand.New(rand.NewPCG(12, 34))
	b.fault.arm(func(string) bool { return rng.IntN(3) == 0 })
	const rounds, racers = 25, 4
	for round := range rounds {
		// Each round proposes moves of every item as it is now, then
		// approves them while a reviewer moves items directly.
		var reqs []airlock.Request
		for _, it := range items {
			cur := b.getItem(t, it.ID)
			for j := range racers - 1 {
				to := cols[(indexOf(cols, cur.ColumnKey)+1+j%2)%len(cols)]
				reqs = append(reqs, b.move(t, cur, to))
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(reqs)+1)
		for _, r := range reqs {
			wg.Go(func() {
				_, err := b.decide(r.ID, airlock.StateApproved, "", "")
				if err != nil && airlock.ErrorCode(err) != airlock.CodeCommandFailed && !strings.Contains(err.Error(), errInjected.Error()) {
					errs <- fmt.Errorf("approve %s: %w", r.ID, err)
				}
			})
		}
		wg.Go(func() {
			it := items[round%len(items)]
			to := cols[round%len(cols)]
			_, err := b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: it.ID, ColumnKey: &to}, reviewer)
			if err != nil {
				errs <- fmt.Errorf("reviewer move: %w", err)
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	b.fault.arm(nil)
	checkAtomic(t, b)
}

// indexOf returns the index of v in list (-1 when absent).
func indexOf(list []string, v string) int {
	for i, s := range list {
		if s == v {
			return i
		}
	}
	return -1
}

// checkAtomic checks the whole store: every approved command has its result
// and exactly one work_item.moved event; every such event belongs to an
// approved command; every item's version counts exactly its changes.
func checkAtomic(t *testing.T, b *mcpBundle) {
	t.Helper()
	moves := map[string]int{}   // request ID → moved events
	changes := map[string]int{} // item ID → updated and moved events
	for _, e := range b.allEvents(t) {
		switch e.Type {
		case airlock.EventWorkItemMoved:
			moves[e.RequestID]++
			changes[e.Subject]++
		case airlock.EventWorkItemUpdated:
			changes[e.Subject]++
		}
	}
	var (
		approved, withoutEffect int
		before                  int64
	)
	for {
		page, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{BeforeSeq: before, Limit: 500})
		wantOK(t, err)
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			if r.Proposal == nil || r.Proposal.Command == nil {
				continue
			}
			isApproved := r.State == airlock.StateApproved
			if isApproved {
				approved++
			}
			if isApproved != (r.CommandResult != nil) || isApproved != (moves[r.ID] == 1) || moves[r.ID] > 1 {
				withoutEffect++
				t.Errorf("request %s is %s with result %s and %d moves: an approval without its effect or an effect without approval",
					r.ID, r.State, show(r.CommandResult), moves[r.ID])
			}
			delete(moves, r.ID)
		}
		before = page[len(page)-1].Seq
	}
	for id, n := range moves {
		t.Errorf("%d work_item.moved events for %s, which is no approved command", n, id)
	}
	board, err := b.board.Board(b.ctx)
	wantOK(t, err)
	for _, c := range board {
		for _, w := range c.Items {
			if w.Version != 1+changes[w.ID] {
				t.Errorf("item %s is at version %d after %d recorded changes", w.ID, w.Version, changes[w.ID])
			}
		}
	}
	if approved == 0 {
		t.Errorf("no command was approved: the test proved nothing")
	}
	t.Logf("T12: %d approved commands, %d approvals without effect or effects without approval", approved, withoutEffect)
}
