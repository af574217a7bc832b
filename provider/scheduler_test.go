package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// waitFor waits until cond holds, re-checking at every change the service
// publishes (no sleeping), and fails the test after timeout.
func (b *bundle) waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	expired := time.After(timeout)
	for {
		changed := b.svc.Changes()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-expired:
			t.Fatalf("gave up after %s waiting for %s", timeout, what)
		}
	}
}

// pending counts pending requests straight from the store, so that
// counting does not expire anything itself.
func (b *bundle) pending(t *testing.T) int {
	t.Helper()
	rs, _, err := b.store.ListRequests(context.WithoutCancel(t.Context()), store.RequestFilter{State: airlock.StatePending, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// expiryLags returns, for each request of deadlines that the store
// expired, how long after its deadline the expiry was recorded (the audit
// event's time), sorted.
func (b *bundle) expiryLags(t *testing.T, deadlines map[string]time.Time) []time.Duration {
	t.Helper()
	var lags []time.Duration
	seen := map[string]int{}
	for _, e := range b.events(t) {
		d, ok := deadlines[e.RequestID]
		if !ok || e.Type != airlock.EventRequestExpired {
			continue
		}
		if e.Actor != airlock.ActorExpiry {
			t.Errorf("request %s expired by %q", e.RequestID, e.Actor)
		}
		seen[e.RequestID]++
		lags = append(lags, e.At.Sub(d))
	}
	for id := range deadlines {
		if seen[id] != 1 {
			t.Errorf("request %s has %d expiry events, want 1", id, seen[id])
		}
	}
	slices.Sort(lags)
	return lags
}

// TestSchedulerExpiresPromptly runs the real scheduler on the real clock
// and measures how long after its deadline each request is expired.
func TestSchedulerExpiresPromptly(t *testing.T) {
	t.Parallel()
	b := setup(t, options{realClock: true, limits: testLimits()})
	b.runScheduler(t)
	rng := rand.New(rand.NewPCG(1, 2))
	deadlines := map[string]time.Time{}
	for range 60 {
		r := b.create(t, fmt.Sprintf("%dms", 10+rng.IntN(290)))
		deadlines[r.ID] = r.DeadlineAt
	}
	b.waitFor(t, 10*time.Second, "every request to expire", func() bool { return b.pending(t) == 0 })
	lags := b.expiryLags(t, deadlines)
	if len(lags) != len(deadlines) {
		t.Fatalf("%d of %d requests expired", len(lags), len(deadlines))
	}
	p50, p99, worst := percentile(lags, 50), percentile(lags, 99), lags[len(lags)-1]
	t.Logf("expiry lag over %d requests: p50 %s, p99 %s, max %s", len(lags), p50, p99, worst)
	if lags[0] < 0 {
		t.Fatalf("a request expired %s before its deadline", -lags[0])
	}
	if worst >= time.Second {
		t.Fatalf("expiry lag up to %s, want under 1s", worst)
	}
}

// TestSchedulerWokenByEarlierDeadline checks that a create whose deadline
// comes before the one the scheduler sleeps until wakes it: without the
// wake-up the scheduler would sleep a minute.
func TestSchedulerWokenByEarlierDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, options{realClock: true, limits: testLimits()})
	b.runScheduler(t)
	far := b.create(t, "1h")
	// Wait until the scheduler has gone to sleep until far's deadline.
	until := time.Now().Add(5 * time.Second)
	for b.svc.nextWake.Load() != far.DeadlineAt.UnixMicro() {
		if time.Now().After(until) {
			t.Fatalf("the scheduler never slept until the pending deadline (next wake %d)", b.svc.nextWake.Load())
		}
		time.Sleep(100 * time.Microsecond) // nothing to inject: poll the scheduler's state
	}
	near := b.create(t, "100ms")
	b.waitFor(t, 5*time.Second, "the earlier request to expire", func() bool {
		return b.stored(t, near.ID).State == airlock.StateExpired
	})
	lags := b.expiryLags(t, map[string]time.Time{near.ID: near.DeadlineAt})
	t.Logf("woken scheduler expired the earlier request %s after its deadline", lags[0])
	if lags[0] >= time.Second {
		t.Fatalf("lag %s, want under 1s", lags[0])
	}
	if st := b.stored(t, far.ID).State; st != airlock.StatePending {
		t.Fatalf("the later request is %s", st)
	}
}

// TestSchedulerCatchesUpAtStart checks that requests that fell due while
// no scheduler ran are expired as soon as one starts.
func TestSchedulerCatchesUpAtStart(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	deadlines := map[string]time.Time{}
	for i := range 30 {
		r := b.create(t, fmt.Sprintf("%ds", 1+i))
		deadlines[r.ID] = r.DeadlineAt
	}
	b.clock.Advance(time.Hour)
	if n := b.pending(t); n != 30 {
		t.Fatalf("%d pending before the scheduler starts, want 30", n)
	}
	start := time.Now()
	b.runScheduler(t)
	b.waitFor(t, 5*time.Second, "overdue requests to expire", func() bool { return b.pending(t) == 0 })
	took := time.Since(start)
	t.Logf("caught up 30 overdue requests %s after start", took)
	if took > time.Second {
		t.Fatalf("catching up took %s, want under 1s", took)
	}
	b.expiryLags(t, deadlines) // one expiry event each
	for id, d := range deadlines {
		if got := b.stored(t, id); !got.Decision.DecidedAt.Equal(d) {
			t.Errorf("%s: expired decision dated %s, want its deadline %s", id, got.Decision.DecidedAt, d)
		}
	}
}

// TestSchedulerBatches checks that a small ExpiryBatch still expires
// everything due, including when the count is a multiple of the batch.
func TestSchedulerBatches(t *testing.T) {
	t.Parallel()
	for _, n := range []int{20, 21} {
		t.Run(fmt.Sprintf("Run, %d due in batches of 3", n), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{batch: 3})
			deadlines := map[string]time.Time{}
			for range n {
				r := b.create(t, "1m")
				deadlines[r.ID] = r.DeadlineAt
			}
			notDue := b.create(t, "2h")
			b.clock.Advance(time.Hour)
			b.runScheduler(t)
			b.waitFor(t, 5*time.Second, "every due request to expire", func() bool { return b.pending(t) == 1 })
			b.expiryLags(t, deadlines)
			if st := b.stored(t, notDue.ID).State; st != airlock.StatePending {
				t.Fatalf("a request not yet due is %s", st)
			}
		})
		t.Run(fmt.Sprintf("ExpireDue, %d due in batches of 3", n), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{batch: 3})
			for range n {
				b.create(t, "1m")
			}
			b.clock.Advance(time.Hour)
			got, err := b.svc.ExpireDue(t.Context())
			if err != nil || got != n {
				t.Fatalf("ExpireDue = %d, %v; want %d", got, err, n)
			}
			if p := b.pending(t); p != 0 {
				t.Fatalf("%d left pending", p)
			}
			if got, err := b.svc.ExpireDue(t.Context()); err != nil || got != 0 {
				t.Fatalf("second ExpireDue = %d, %v; want 0", got, err)
			}
		})
	}
}

// TestNextSweep: a sweep is sized in proportion to its store's target
// over the last one's time, at most doubling or halving. Under load a
// sweep's fixed cost (round trips, the commit) alone can pass SQLite's
// 10 ms: there it stays at the fewest rows, as it should while it holds
// the one writer; PostgreSQL's 20 ms lets the same sweep grow.
func TestNextSweep(t *testing.T) {
	t.Parallel()
	const pg = 20 * time.Millisecond
	for _, c := range []struct {
		name   string
		n      int
		took   time.Duration
		target time.Duration
		want   int
	}{
		{"SQLite: 16 rows in 16 ms stay 16", 16, 16 * time.Millisecond, sweepTarget, minSweep},
		{"PostgreSQL: 16 rows in 16 ms grow to 20", 16, 16 * time.Millisecond, pg, 20},
		{"PostgreSQL: 100 rows in 16 ms grow to 125", 100, 16 * time.Millisecond, pg, 125},
		{"PostgreSQL: 1,000 rows in 100 ms halve", 1000, 100 * time.Millisecond, pg, 500},
		{"a fast sweep at most doubles", 100, time.Millisecond, pg, 200},
		{"never past maxSweep", maxSweep, time.Millisecond, pg, maxSweep},
	} {
		if got := nextSweep(c.n, c.took, c.target); got != c.want {
			t.Errorf("%s: nextSweep(%d, %s, %s) = %d", c.name, c.n, c.took, c.target, got)
		}
	}
}

// extrasStore is a store whose optional parts (Extras) a test sets.
type extrasStore struct {
	store.Store
	set func(*store.Extras)
}

func (s extrasStore) Extras() store.Extras {
	e := s.Store.Extras()
	s.set(&e)
	return e
}

// TestSweepTargetFromStore: the service sizes its sweeps to the store's
// target when it has one (PostgreSQL), to sweepTarget otherwise.
func TestSweepTargetFromStore(t *testing.T) {
	t.Parallel()
	if got := setup(t, options{}).svc.sweep.target; got != sweepTarget {
		t.Errorf("SQLite: sweep target %s, want %s", got, sweepTarget)
	}
	wrap := func(st store.Store) store.Store {
		return extrasStore{st, func(e *store.Extras) { e.SweepTarget = 25 * time.Millisecond }}
	}
	if got := setup(t, options{wrap: wrap}).svc.sweep.target; got != 25*time.Millisecond {
		t.Errorf("a store with its own target: sweep target %s, want 25ms", got)
	}
}

// TestSequencerGapFromStore: the audit log's sequencer waits the store's
// gap between rounds when it has one (PostgreSQL), sequencerMinGap
// otherwise.
func TestSequencerGapFromStore(t *testing.T) {
	t.Parallel()
	if got := setup(t, options{}).svc.audit.gap; got != sequencerMinGap {
		t.Errorf("SQLite: sequencer gap %s, want %s", got, sequencerMinGap)
	}
	wrap := func(st store.Store) store.Store {
		return extrasStore{st, func(e *store.Extras) { e.SequencerGap = 50 * time.Millisecond }}
	}
	if got := setup(t, options{wrap: wrap}).svc.audit.gap; got != 50*time.Millisecond {
		t.Errorf("a store with its own gap: sequencer gap %s, want 50ms", got)
	}
}

// contendedStore stands for a replica whose sweeps other replicas'
// sweeps leave short: each ExpireDue takes at most take of the rows
// asked for (PostgreSQL's SKIP LOCKED). It counts NextDeadline reads.
type contendedStore struct {
	store.Store
	take      int
	deadlines atomic.Int64
}

func (s *contendedStore) ExpireDue(ctx context.Context, limit int) ([]airlock.Request, error) {
	return s.Store.ExpireDue(ctx, min(limit, s.take))
}

func (s *contendedStore) NextDeadline(ctx context.Context) (time.Time, bool, error) {
	s.deadlines.Add(1)
	return s.Store.NextDeadline(ctx)
}

// TestSchedulerBurstReadsNextDeadlineRarely: a burst whose sweeps come
// back short (other replicas hold rows) is swept pass after pass without
// reading the next deadline between them. With 100,000 due in one second
// that read cost PostgreSQL about 40 ms, once a pass: more than the
// sweeps (docs/performance.md, "Scale").
func TestSchedulerBurstReadsNextDeadlineRarely(t *testing.T) {
	t.Parallel()
	cs := &contendedStore{take: 4}
	b := setup(t, options{wrap: func(st store.Store) store.Store { cs.Store = st; return cs }})
	const n = 60
	deadlines := map[string]time.Time{}
	for range n {
		r := b.create(t, "1m")
		deadlines[r.ID] = r.DeadlineAt
	}
	b.clock.Advance(time.Hour)
	b.runScheduler(t)
	b.waitFor(t, 10*time.Second, "every due request to expire", func() bool { return b.pending(t) == 0 })
	b.expiryLags(t, deadlines) // one expiry event each
	// None during the 15 short passes, one after the pass that found
	// none left. Read after each pass, it was 15.
	if got := cs.deadlines.Load(); got > 3 {
		t.Errorf("NextDeadline read %d times while %d due were expired %d at a time, want at most 3", got, n, cs.take)
	}
}
