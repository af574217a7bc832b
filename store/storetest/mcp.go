package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// NewMCPStore opens a fresh, empty store that judges every deadline by
// clock, with a fault hook: the driver calls fault at each of its fault points inside the transaction
// that approves a command proposal (at least one between recording the
// approval and the command's effect); when fault returns an error, that
// transaction must fail with it and roll back. RunMCP closes the store.
type NewMCPStore func(t *testing.T, clock airlock.Clock, fault func(point string) error) store.Store

// RunMCP runs the conformance suite of the MCP features: sessions and
// their instructions, the work board, and command proposals applied in the
// transaction of their approval (T12 in docs/reliability.md). It is
// separate from Run because its stores take a fault hook.
func RunMCP(t *testing.T, newStore NewMCPStore) {
	s := &mcpSuite{newStore: newStore}
	runAll(t, []test{
		{"Sessions", s.testSessions},
		{"Instructions", s.testInstructions},
		{"DefaultInstance", s.testDefaultInstance},
		{"Board", s.testBoard},
		{"Commands", s.testCommands},
		{"T12_AtomicCommand", s.testAtomicCommand},
	})
}

type mcpSuite struct {
	newStore NewMCPStore
}

// faultSwitch is the fault hook a test controls: it records the points the
// driver passes and fails where fail says.
type faultSwitch struct {
	mu   sync.Mutex
	seen []string
	fail func(point string) bool // nil fails nowhere
}

// errInjected is the error the fault hook returns.
var errInjected = errors.New("storetest: injected fault")

func (f *faultSwitch) hook(point string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, point)
	if f.fail != nil && f.fail(point) {
		return errInjected
	}
	return nil
}

// arm makes the hook fail where fail says (nil: nowhere) and forgets the
// points seen so far. fail runs under the switch's lock.
func (f *faultSwitch) arm(fail func(point string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.seen = fail, nil
}

func (f *faultSwitch) points() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// mcpBundle is a bundle with its fault switch, and the store's parts that
// keep sessions and the board by name.
type mcpBundle struct {
	*bundle
	sessions store.Sessions
	board    store.Board
	fault    *faultSwitch
	// agent is ownerA's token, with the work:write scope.
	agent airlock.Token
}

func (s *mcpSuite) setup(t *testing.T) *mcpBundle {
	t.Helper()
	clock := NewFakeClock(epoch)
	fault := &faultSwitch{}
	st := s.newStore(t, clock, fault.hook)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	b := &mcpBundle{bundle: &bundle{ctx: t.Context(), store: st, clock: clock}, sessions: st, board: st, fault: fault}
	b.inst = b.instance(t, ownerA)
	b.agent = airlock.Token{ID: ownerA, Name: "agent A", Role: airlock.RoleAgent, Scopes: []string{airlock.ScopeWorkWrite},
		Hash: airlock.HashSecret("secret of " + ownerA), CreatedBy: "tok_admin"}
	wantOK(t, st.CreateToken(b.ctx, b.agent))
	return b
}

// session opens a session owned by owner.
func (b *mcpBundle) session(t *testing.T, owner string) airlock.Instance {
	t.Helper()
	in, err := b.store.CreateInstance(b.ctx, airlock.Instance{
		ID: airlock.NewID(airlock.PrefixSession), OwnerID: owner, Name: "session of " + owner, Kind: airlock.InstanceSession,
	}, owner)
	if err != nil {
		t.Fatalf("CreateInstance(session): %v", err)
	}
	return in
}

// linked creates an MCP request linked to sess (a question with choices),
// changed by mods.
func (b *mcpBundle) linked(t *testing.T, sess airlock.Instance, mods ...func(*store.NewRequestParams)) airlock.Request {
	t.Helper()
	return b.create(t, append([]func(*store.NewRequestParams){func(p *store.NewRequestParams) {
		r := &p.Request
		r.InstanceID, r.SessionID, r.OwnerID, p.Actor = sess.ID, sess.ID, sess.OwnerID, sess.OwnerID
		r.Kind, r.Tool, r.Arguments, r.AgentReasoning = airlock.KindAgentRequest, "", nil, ""
		r.Title = "Which colour?"
		r.Proposal = &airlock.Proposal{Mode: airlock.ProposalAdvisory}
		r.Question = &airlock.Question{Choices: []string{"blue", "green"}}
	}}, mods...)...)
}

// decide records a decision with a note and answer.
func (b *mcpBundle) decide(id string, status airlock.State, note, answer string) (airlock.Request, error) {
	p := store.DecideParams{ID: id, Status: status, Note: note, Answer: answer, Actor: reviewer}
	if status == airlock.StateApproved {
		p.Validity = validity
	}
	return b.store.Decide(b.ctx, p)
}

// column creates a board column.
func (b *mcpBundle) column(t *testing.T, key, name string) airlock.Column {
	t.Helper()
	c, err := b.board.CreateColumn(b.ctx, airlock.Column{Key: key, Name: name}, reviewer)
	if err != nil {
		t.Fatalf("CreateColumn(%s): %v", key, err)
	}
	return c
}

// item creates a work item in column.
func (b *mcpBundle) item(t *testing.T, title, column string) airlock.WorkItem {
	t.Helper()
	w, err := b.board.CreateWorkItem(b.ctx, airlock.WorkItem{ID: airlock.NewID(airlock.PrefixWorkItem), Title: title, ColumnKey: column}, reviewer)
	if err != nil {
		t.Fatalf("CreateWorkItem(%s): %v", title, err)
	}
	return w
}

// getItem reads a work item that must exist.
func (b *mcpBundle) getItem(t *testing.T, id string) airlock.WorkItem {
	t.Helper()
	w, err := b.board.GetWorkItem(b.ctx, id)
	if err != nil {
		t.Fatalf("GetWorkItem(%s): %v", id, err)
	}
	return w
}

// move creates ownerA's pending work_move proposal of item to column, as
// the provider would: observed where the item is now.
func (b *mcpBundle) move(t *testing.T, item airlock.WorkItem, to string, mods ...func(*store.NewRequestParams)) airlock.Request {
	t.Helper()
	input := json.RawMessage(`{"itemId":"` + item.ID + `","columnKey":"` + to + `"}`)
	observed, err := json.Marshal(airlock.WorkMoveObserved{FromColumnKey: item.ColumnKey, ItemTitle: item.Title})
	wantOK(t, err)
	return b.create(t, append([]func(*store.NewRequestParams){func(p *store.NewRequestParams) {
		r := &p.Request
		r.Kind, r.Tool, r.Arguments, r.AgentReasoning = airlock.KindWorkChange, airlock.MethodWorkMove, input, ""
		r.Title = "Move " + item.Title + " to " + to
		r.Proposal = &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{
			Method: airlock.MethodWorkMove, Input: input, Observed: observed}}
	}}, mods...)...)
}

// heartbeat takes a session's instructions and fails t on error.
func (b *mcpBundle) heartbeat(t *testing.T, id string) []airlock.Instruction {
	t.Helper()
	_, ists, err := b.sessions.Heartbeat(b.ctx, id)
	if err != nil {
		t.Fatalf("Heartbeat(%s): %v", id, err)
	}
	return ists
}

// allEvents reads the whole audit log, however long.
func (b *mcpBundle) allEvents(t *testing.T) []airlock.Event { return AllEvents(t, b.store) }

// eventsOf returns the audit events of type typ.
func (b *mcpBundle) eventsOf(t *testing.T, typ airlock.EventType) []airlock.Event {
	t.Helper()
	return ofType(b.allEvents(t), typ)
}
