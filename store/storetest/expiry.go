package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testExpiry checks the scheduler's two calls: NextDeadline says when to
// wake, ExpireDue expires what is due (docs/protocol.md L4).
func (s *suite) testExpiry(t *testing.T) {
	runAll(t, []test{
		{"nothing pending", s.expireNothing},
		{"expires what is due, earliest first", s.expireEarliestFirst},
		{"within a second, in creation order", s.expireCreationOrder},
		{"limit", s.expireLimit},
		{"no limit takes the default batch", s.expireDefaultBatch},
		{"a crowded second's start", s.nextDeadlineCrowded},
		{"a refused decision expires an overdue request", s.refusedDecisionExpires},
		{"ExpireRequests expires the due among them, once", s.expireRequests},
	})
}

func (s *suite) expireNothing(t *testing.T) {
	b := s.setup(t)
	if _, ok, err := b.store.NextDeadline(b.ctx); err != nil || ok {
		t.Fatalf("NextDeadline on an empty store = ok %v, %v; want none", ok, err)
	}
	b.into(t, airlock.StateApproved)
	if _, ok, err := b.store.NextDeadline(b.ctx); err != nil || ok {
		t.Fatalf("NextDeadline with nothing pending = ok %v, %v; want none", ok, err)
	}
	rs, err := b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	if len(rs) != 0 {
		t.Fatalf("ExpireDue = %v, want nothing", ids(rs))
	}
}

func (s *suite) expireEarliestFirst(t *testing.T) {
	b := s.setup(t)
	withWindow := func(d time.Duration) func(*store.NewRequestParams) {
		return func(p *store.NewRequestParams) { p.Window = d }
	}
	r3 := b.create(t, withWindow(3*time.Minute))
	r1 := b.create(t, withWindow(1*time.Minute))
	r2 := b.create(t, withWindow(2*time.Minute))
	decided := b.create(t, withWindow(30*time.Second))
	_, err := b.deny(decided.ID)
	wantOK(t, err)

	next, ok, err := b.store.NextDeadline(b.ctx)
	wantOK(t, err)
	if !ok || !next.Equal(r1.DeadlineAt) {
		t.Fatalf("NextDeadline = %v (ok %v), want %v", next, ok, r1.DeadlineAt)
	}

	b.clock.Set(r2.DeadlineAt) // r1 is past its deadline, r2 exactly at it
	rs, err := b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	if got, want := ids(rs), []string{r1.ID, r2.ID}; !slices.Equal(got, want) {
		t.Fatalf("ExpireDue = %v, want %v", got, want)
	}
	for _, r := range rs {
		if d := r.Decision; r.State != airlock.StateExpired || d == nil || d.Status != airlock.StateExpired ||
			d.DecidedBy != airlock.ActorExpiry || d.ExpiresAt != nil {
			t.Fatalf("expired request = %s, want expired by %s", show(r), airlock.ActorExpiry)
		}
		sameRequest(t, "read after expiry", expiredFields(b.get(t, r.ID)), r)
	}
	if r := b.get(t, r3.ID); r.State != airlock.StatePending {
		t.Fatalf("request before its deadline = %s, want pending", r.State)
	}
	if r := b.get(t, decided.ID); r.State != airlock.StateDenied {
		t.Fatalf("decided request = %s, want denied", r.State)
	}

	next, ok, err = b.store.NextDeadline(b.ctx)
	wantOK(t, err)
	if !ok || !next.Equal(r3.DeadlineAt) {
		t.Fatalf("NextDeadline = %v (ok %v), want %v", next, ok, r3.DeadlineAt)
	}
	rs, err = b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	if len(rs) != 0 {
		t.Fatalf("second ExpireDue = %v, want nothing", ids(rs))
	}

	var expiredEvents []string
	for _, e := range b.events(t) {
		if e.Type == airlock.EventRequestExpired {
			if e.Actor != airlock.ActorExpiry || e.State != airlock.StateExpired {
				t.Fatalf("expiry event = %+v", e)
			}
			expiredEvents = append(expiredEvents, e.RequestID)
		}
	}
	if !slices.Equal(expiredEvents, []string{r1.ID, r2.ID}) {
		t.Fatalf("expiry events for %v, want %v", expiredEvents, []string{r1.ID, r2.ID})
	}
}

// Within one second of deadlines a sweep takes requests in creation
// order, which is the order of the table, so that the rows it
// rewrites are neighbours (SQLite migration 0005, PostgreSQL 0003); a
// sweep taking exact deadlines in order rewrote about one page per
// row. NextDeadline is still the exact earliest deadline.
func (s *suite) expireCreationOrder(t *testing.T) {
	b := s.setup(t)
	second := b.clock.Now().Truncate(time.Second).Add(time.Second)
	dueAt := func(at time.Time) func(*store.NewRequestParams) {
		return func(p *store.NewRequestParams) { p.Window = at.Sub(b.clock.Now()) }
	}
	late := b.create(t, dueAt(second.Add(900*time.Millisecond)))
	early := b.create(t, dueAt(second.Add(100*time.Millisecond))) // the same second
	next := b.create(t, dueAt(second.Add(1500*time.Millisecond)))

	at, ok, err := b.store.NextDeadline(b.ctx)
	wantOK(t, err)
	if !ok || !at.Equal(early.DeadlineAt) {
		t.Fatalf("NextDeadline = %v (ok %v), want %v", at, ok, early.DeadlineAt)
	}
	b.clock.Set(second.Add(2 * time.Second))
	first, err := b.store.ExpireDue(b.ctx, 1)
	wantOK(t, err)
	rest, err := b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	got := append(ids(first), ids(rest)...)
	if want := []string{late.ID, early.ID, next.ID}; !slices.Equal(got, want) {
		t.Fatalf("sweeps took %v, want %v (the first second's in creation order, then the next second's)", got, want)
	}
	var logged []string
	for _, e := range b.events(t) {
		if e.Type == airlock.EventRequestExpired {
			logged = append(logged, e.RequestID)
		}
	}
	if !slices.Equal(logged, got) {
		t.Fatalf("expiry events for %v, want the sweeps' order %v", logged, got)
	}
}

func (s *suite) expireLimit(t *testing.T) {
	b := s.setup(t)
	var want []string
	for i := range 5 {
		r := b.create(t, func(p *store.NewRequestParams) { p.Window = time.Duration(5-i) * time.Minute })
		want = slices.Insert(want, 0, r.ID) // earliest deadline first
	}
	b.clock.Advance(time.Hour)
	first, err := b.store.ExpireDue(b.ctx, 2)
	wantOK(t, err)
	rest, err := b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	if !slices.Equal(ids(first), want[:2]) || !slices.Equal(ids(rest), want[2:]) {
		t.Fatalf("ExpireDue(2) = %v then %v, want %v then %v", ids(first), ids(rest), want[:2], want[2:])
	}
}

func (s *suite) expireDefaultBatch(t *testing.T) {
	b := s.setup(t)
	for range store.DefaultExpireBatch + 1 {
		b.create(t)
	}
	b.clock.Advance(window)
	for _, c := range []struct{ limit, want int }{{0, store.DefaultExpireBatch}, {-1, 1}} {
		rs, err := b.store.ExpireDue(b.ctx, c.limit)
		wantOK(t, err)
		if len(rs) != c.want {
			t.Fatalf("ExpireDue(%d) expired %d of the rest, want %d", c.limit, len(rs), c.want)
		}
	}
}

func (s *suite) refusedDecisionExpires(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	b.clock.Set(r.DeadlineAt.Add(time.Hour))
	_, err := b.approve(r.ID)
	wantErr(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)
	// Expired by the refused call, so the scheduler finds nothing.
	rs, err := b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	if len(rs) != 0 {
		t.Fatalf("ExpireDue = %v, want nothing", ids(rs))
	}
	if _, ok, _ := b.store.NextDeadline(b.ctx); ok {
		t.Fatal("NextDeadline still reports the expired request")
	}
}

func (s *suite) expireRequests(t *testing.T) {
	b := s.setup(t)
	window := func(d time.Duration) func(*store.NewRequestParams) {
		return func(p *store.NewRequestParams) { p.Window = d }
	}
	r1 := b.create(t, window(time.Minute))
	r2 := b.create(t, window(time.Minute))
	other := b.create(t, window(time.Minute)) // due, not asked for
	later := b.create(t, window(time.Hour))   // asked for, not due
	decided := b.create(t, window(time.Minute))
	_, err := b.deny(decided.ID)
	wantOK(t, err)
	asked := []string{r2.ID, r1.ID, later.ID, decided.ID, "apr_missing", r1.ID} // r1 twice: two readers of it

	// Before the deadline: nothing.
	rs, err := b.store.ExpireRequests(b.ctx, asked)
	wantOK(t, err)
	if len(rs) != 0 {
		t.Fatalf("ExpireRequests before the deadline = %v, want nothing", ids(rs))
	}

	b.clock.Set(r2.DeadlineAt)
	rs, err = b.store.ExpireRequests(b.ctx, asked)
	wantOK(t, err)
	if got, want := ids(rs), []string{r1.ID, r2.ID}; !slices.Equal(got, want) {
		t.Fatalf("ExpireRequests = %v, want %v (due among those asked, earliest first)", got, want)
	}
	for _, r := range rs {
		if d := r.Decision; r.State != airlock.StateExpired || d == nil || d.DecidedBy != airlock.ActorExpiry ||
			!d.DecidedAt.Equal(r.DeadlineAt) {
			t.Fatalf("expired request = %s, want expired by %s at its deadline", show(r), airlock.ActorExpiry)
		}
		sameRequest(t, "read after ExpireRequests", expiredFields(b.get(t, r.ID)), r)
	}
	for _, r := range []airlock.Request{other, later} {
		if got := b.get(t, r.ID); got.State != airlock.StatePending {
			t.Fatalf("%s = %s, want pending: not asked for, or not due", r.ID, got.State)
		}
	}
	if got := b.get(t, decided.ID); got.State != airlock.StateDenied {
		t.Fatalf("decided request = %s, want denied", got.State)
	}

	// Again: nothing more, and one event each.
	rs, err = b.store.ExpireRequests(b.ctx, asked)
	wantOK(t, err)
	if len(rs) != 0 {
		t.Fatalf("second ExpireRequests = %v, want nothing", ids(rs))
	}
	events := map[string]int{}
	for _, e := range b.events(t) {
		if e.Type == airlock.EventRequestExpired {
			events[e.RequestID]++
		}
	}
	if events[r1.ID] != 1 || events[r2.ID] != 1 || len(events) != 2 {
		t.Fatalf("expiry events %v, want one each for %s and %s", events, r1.ID, r2.ID)
	}
	rs, err = b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	if got, want := ids(rs), []string{other.ID}; !slices.Equal(got, want) {
		t.Fatalf("ExpireDue after ExpireRequests = %v, want %v", got, want)
	}
	rs, err = b.store.ExpireRequests(b.ctx, nil)
	if err != nil || len(rs) != 0 {
		t.Fatalf("ExpireRequests(nil) = %v, %v", ids(rs), err)
	}
}

// expiredFields is what ExpireDue returns of request r once expired: its
// identity, deadline, state and decision, nothing else.
func expiredFields(r airlock.Request) airlock.Request {
	return airlock.Request{Seq: r.Seq, ID: r.ID, InstanceID: r.InstanceID, OwnerID: r.OwnerID, SessionID: r.SessionID,
		State: r.State, DeadlineAt: r.DeadlineAt, Decision: r.Decision}
}

// nextDeadlineCrowded: NextDeadline finds the earliest deadline among up
// to store.NextDeadlineExact sharing its second, and answers the start of
// the second past that, rather than read every one of them.
func (s *suite) nextDeadlineCrowded(t *testing.T) {
	b := s.setup(t)
	if _, ok, err := b.store.NextDeadline(b.ctx); err != nil || ok {
		t.Fatalf("NextDeadline before any request = ok %v, %v; want none", ok, err)
	}
	second := b.clock.Now().Truncate(time.Second).Add(17 * time.Minute)
	dueAt := func(at time.Time) func(*store.NewRequestParams) {
		return func(p *store.NewRequestParams) { p.Window = at.Sub(b.clock.Now()) }
	}
	b.create(t, dueAt(second.Add(1500*time.Millisecond))) // the next second's: never the answer
	var earliest time.Time
	for i := range store.NextDeadlineExact {
		// Deadlines from 900 ms into the second down to 400, the earliest
		// created last.
		at := second.Add(900*time.Millisecond - time.Duration(i)*500*time.Microsecond)
		earliest = b.create(t, dueAt(at)).DeadlineAt
	}
	next, ok, err := b.store.NextDeadline(b.ctx)
	wantOK(t, err)
	if !ok || !next.Equal(earliest) {
		t.Fatalf("NextDeadline with %d deadlines in its second = %v (ok %v), want the earliest, %v", store.NextDeadlineExact, next, ok, earliest)
	}
	b.create(t, dueAt(second.Add(950*time.Millisecond)))
	next, ok, err = b.store.NextDeadline(b.ctx)
	wantOK(t, err)
	if !ok || !next.Equal(second) {
		t.Fatalf("NextDeadline with %d deadlines in its second = %v (ok %v), want the second's start, %v", store.NextDeadlineExact+1, next, ok, second)
	}
}
