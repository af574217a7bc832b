package storetest

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Replicas is what RunReplicas needs of a driver: two stores sharing one
// database, and the size of the largest races.
type Replicas struct {
	// Open opens two stores on one fresh, empty database, as two replicas
	// of the service (or two processes on one SQLite file) share it: each
	// with its own connections, both judging time by the driver's own
	// clock. RunReplicas closes them.
	Open func(t *testing.T) (a, b store.Store)
	// OpenN, when set, opens n stores on one fresh, empty database, as
	// Open opens two, for the races of more replicas (T34's consumes, on
	// three); RunReplicas closes them. Nil: those races run on Open's two.
	OpenN func(t *testing.T, n int) []store.Store
	// Requests is how many requests the largest races make (the sweeps,
	// T06's claims, T13's approvals): 1,000, as docs/reliability.md has
	// them, when zero. A driver whose two stores take turns on one lock
	// (SQLite's processes on one file) may race fewer in its time.
	Requests int
}

// RunReplicas runs the conformance suite of two stores sharing one
// database: whatever the two race, each request still ends exactly once,
// each approval runs once, each instruction is delivered once and no
// change is lost. It is separate from Run because its stores share a
// database and keep the driver's own clock.
func RunReplicas(t *testing.T, replicas Replicas) {
	s := &replicaSuite{Replicas: replicas}
	if s.Requests == 0 {
		s.Requests = 1000
	}
	runAll(t, []test{
		{"writes through both at once all succeed", s.writesThroughBoth},
		{"sweeps through both expire each request once", s.sweepsThroughBoth},
		{"T06 claims through both: each approval runs once", s.claimsThroughBoth},
		{"T13 an instance deleted while reviewers approve through both", s.deleteWhileApproving},
		{"a reader following the audit log misses no event of either", s.eventsResume},
		{"creates racing a delete leave nothing pending", s.createsRaceDelete},
		{"heartbeats through both deliver each instruction once", s.heartbeatsThroughBoth},
		{"a heartbeat racing a close is stamped before it or refused", s.heartbeatsRaceClose},
		{"one default instance per agent, first used through both", s.defaultInstanceOnce},
		{"uses racing deletes of the default get a live one", s.defaultInstanceRacesDelete},
		{"board: one winner per if_version", s.boardVersionWinner},
		{"board: updates without if_version are never lost", s.boardNoLostUpdates},
		{"board: concurrent columns get distinct positions", s.boardConcurrentColumns},
		{"work_move approvals racing moves take the item from where it was observed", s.workMovesRaceMoves},
		{"replicas starting at once sign with one key", s.signingKeyOnce},
		{"replicas starting at once push with one VAPID key", s.vapidKeyOnce},
		{"T34 16 consumes of one approval token through three: exactly one wins", s.consumesThroughThree},
		{"T35 sequencers on every replica put each event in the tree once", s.auditSequencers},
		{"T36 a task made through one is read through the other with its request's outcome", s.tasksAcrossReplicas},
	})
}

type replicaSuite struct {
	Replicas
}

// replicas is what every test across two stores starts from: a bundle on
// the first store, with an instance of ownerA's, and both stores. Its
// clock is nil: the stores keep their own.
type replicas struct {
	*bundle
	stores [2]store.Store
}

// on returns the store a worker numbered i uses: the two in turn.
func (r *replicas) on(i int) store.Store { return r.stores[i%2] }

// setup opens two stores on one fresh database and creates ownerA's
// instance through the first.
func (s *replicaSuite) setup(t *testing.T) *replicas {
	t.Helper()
	a, b := s.Open(t)
	for _, st := range []store.Store{a, b} {
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	r := &replicas{bundle: &bundle{ctx: t.Context(), store: a}, stores: [2]store.Store{a, b}}
	r.inst = r.instance(t, ownerA)
	return r
}

// onInstance makes a new request's parameters name instance in.
func onInstance(in airlock.Instance) func(*store.NewRequestParams) {
	return func(p *store.NewRequestParams) {
		p.Request.InstanceID, p.Request.OwnerID, p.Actor = in.ID, in.OwnerID, in.OwnerID
	}
}

// seed creates n requests through the first store, eight at a time,
// changed by mods, and returns them in creation order.
func (r *replicas) seed(t *testing.T, n int, mods ...func(*store.NewRequestParams)) []airlock.Request {
	t.Helper()
	out := make([]airlock.Request, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				got, created, err := r.store.CreateRequest(r.ctx, r.params(mods...))
				if err != nil || !created {
					t.Errorf("CreateRequest = created %v, %v", created, err)
					return
				}
				out[i] = got
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	slices.SortFunc(out, func(a, b airlock.Request) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// countOf counts the events of type typ in the audit log.
func (r *replicas) countOf(t *testing.T, typ airlock.EventType) int {
	t.Helper()
	return len(ofType(AllEvents(t, r.store), typ))
}

// approveOn approves request id through st.
func approveOn(r *replicas, st store.Store, id string) (airlock.Request, error) {
	return st.Decide(r.ctx, store.DecideParams{ID: id, Status: airlock.StateApproved, Validity: time.Minute, Actor: reviewer})
}

// shuffled returns a copy of rs in random order.
func shuffled(rs []airlock.Request) []airlock.Request {
	out := slices.Clone(rs)
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// writesThroughBoth: writes through two stores contend for one database,
// as two processes on one SQLite file or two replicas do, and none is
// refused for it (busy_timeout with BEGIN IMMEDIATE absorbs SQLite's
// lock).
func (s *replicaSuite) writesThroughBoth(t *testing.T) {
	r := s.setup(t)
	const perWorker = 10
	var wg sync.WaitGroup
	for w := range 8 {
		st := r.on(w)
		wg.Go(func() {
			for range perWorker {
				req, _, err := st.CreateRequest(r.ctx, r.params())
				if err != nil {
					t.Errorf("CreateRequest: %v", err)
					return
				}
				if _, err := approveOn(r, st, req.ID); err != nil {
					t.Errorf("Decide: %v", err)
					return
				}
				if _, err := r.stores[0].GetRequest(r.ctx, req.ID); err != nil {
					t.Errorf("GetRequest: %v", err)
				}
			}
		})
	}
	wg.Wait()
	rs, _, err := r.stores[1].ListRequests(r.ctx, store.RequestFilter{State: airlock.StateApproved, Limit: 500})
	wantOK(t, err)
	if len(rs) != 8*perWorker {
		t.Fatalf("%d approved requests, want %d", len(rs), 8*perWorker)
	}
}

// sweepsThroughBoth has four sweepers, two on each store, expire 1,000
// due requests (s.Requests) at once: each request expires exactly once,
// with exactly one event.
func (s *replicaSuite) sweepsThroughBoth(t *testing.T) {
	r := s.setup(t)
	n := s.Requests
	rs := r.seed(t, n, func(p *store.NewRequestParams) { p.Window = time.Microsecond }) // due at once
	expired := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for {
				got, err := r.on(w).ExpireDue(r.ctx, 50)
				if err != nil {
					t.Errorf("ExpireDue: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, e := range got {
					expired[e.ID]++
					if e.State != airlock.StateExpired {
						t.Errorf("ExpireDue returned %s in state %s", e.ID, e.State)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(expired) != n {
		t.Fatalf("%d distinct requests expired, want %d", len(expired), n)
	}
	for _, req := range rs {
		if expired[req.ID] != 1 {
			t.Fatalf("%s expired %d times, want once", req.ID, expired[req.ID])
		}
	}
	if events := r.countOf(t, airlock.EventRequestExpired); events != n {
		t.Fatalf("%d request.expired events, want %d", events, n)
	}
}

// claimsThroughBoth is T06 across two stores: 1,000 approved requests
// (s.Requests), 8 claimers split over the stores, each claiming every
// request: exactly 1,000 claims succeed and 7,000 are refused
// already_executed.
func (s *replicaSuite) claimsThroughBoth(t *testing.T) {
	r := s.setup(t)
	const claimers = 8
	n := s.Requests
	rs := r.seed(t, n, func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Validity: time.Hour}
	})
	var (
		mu      sync.Mutex
		ran     = map[string]int{}
		refused int
		wg      sync.WaitGroup
	)
	for c := range claimers {
		st, order := r.on(c), shuffled(rs)
		wg.Go(func() {
			for _, req := range order {
				_, err := st.ClaimExecution(r.ctx, req.ID, ownerA, nil)
				mu.Lock()
				switch e, _ := errors.AsType[*airlock.Error](err); {
				case err == nil:
					ran[req.ID]++ // the tool runs
				case e != nil && e.Code == airlock.CodeAlreadyExecuted && e.State == airlock.StateApproved:
					refused++
				default:
					t.Errorf("claim %s: %v, want success or already_executed", req.ID, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	runs := 0
	for _, req := range rs {
		if ran[req.ID] != 1 {
			t.Fatalf("%s ran %d times, want once", req.ID, ran[req.ID])
		}
		runs++
	}
	if runs != n || refused != n*(claimers-1) {
		t.Fatalf("%d runs and %d refusals, want %d and %d", runs, refused, n, n*(claimers-1))
	}
}

// eventsResume writes through both stores at once while a reader follows
// the audit log the way an event stream does (after the last ID it saw):
// it must see every event. Where event IDs are drawn before commit, a
// later-committing smaller ID must not be skipped.
func (s *replicaSuite) eventsResume(t *testing.T) {
	r := s.setup(t)
	seen := map[int64]bool{}
	stop, readerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readerDone)
		var after int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			page, err := r.stores[1].ListEvents(r.ctx, after, 1000)
			if err != nil {
				t.Errorf("ListEvents: %v", err)
				return
			}
			for _, e := range page {
				seen[e.ID] = true
				after = e.ID
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 8 {
		st := r.on(w)
		wg.Go(func() {
			for range 40 {
				req, _, err := st.CreateRequest(r.ctx, r.params())
				if err != nil {
					t.Errorf("CreateRequest: %v", err)
					return
				}
				if _, err := st.Decide(r.ctx, store.DecideParams{ID: req.ID, Status: airlock.StateDenied, Actor: reviewer}); err != nil {
					t.Errorf("Decide: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-readerDone
	// The reader's last pass may have ended before the last commits; what
	// matters is that it never skipped past an event it had not seen.
	all := AllEvents(t, r.store)
	var last int64
	for id := range seen {
		last = max(last, id)
	}
	for _, e := range all {
		if e.ID <= last && !seen[e.ID] {
			t.Fatalf("the reader went past event %d (to %d) without seeing it", e.ID, last)
		}
	}
	if len(all) != 1+8*40*2 {
		t.Fatalf("%d events, want %d", len(all), 1+8*40*2)
	}
}

// createsRaceDelete creates requests on an instance through both stores
// while one deletes it: a create either lands before the delete (and is
// cancelled by it) or finds no instance. No pending request is ever left
// on a deleted instance.
func (s *replicaSuite) createsRaceDelete(t *testing.T) {
	r := s.setup(t)
	for round := range 30 {
		in := r.instance(t, ownerA)
		start := make(chan struct{})
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			created   []string
			cancelled []string
		)
		for w := range 6 {
			wg.Go(func() {
				<-start
				for range 5 {
					req, _, err := r.on(w).CreateRequest(r.ctx, r.params(onInstance(in)))
					switch {
					case err == nil:
						mu.Lock()
						created = append(created, req.ID)
						mu.Unlock()
					case airlock.ErrorCode(err) != airlock.CodeNotFound:
						t.Errorf("CreateRequest: %v, want success or not_found", err)
					}
				}
			})
		}
		wg.Go(func() {
			<-start
			var err error
			if cancelled, err = r.stores[1].DeleteInstance(r.ctx, in.ID, "tok_admin"); err != nil {
				t.Errorf("DeleteInstance: %v", err)
			}
		})
		close(start)
		wg.Wait()
		pending, _, err := r.store.ListRequests(r.ctx, store.RequestFilter{InstanceID: in.ID, State: airlock.StatePending})
		wantOK(t, err)
		if len(pending) != 0 {
			t.Fatalf("round %d: %d requests left pending on the deleted instance", round, len(pending))
		}
		if !slices.Equal(slices.Sorted(slices.Values(cancelled)), slices.Sorted(slices.Values(created))) {
			t.Fatalf("round %d: the delete cancelled %d requests, %d were created", round, len(cancelled), len(created))
		}
	}
}

// approval is what one reviewer's approval of a request returned, and
// whether it was asked after the instance's deletion had returned.
type approval struct {
	err         error
	afterDelete bool
}

// deleteWhileApproving is T13 across two stores: an instance holding
// 1,000 pending requests (s.Requests) is deleted, once a tenth are
// approved, while four reviewers approve them through both. Each ends
// approved (before the delete) or cancelled, none pending; no approval
// lands after the delete, by the clock or by the call order; each has
// exactly one terminal event.
func (s *replicaSuite) deleteWhileApproving(t *testing.T) {
	r := s.setup(t)
	n := s.Requests
	rs := r.seed(t, n)
	var (
		mu        sync.Mutex
		results   = map[string]approval{}
		approvals atomic.Int64
		deleted   atomic.Bool
		started   = make(chan struct{})
		wg        sync.WaitGroup
	)
	order := shuffled(rs)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				after := deleted.Load()
				_, err := approveOn(r, r.on(w), order[i].ID)
				if err == nil && approvals.Add(1) == int64(n/10) {
					close(started)
				}
				mu.Lock()
				results[order[i].ID] = approval{err: err, afterDelete: after}
				mu.Unlock()
			}
		})
	}
	if !startedOrDone(started, &wg) {
		t.Fatalf("the reviewers made fewer than %d approvals in all", n/10)
	}
	cancelled, err := r.stores[1].DeleteInstance(r.ctx, r.inst.ID, "tok_admin")
	deleted.Store(true)
	wantOK(t, err)
	wg.Wait()
	r.checkDeleteWhileApproving(t, rs, results, cancelled)
}

// checkDeleteWhileApproving checks the end of deleteWhileApproving: rs
// are the requests, results what their approvals returned, and cancelled
// what the delete cancelled.
func (r *replicas) checkDeleteWhileApproving(t *testing.T, rs []airlock.Request, results map[string]approval, cancelled []string) {
	t.Helper()
	var deleteAt time.Time
	approved := 0
	for _, req := range rs {
		got := r.get(t, req.ID)
		res := results[req.ID]
		switch got.State {
		case airlock.StateApproved:
			approved++
			if res.err != nil || slices.Contains(cancelled, req.ID) {
				t.Fatalf("%s is approved, but its approval returned %v (cancelled by the delete: %v)", req.ID, res.err, slices.Contains(cancelled, req.ID))
			}
		case airlock.StateCancelled:
			if e, _ := errors.AsType[*airlock.Error](res.err); !slices.Contains(cancelled, req.ID) || e == nil ||
				e.Code != airlock.CodeNotPending || e.State != airlock.StateCancelled {
				t.Fatalf("%s is cancelled (listed by the delete: %v), its approval returned %v; want listed and not_pending (cancelled)",
					req.ID, slices.Contains(cancelled, req.ID), res.err)
			}
			deleteAt = got.Decision.DecidedAt
		default:
			t.Fatalf("%s ended %s, want approved or cancelled", req.ID, got.State)
		}
		if res.afterDelete && res.err == nil {
			t.Fatalf("%s was approved by a call made after DeleteInstance returned", req.ID)
		}
	}
	if approved+len(cancelled) != len(rs) || len(cancelled) == 0 {
		t.Fatalf("%d approved + %d cancelled, want %d with some of each", approved, len(cancelled), len(rs))
	}
	for _, req := range rs {
		if got := r.get(t, req.ID); got.State == airlock.StateApproved && !got.Decision.DecidedAt.Before(deleteAt) {
			t.Fatalf("%s approved at %v, not before the delete at %v", req.ID, got.Decision.DecidedAt, deleteAt)
		}
	}
	terminal := map[string]int{}
	for _, e := range AllEvents(t, r.store) {
		if e.Type == airlock.EventRequestApproved || e.Type == airlock.EventRequestCancelled {
			terminal[e.RequestID]++
		}
	}
	for _, req := range rs {
		if terminal[req.ID] != 1 {
			t.Fatalf("%s has %d terminal events, want 1", req.ID, terminal[req.ID])
		}
	}
	t.Logf("%d approved before the delete, %d cancelled by it", approved, len(cancelled))
}

// startedOrDone waits until started is closed, or until every goroutine
// of wg has returned without closing it (they failed the test): it reports
// whether started was closed, so a failing worker cannot hang the test.
func startedOrDone(started chan struct{}, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-started:
		return true
	case <-done:
		select {
		case <-started:
			return true
		default:
			return false
		}
	}
}

// three opens three stores on one database (OpenN), or Open's two when
// the suite has no OpenN, each closed when the test ends.
func (s *replicaSuite) three(t *testing.T) []store.Store {
	if s.OpenN == nil {
		r := s.setup(t)
		return r.stores[:]
	}
	stores := s.OpenN(t, 3)
	for _, st := range stores {
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	return stores
}

// consumesThroughThree is T34's race across replicas: 16 consumes of one
// claimed request's approval token, spread over three stores on one
// database (OpenN; Open's two without it), and exactly one wins.
func (s *replicaSuite) consumesThroughThree(t *testing.T) {
	stores := s.three(t)
	b := &bundle{ctx: t.Context(), store: stores[0]}
	b.inst = b.instance(t, ownerA)
	req, created, err := b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Validity: time.Hour}
	}))
	if err != nil || !created {
		t.Fatalf("CreateRequest = created %v, %v", created, err)
	}
	if _, err := b.claim(req.ID); err != nil {
		t.Fatalf("claim: %v", err)
	}
	wins, used := consumeRace(t, req.ID, stores)
	t.Logf("T34: %d consumes of %s through %d stores: %d won, %d already_used", consumers, req.ID, len(stores), wins, used)
	if wins != 1 || used != consumers-1 {
		t.Fatalf("%d consumes won and %d were already_used; want 1 and %d", wins, used, consumers-1)
	}
	if n := len(ofType(AllEvents(t, stores[1]), airlock.EventExecutionTokenConsumed)); n != 1 {
		t.Fatalf("%d execution.token_consumed events, want 1", n)
	}
}

// auditSequencers races sequencers on three stores (OpenN; Open's two
// without it) while events are appended through all of them.
func (s *replicaSuite) auditSequencers(t *testing.T) {
	stores := s.three(t)
	auditSequencersRace(t, stores, s.Requests/2)
}
