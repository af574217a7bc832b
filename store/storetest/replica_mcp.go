package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// session opens a session owned by ownerA through the first store.
func (r *replicas) session(t *testing.T) airlock.Instance {
	t.Helper()
	in, err := r.store.CreateInstance(r.ctx, airlock.Instance{OwnerID: ownerA, Name: "session", Kind: airlock.InstanceSession}, ownerA)
	if err != nil {
		t.Fatalf("CreateInstance(session): %v", err)
	}
	return in
}

// advisoryIn makes a new request's parameters an advisory MCP request
// linked to session sess.
func advisoryIn(sess airlock.Instance) func(*store.NewRequestParams) {
	return func(p *store.NewRequestParams) {
		q := &p.Request
		q.InstanceID, q.SessionID, q.OwnerID, p.Actor = sess.ID, sess.ID, sess.OwnerID, sess.OwnerID
		q.Kind, q.Tool, q.Arguments, q.Title = airlock.KindAgentRequest, "", nil, "May I?"
		q.Proposal = &airlock.Proposal{Mode: airlock.ProposalAdvisory}
	}
}

// heartbeatsThroughBoth takes a session's instructions with eight
// heartbeaters split over both stores while decisions on both and a
// sweeper make them: each instruction is delivered exactly once, with one
// instruction.delivered event.
func (s *replicaSuite) heartbeatsThroughBoth(t *testing.T) {
	r := s.setup(t)
	sess := r.session(t)
	const decided, swept = 60, 20
	reqs := r.seed(t, decided, advisoryIn(sess))
	short := r.seed(t, swept, advisoryIn(sess), func(p *store.NewRequestParams) { p.Window = time.Millisecond })

	done := make(chan struct{})
	beats := r.heartbeaters(t, sess.ID, done)
	var deciders sync.WaitGroup
	for d := range 2 {
		deciders.Go(func() {
			for i := d; i < decided; i += 2 {
				status := airlock.StateApproved
				if i%3 == 0 {
					status = airlock.StateDenied
				}
				p := store.DecideParams{ID: reqs[i].ID, Status: status, Validity: time.Minute, Note: "n", Actor: reviewer}
				if _, err := r.on(d).Decide(r.ctx, p); err != nil {
					t.Errorf("Decide: %v", err)
				}
			}
		})
	}
	deciders.Go(func() {
		for expired := 0; expired < swept && r.ctx.Err() == nil; {
			rs, err := r.stores[1].ExpireDue(r.ctx, 7)
			if err != nil {
				t.Errorf("ExpireDue: %v", err)
				return
			}
			expired += len(rs)
		}
	})
	deciders.Wait()
	close(done)
	got, ists := beats()
	if t.Failed() {
		t.FailNow()
	}
	if _, last, err := r.store.Heartbeat(r.ctx, sess.ID); err != nil || len(last) != 0 {
		t.Fatalf("a heartbeat after all others = %d instructions, %v; want none", len(last), err)
	}
	for _, req := range append(reqs, short...) {
		if got[req.ID] != 1 {
			t.Fatalf("request %s was delivered %d times, want exactly once", req.ID, got[req.ID])
		}
	}
	delivered := r.countOf(t, airlock.EventInstructionDelivered)
	if n := decided + swept; len(got) != n || len(ists) != n || delivered != n {
		t.Fatalf("%d requests, %d instruction IDs, %d delivered events; want %d each", len(got), len(ists), delivered, n)
	}
}

// heartbeaters starts eight heartbeaters of session id, split over both
// stores, that beat until done is closed and once more. The function it
// returns waits for them and returns how many times each request's
// instruction was delivered, and the instruction IDs delivered.
func (r *replicas) heartbeaters(t *testing.T, id string, done chan struct{}) func() (map[string]int, map[string]bool) {
	t.Helper()
	var (
		mu   sync.Mutex
		got  = map[string]int{}
		ists = map[string]bool{}
		wg   sync.WaitGroup
	)
	for i := range 8 {
		wg.Go(func() {
			for {
				stop := false
				select {
				case <-done:
					stop = true
				default:
				}
				_, list, err := r.on(i).Heartbeat(r.ctx, id)
				if err != nil {
					t.Errorf("Heartbeat: %v", err)
					return
				}
				mu.Lock()
				for _, ist := range list {
					got[ist.RequestID]++
					ists[ist.ID] = true
				}
				mu.Unlock()
				if stop {
					return
				}
			}
		})
	}
	return func() (map[string]int, map[string]bool) {
		wg.Wait()
		return got, ists
	}
}

// heartbeatsRaceClose closes sessions through one store while another
// heartbeats them: every heartbeat that succeeded was stamped before the
// close, and every heartbeat asked after the close returned is not_found.
func (s *replicaSuite) heartbeatsRaceClose(t *testing.T) {
	r := s.setup(t)
	for round := range 12 {
		sess := r.session(t)
		pending := r.create(t, advisoryIn(sess))
		var (
			mu      sync.Mutex
			seen    []time.Time
			beats   atomic.Int64
			closed  atomic.Bool
			wg      sync.WaitGroup
			started = make(chan struct{})
			once    sync.Once
		)
		for i := range 4 {
			wg.Go(func() {
				for {
					after := closed.Load()
					in, _, err := r.on(i).Heartbeat(r.ctx, sess.ID)
					if airlock.ErrorCode(err) == airlock.CodeNotFound {
						return
					}
					if err != nil {
						t.Errorf("Heartbeat: %v", err)
						return
					}
					if after {
						t.Errorf("round %d: a heartbeat asked after the close returned succeeded", round)
					}
					mu.Lock()
					seen = append(seen, *in.LastSeenAt)
					mu.Unlock()
					if beats.Add(1) == 8 {
						once.Do(func() { close(started) })
					}
				}
			})
		}
		if !startedOrDone(started, &wg) {
			t.FailNow()
		}
		cancelled, err := r.stores[1].CloseSession(r.ctx, sess.ID, ownerA)
		closed.Store(true)
		if err != nil || !slices.Equal(cancelled, []string{pending.ID}) {
			t.Fatalf("CloseSession = %v, %v; want %s cancelled", cancelled, err, pending.ID)
		}
		wg.Wait()
		r.wantStampedBeforeClose(t, round, sess.ID, seen)
	}
}

// wantStampedBeforeClose fails t unless session id is closed after every
// heartbeat stamp seen, and last seen at the latest of them.
func (r *replicas) wantStampedBeforeClose(t *testing.T, round int, id string, seen []time.Time) {
	t.Helper()
	got, err := r.store.GetSession(r.ctx, id)
	if err != nil || got.ClosedAt == nil {
		t.Fatalf("GetSession after close = %s, %v", show(got), err)
	}
	for _, at := range seen {
		if !at.Before(*got.ClosedAt) {
			t.Fatalf("round %d: a heartbeat stamped %v, not before the close at %v", round, at, *got.ClosedAt)
		}
	}
	if got.LastSeenAt == nil || !got.LastSeenAt.Equal(slices.MaxFunc(seen, time.Time.Compare)) {
		t.Fatalf("round %d: last seen %v, want the latest heartbeat's stamp", round, got.LastSeenAt)
	}
}

// defaultInstanceOnce makes concurrent first uses of ten agents' default
// MCP instances through both stores: each agent gets one, with one
// instance.created event.
func (s *replicaSuite) defaultInstanceOnce(t *testing.T) {
	r := s.setup(t)
	const owners, callers = 10, 8
	got := make([][]airlock.Instance, owners)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for o := range owners {
		got[o] = make([]airlock.Instance, callers)
		for c := range callers {
			wg.Go(func() {
				<-start
				in, err := r.on(c).MCPInstance(r.ctx, fmt.Sprintf("tok_%d", o), "x")
				if err != nil {
					t.Errorf("MCPInstance: %v", err)
				}
				got[o][c] = in
			})
		}
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	defaults := map[string]bool{}
	for o := range owners {
		for c := range callers {
			if got[o][c].ID != got[o][0].ID || got[o][c].OwnerID != fmt.Sprintf("tok_%d", o) {
				t.Fatalf("owner %d: concurrent first uses got %s and %s, want one instance", o, got[o][0].ID, got[o][c].ID)
			}
		}
		defaults[got[o][0].ID] = true
	}
	created := 0
	for _, e := range AllEvents(t, r.store) {
		if e.Type == airlock.EventInstanceCreated && defaults[e.InstanceID] {
			created++
		}
	}
	if len(defaults) != owners || created != owners {
		t.Fatalf("%d defaults with %d instance.created events, want %d each", len(defaults), created, owners)
	}
}

// defaultInstanceRacesDelete: uses of an agent's default MCP instance
// through both stores, racing deletes of it, always get a live one, and
// the agent never holds two.
func (s *replicaSuite) defaultInstanceRacesDelete(t *testing.T) {
	r := s.setup(t)
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for range 40 {
				in, err := r.on(c).MCPInstance(r.ctx, "tok_del", "x")
				if err != nil || in.OwnerID != "tok_del" || in.Name != "mcp" {
					t.Errorf("MCPInstance = %s, %v", show(in), err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 15 {
			in, err := r.stores[1].MCPInstance(r.ctx, "tok_del", "x")
			if err != nil {
				t.Errorf("MCPInstance: %v", err)
				return
			}
			if _, err := r.store.DeleteInstance(r.ctx, in.ID, "tok_admin"); err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
				t.Errorf("DeleteInstance: %v", err)
			}
		}
	})
	wg.Wait()
	// The agent's only instances are its defaults: all it lists.
	live, err := r.store.ListInstances(r.ctx, "tok_del")
	wantOK(t, err)
	if len(live) > 1 {
		t.Fatalf("%d live default instances of one agent, want at most 1", len(live))
	}
}

// boardOf gives the board columns keys and one item per column, through
// the first store, and returns the items.
func (r *replicas) boardOf(t *testing.T, keys ...string) []airlock.WorkItem {
	t.Helper()
	var items []airlock.WorkItem
	for _, k := range keys {
		if _, err := r.store.CreateColumn(r.ctx, airlock.Column{Key: k, Name: strings.ToUpper(k)}, reviewer); err != nil {
			t.Fatalf("CreateColumn: %v", err)
		}
	}
	for _, k := range keys {
		w, err := r.store.CreateWorkItem(r.ctx, airlock.WorkItem{Title: "item in " + k, ColumnKey: k}, reviewer)
		if err != nil {
			t.Fatalf("CreateWorkItem: %v", err)
		}
		items = append(items, w)
	}
	return items
}

// boardVersionWinner: updates of one item at one if_version through both
// stores have exactly one winner per version.
func (s *replicaSuite) boardVersionWinner(t *testing.T) {
	r := s.setup(t)
	columns := []string{"todo", "done"}
	w := r.boardOf(t, columns...)[0]
	const rounds, writers = 15, 6
	for round := range rounds {
		version := w.Version
		var (
			wg   sync.WaitGroup
			wins atomic.Int64
		)
		for i := range writers {
			title := fmt.Sprintf("round %d writer %d", round, i)
			column := columns[i%2]
			wg.Go(func() {
				got, err := r.on(i).UpdateWorkItem(r.ctx,
					airlock.WorkItemPatch{ID: w.ID, Title: &title, ColumnKey: &column, IfVersion: version}, reviewer)
				switch e, _ := errors.AsType[*airlock.Error](err); {
				case err == nil:
					wins.Add(1)
					if got.Version != version+1 || got.Title != title {
						t.Errorf("winner got %s, want version %d titled %q", show(got), version+1, title)
					}
				case e == nil || e.Code != airlock.CodeInvalidRequest || e.Field != "if_version":
					t.Errorf("loser: %v, want invalid if_version", err)
				}
			})
		}
		wg.Wait()
		cur, err := r.store.GetWorkItem(r.ctx, w.ID)
		wantOK(t, err)
		if wins.Load() != 1 || cur.Version != version+1 {
			t.Fatalf("round %d: %d winners, item at version %d; want 1 and %d", round, wins.Load(), cur.Version, version+1)
		}
		w = cur
	}
}

// boardNoLostUpdates: updates without if_version through both stores all
// apply, each at its own version.
func (s *replicaSuite) boardNoLostUpdates(t *testing.T) {
	r := s.setup(t)
	w := r.boardOf(t, "todo", "done")[1]
	const writers, each = 6, 10
	var (
		mu       sync.Mutex
		versions = map[int]int{}
		wg       sync.WaitGroup
	)
	for i := range writers {
		wg.Go(func() {
			for j := range each {
				title := fmt.Sprintf("w%d-%d", i, j)
				got, err := r.on(i).UpdateWorkItem(r.ctx, airlock.WorkItemPatch{ID: w.ID, Title: &title}, reviewer)
				if err != nil {
					t.Errorf("UpdateWorkItem: %v", err)
					return
				}
				mu.Lock()
				versions[got.Version]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cur, err := r.stores[1].GetWorkItem(r.ctx, w.ID)
	wantOK(t, err)
	if cur.Version != w.Version+writers*each || len(versions) != writers*each {
		t.Fatalf("item at version %d with %d distinct versions returned, want %d and %d",
			cur.Version, len(versions), w.Version+writers*each, writers*each)
	}
}

// boardConcurrentColumns: columns created at once through both stores get
// distinct positions, in order.
func (s *replicaSuite) boardConcurrentColumns(t *testing.T) {
	r := s.setup(t)
	columns := []string{"todo", "done"}
	r.boardOf(t, columns...)
	const n = 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := r.on(i).CreateColumn(r.ctx, airlock.Column{Key: fmt.Sprintf("c%02d", i), Name: "C"}, reviewer); err != nil {
				t.Errorf("CreateColumn: %v", err)
			}
		})
	}
	wg.Wait()
	cols, err := r.store.Board(r.ctx)
	wantOK(t, err)
	for i, c := range cols {
		if c.Position != i+1 {
			t.Fatalf("column %s at position %d, want %d: positions must be distinct and in order", c.Key, c.Position, i+1)
		}
	}
	if len(cols) != len(columns)+n {
		t.Fatalf("%d columns, want %d", len(cols), len(columns)+n)
	}
}

// moveProposal makes a new request's parameters a work_move proposal of
// item to column, observed where the item is now, as the provider makes it.
func moveProposal(t *testing.T, item airlock.WorkItem, to string) func(*store.NewRequestParams) {
	t.Helper()
	input := json.RawMessage(`{"itemId":"` + item.ID + `","columnKey":"` + to + `"}`)
	observed, err := json.Marshal(airlock.WorkMoveObserved{FromColumnKey: item.ColumnKey, ItemTitle: item.Title})
	wantOK(t, err)
	return func(p *store.NewRequestParams) {
		q := &p.Request
		q.Kind, q.Tool, q.Arguments, q.Title = airlock.KindWorkChange, airlock.MethodWorkMove, input, "Move "+item.Title+" to "+to
		q.Proposal = &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{
			Method: airlock.MethodWorkMove, Input: input, Observed: observed}}
	}
}

// itemChange is what made one version of a work item: the column it put
// the item in and, for an approved work_move, the request and the column
// it moved the item from.
type itemChange struct{ from, to, request string }

// itemHistory records every change of every item, by version, from
// concurrent writers.
type itemHistory struct {
	mu               sync.Mutex
	changes          map[string]map[int]itemChange // item → version → the change that made it
	approved, failed int
}

func (h *itemHistory) record(t *testing.T, item string, version int, c itemChange) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.changes[item][version]; dup {
		t.Errorf("item %s reached version %d twice", item, version)
	}
	h.changes[item][version] = c
}

// workMovesRaceMoves approves work_move proposals through both stores
// while reviewers move the same items directly through both. Reading
// every change of every item back in version order, each approved move
// took the item from the column it was observed in, to the column it
// named, and nothing else changed an item.
func (s *replicaSuite) workMovesRaceMoves(t *testing.T) {
	r := s.setup(t)
	wantOK(t, r.store.CreateToken(r.ctx, airlock.Token{ID: ownerA, Name: "agent", Role: airlock.RoleAgent,
		Scopes: []string{airlock.ScopeWorkWrite}, Hash: airlock.HashSecret("secret of " + ownerA), CreatedBy: "tok_admin"}))
	cols := []string{"a", "b", "c"}
	items := r.boardOf(t, cols...)
	h := &itemHistory{changes: map[string]map[int]itemChange{}}
	for _, w := range items {
		h.changes[w.ID] = map[int]itemChange{1: {to: w.ColumnKey}}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for range 12 {
		r.moveRound(t, h, rng, items, cols)
		if t.Failed() {
			t.FailNow()
		}
	}
	for _, w := range items {
		cur, err := r.stores[1].GetWorkItem(r.ctx, w.ID)
		wantOK(t, err)
		wantHistory(t, cur, h.changes[w.ID])
	}
	moved := r.countOf(t, airlock.EventWorkItemMoved)
	if h.approved == 0 || h.failed == 0 || moved != h.approved {
		t.Fatalf("%d approved, %d command_failed, %d work_item.moved events; want some of each and one event per approval", h.approved, h.failed, moved)
	}
	t.Logf("%d moves approved, %d refused command_failed", h.approved, h.failed)
}

// moveRound proposes three moves of every item as it is now, then
// approves them all at once through both stores while two reviewers move
// random items directly, recording every change in h.
func (r *replicas) moveRound(t *testing.T, h *itemHistory, rng *rand.Rand, items []airlock.WorkItem, cols []string) {
	t.Helper()
	var reqs []airlock.Request
	for _, w := range items {
		cur, err := r.store.GetWorkItem(r.ctx, w.ID)
		wantOK(t, err)
		for j := range 3 {
			reqs = append(reqs, r.create(t, moveProposal(t, cur, cols[(slices.Index(cols, cur.ColumnKey)+1+j%2)%len(cols)])))
		}
	}
	rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { r.approveMove(t, h, r.on(i), req) })
	}
	for m := range 2 {
		w, to := items[rng.IntN(len(items))], cols[rng.IntN(len(cols))]
		wg.Go(func() {
			got, err := r.on(m+1).UpdateWorkItem(r.ctx, airlock.WorkItemPatch{ID: w.ID, ColumnKey: &to}, reviewer)
			if err != nil {
				t.Errorf("reviewer move: %v", err)
				return
			}
			h.record(t, got.ID, got.Version, itemChange{to: to})
		})
	}
	wg.Wait()
}

// approveMove approves work_move request req through st, and records the
// move it made, if any, in h.
func (r *replicas) approveMove(t *testing.T, h *itemHistory, st store.Store, req airlock.Request) {
	t.Helper()
	got, err := approveOn(r, st, req.ID)
	h.mu.Lock()
	switch {
	case err == nil:
		h.approved++
	case airlock.ErrorCode(err) == airlock.CodeCommandFailed:
		h.failed++
	default:
		t.Errorf("approve: %v, want success or command_failed", err)
	}
	h.mu.Unlock()
	if err != nil {
		return
	}
	var id, from, to string
	var version int
	if _, err := fmt.Sscanf(got.CommandResult.Detail, "moved work item %s from %s to %s (now version %d)", &id, &from, &to, &version); err != nil {
		t.Errorf("command detail %q: %v", got.CommandResult.Detail, err)
		return
	}
	var obs airlock.WorkMoveObserved
	if err := json.Unmarshal(req.Proposal.Command.Observed, &obs); err != nil {
		t.Errorf("observed %s: %v", req.Proposal.Command.Observed, err)
	}
	if from != obs.FromColumnKey {
		t.Errorf("request %s observed %s but moved from %s", req.ID, obs.FromColumnKey, from)
	}
	h.record(t, id, version, itemChange{from: from, to: to, request: req.ID})
}

// wantHistory fails t unless every version of item cur was made by a
// recorded change, each approved move took the item from where the change
// before it had put it, and the last put it where it is.
func wantHistory(t *testing.T, cur airlock.WorkItem, h map[int]itemChange) {
	t.Helper()
	if len(h) != cur.Version {
		t.Fatalf("item %s is at version %d with %d recorded changes", cur.ID, cur.Version, len(h))
	}
	for v := 2; v <= cur.Version; v++ {
		c, ok := h[v]
		if !ok {
			t.Fatalf("item %s: no recorded change made version %d", cur.ID, v)
		}
		if c.request != "" && c.from != h[v-1].to {
			t.Fatalf("item %s: request %s moved it from %s at version %d, but it was in %s", cur.ID, c.request, c.from, v, h[v-1].to)
		}
	}
	if cur.ColumnKey != h[cur.Version].to {
		t.Fatalf("item %s is in %s, its last change put it in %s", cur.ID, cur.ColumnKey, h[cur.Version].to)
	}
}
