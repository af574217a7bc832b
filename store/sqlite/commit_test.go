package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/storetest"
)

// batchBundle is a store whose writer a test can hold and whose queue and
// commits it can watch, to put chosen operations into one batch.
type batchBundle struct {
	s     *Store
	clock *storetest.FakeClock
	// queued receives once per operation queued.
	queued chan struct{}
	// commit, when set, runs before each COMMIT with the batch's size.
	commit atomic.Pointer[func(ops int) error]
}

func newBatchBundle(t *testing.T, opts ...Option) *batchBundle {
	t.Helper()
	b := &batchBundle{clock: storetest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), queued: make(chan struct{}, 64)}
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"), WithClock(b.clock),
		func(c *config) {
			c.enqueued = func() { b.queued <- struct{}{} }
			c.beforeCommit = func(ops int) error {
				if f := b.commit.Load(); f != nil {
					return (*f)(ops)
				}
				return nil
			}
			// Batches here are kept whole; TestGroupCommitBoundsHold
			// lowers the bound again.
			c.batchHold = time.Hour
		}, func(c *config) {
			for _, o := range opts {
				o(c)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b.s = s
	return b
}

// hold occupies the writer with an operation that waits until the returned
// release is called, and returns once the writer is inside it. Operations
// queued meanwhile form the next batch.
func (b *batchBundle) hold(t *testing.T) (release func()) {
	t.Helper()
	running, released, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- b.s.inTx(context.Background(), func(*txn, time.Time) error {
			close(running)
			<-released
			return nil
		})
	}()
	<-b.queued
	<-running
	return func() {
		close(released)
		if err := <-done; err != nil {
			t.Errorf("holding operation: %v", err)
		}
	}
}

// recordBatches records the size of every batch committed from now on;
// the function it returns reads them.
func (b *batchBundle) recordBatches() func() []int {
	var (
		mu    sync.Mutex
		sizes []int
	)
	record := func(ops int) error {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, ops)
		return nil
	}
	b.commit.Store(&record)
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sizes)
	}
}

// awaitQueued waits until n more operations are queued.
func (b *batchBundle) awaitQueued(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-b.queued:
		case <-time.After(10 * time.Second):
			t.Fatalf("operations were not queued within 10s")
		}
	}
}

func (b *batchBundle) newRequest(t *testing.T, inst string, window time.Duration) airlock.Request {
	t.Helper()
	key := airlock.NewID("key_")
	done := make(chan struct{})
	go func() { // the writer's queue hook must be drained
		defer close(done)
		<-b.queued
	}()
	r, _, err := b.s.CreateRequest(t.Context(), store.NewRequestParams{
		Request: airlock.Request{InstanceID: inst, OwnerID: "tok_a", Tool: "t", Arguments: json.RawMessage(`{}`),
			IdempotencyKey: key, Fingerprint: key},
		Window: window, Actor: "tok_a",
	})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *batchBundle) newInstance(t *testing.T, id string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-b.queued
	}()
	_, err := b.s.CreateInstance(t.Context(), airlock.Instance{ID: id, OwnerID: "tok_a", Name: id}, "tok_a")
	<-done
	if err != nil {
		t.Fatal(err)
	}
}

// insertInstance is a raw write that a failing operation makes before it
// fails.
func insertInstance(tx *txn, now time.Time, id string) error {
	_, err := tx.ExecContext(context.Background(), `INSERT INTO instances (id, owner_id, name, created_at) VALUES (?, 'tok_a', ?, ?)`,
		id, id, micros(now))
	return err
}

// TestGroupCommitIsolatesOperations puts five concurrent operations into
// one batch: a refused decision that expires its overdue request, a write
// that fails after writing, a decision that succeeds, a write that panics
// after writing, and one whose caller gives up while it is queued. Each
// must commit exactly what it would commit alone, and no caller whose
// operation commits may hear back before the batch's COMMIT. (A failing
// operation that happens to run first rolls back the transaction alone,
// and the rest form the next batch: TestGroupCommitFirstFails.)
func TestGroupCommitIsolatesOperations(t *testing.T) {
	t.Parallel()
	b := newBatchBundle(t)
	ctx := t.Context()
	b.newInstance(t, "ins_1")
	overdue := b.newRequest(t, "ins_1", time.Second)
	b.clock.Advance(2 * time.Second)
	open := b.newRequest(t, "ins_1", time.Hour)

	var returned atomic.Int32
	var batchSizes []int
	var mu sync.Mutex
	check := func(ops int) error {
		mu.Lock()
		defer mu.Unlock()
		batchSizes = append(batchSizes, ops)
		if n := returned.Load(); n != 0 {
			t.Errorf("%d callers heard back before their batch's COMMIT", n)
		}
		return nil
	}
	b.commit.Store(&check)

	release := b.hold(t)
	var (
		wg                                       sync.WaitGroup
		refusedErr, failedErr, approvedErr, gone error
		panicked                                 any
		goneRan                                  atomic.Bool
	)
	wg.Go(func() {
		_, refusedErr = b.s.Decide(ctx, store.DecideParams{ID: overdue.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"})
		returned.Add(1)
	})
	wg.Go(func() {
		failedErr = b.s.inTx(ctx, func(tx *txn, now time.Time) error {
			if err := insertInstance(tx, now, "ins_failed"); err != nil {
				return err
			}
			return errors.New("boom")
		})
	})
	wg.Go(func() {
		_, approvedErr = b.s.Decide(ctx, store.DecideParams{ID: open.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"})
		returned.Add(1)
	})
	wg.Go(func() {
		defer func() { panicked = recover() }()
		b.s.inTx(ctx, func(tx *txn, now time.Time) error {
			if err := insertInstance(tx, now, "ins_panicked"); err != nil {
				return err
			}
			panic("kaboom")
		})
	})
	giveUp, cancel := context.WithCancel(ctx)
	goneDone := make(chan struct{})
	go func() {
		defer close(goneDone)
		gone = b.s.inTx(giveUp, func(tx *txn, now time.Time) error {
			goneRan.Store(true)
			return insertInstance(tx, now, "ins_gone")
		})
	}()
	b.awaitQueued(t, 5)
	cancel()
	<-goneDone // withdrawn from the queue: the writer is still held
	release()
	wg.Wait()

	if !errors.Is(gone, context.Canceled) || goneRan.Load() {
		t.Errorf("operation given up while queued: err %v, ran %v; want context.Canceled and never run", gone, goneRan.Load())
	}
	mu.Lock()
	// Committed batches: the holding operation, then the queued ones
	// together, less any failing one that ran first and rolled back alone.
	if len(batchSizes) != 2 || batchSizes[0] != 1 || batchSizes[1] < 2 {
		t.Errorf("committed batch sizes %v, want [1 n] with n ≥ 2: the holding operation, then the queued ones with both decisions together", batchSizes)
	}
	mu.Unlock()
	if airlock.ErrorCode(refusedErr) != airlock.CodeDeadlinePassed {
		t.Errorf("decision on the overdue request = %v, want deadline_passed", refusedErr)
	}
	if failedErr == nil || failedErr.Error() != "boom" {
		t.Errorf("failing operation = %v, want boom", failedErr)
	}
	if approvedErr != nil {
		t.Errorf("decision in the same batch = %v, want success", approvedErr)
	}
	if panicked != "kaboom" {
		t.Errorf("panicking operation: caller recovered %v, want kaboom", panicked)
	}

	if r, err := b.s.GetRequest(ctx, overdue.ID); err != nil || r.State != airlock.StateExpired {
		t.Errorf("overdue request after its refused decision: %v %v, want expired (the refusal's expiry commits)", r.State, err)
	}
	if r, err := b.s.GetRequest(ctx, open.ID); err != nil || r.State != airlock.StateApproved {
		t.Errorf("request approved in the batch: %v %v, want approved", r.State, err)
	}
	for _, id := range []string{"ins_failed", "ins_panicked", "ins_gone"} {
		if _, err := b.s.GetInstance(ctx, id); airlock.ErrorCode(err) != airlock.CodeNotFound {
			t.Errorf("instance %s written by an operation that did not succeed: GetInstance = %v, want not_found", id, err)
		}
	}
	events, err := b.s.ListEvents(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		if e.RequestID == overdue.ID || e.RequestID == open.ID {
			got = append(got, string(e.Type)+" "+e.RequestID)
		}
	}
	want := []string{"request.created " + overdue.ID, "request.created " + open.ID,
		"request.expired " + overdue.ID, "request.approved " + open.ID}
	if len(got) == 4 {
		slices.Sort(got[2:]) // the batch's operations ran in their queue's order
		slices.Sort(want[2:])
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("request events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGroupCommitFailedCommitFailsAll makes a batch's COMMIT fail: every
// operation in it fails, none of their writes is kept, and the next write
// succeeds.
func TestGroupCommitFailedCommitFailsAll(t *testing.T) {
	t.Parallel()
	b := newBatchBundle(t)
	ctx := t.Context()
	fail := func(ops int) error {
		if ops == 3 {
			return errors.New("disk on fire")
		}
		return nil
	}
	b.commit.Store(&fail)

	release := b.hold(t)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			_, errs[i] = b.s.CreateInstance(ctx, airlock.Instance{ID: "ins_" + string(rune('a'+i)), OwnerID: "tok_a", Name: "x"}, "tok_a")
		})
	}
	b.awaitQueued(t, 3)
	release()
	wg.Wait()
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("operation %d of the failed batch = %v, want the commit's error", i, err)
		}
	}
	ins, err := b.s.ListInstances(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 0 {
		t.Errorf("%d instances kept from a batch whose commit failed, want 0", len(ins))
	}
	b.newInstance(t, "ins_after")
	if _, err := b.s.GetInstance(ctx, "ins_after"); err != nil {
		t.Errorf("write after a failed commit: %v", err)
	}
}

// TestGroupCommitLoneWriter checks that operations issued one after
// another each get their own commit: the writer never waits to fill a
// batch.
func TestGroupCommitLoneWriter(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []Batch
	b := newBatchBundle(t, WithBatchObserver(func(x Batch) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, x)
	}))
	before := b.s.WriteStats()
	mu.Lock()
	seen = nil
	mu.Unlock()
	start := time.Now()
	for i := range 5 {
		b.newInstance(t, "ins_"+string(rune('a'+i)))
	}
	st := b.s.WriteStats()
	if st.Ops-before.Ops != 5 || st.Commits-before.Commits != 5 || st.MaxBatch != 1 {
		t.Errorf("5 sequential writes: %+v (from %+v), want 5 ops in 5 commits of 1", st, before)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 5 {
		t.Fatalf("observer saw %d transactions, want 5", len(seen))
	}
	for _, x := range seen {
		if x.Ops != 1 || x.Held <= 0 || x.Began.Before(start) || x.Held > time.Since(start) {
			t.Errorf("observed transaction %+v, want 1 op held for a while after %s", x, start)
		}
	}
}

// TestLoneWriteRunsInCaller checks that a write made while nobody else
// writes or waits runs in its caller's goroutine, not handed to the
// writer's goroutine and back (two goroutine switches on every write of a
// lone client), and commits as it would there: alone, in a transaction of
// its own. A lone write that panics re-raises in its caller, commits
// nothing, and leaves the writer free for the next one.
func TestLoneWriteRunsInCaller(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	// inCaller reports whether this test's function is on the stack of
	// the goroutine running the operation.
	inCaller := func() bool {
		pcs := make([]uintptr, 64)
		frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
		for {
			f, more := frames.Next()
			if strings.HasSuffix(f.Function, ".TestLoneWriteRunsInCaller") {
				return true
			}
			if !more {
				return false
			}
		}
	}
	before := s.WriteStats()
	var here bool
	if err := s.inTx(t.Context(), func(tx *txn, now time.Time) error {
		here = inCaller()
		return insertInstance(tx, now, "ins_lone")
	}); err != nil {
		t.Fatal(err)
	}
	if !here {
		t.Error("a lone write ran in another goroutine, want its caller's")
	}
	if st := s.WriteStats(); st.Ops-before.Ops != 1 || st.Commits-before.Commits != 1 {
		t.Errorf("a lone write: %+v (from %+v), want 1 op in 1 commit", st, before)
	}

	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Errorf("a lone write that panics: caller recovered %v, want kaboom", p)
			}
		}()
		s.inTx(t.Context(), func(tx *txn, now time.Time) error {
			if err := insertInstance(tx, now, "ins_panicked"); err != nil {
				return err
			}
			panic("kaboom")
		})
	}()
	// Were the writer's role still held, this write would queue for a
	// writer that never comes, and time out.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.inTx(ctx, func(tx *txn, now time.Time) error { return insertInstance(tx, now, "ins_after") }); err != nil {
		t.Fatalf("the write after a panic: %v", err)
	}
	for id, want := range map[string]bool{"ins_lone": true, "ins_panicked": false, "ins_after": true} {
		_, err := s.GetInstance(t.Context(), id)
		if got := err == nil; got != want {
			t.Errorf("instance %s stored = %t (%v), want %t", id, got, err, want)
		}
	}
}

// TestCloseRunsQueuedWrites closes the store while writes are queued: they
// commit before Close returns, and writes after Close are refused.
func TestCloseRunsQueuedWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "airlock.db")
	queued := make(chan struct{}, 8)
	s, err := Open(t.Context(), path, func(c *config) { c.enqueued = func() { queued <- struct{}{} } })
	if err != nil {
		t.Fatal(err)
	}
	b := &batchBundle{s: s, queued: queued}
	release := b.hold(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = s.CreateInstance(t.Context(), airlock.Instance{ID: "ins_" + string(rune('a'+i)), OwnerID: "tok_a", Name: "x"}, "tok_a")
		})
	}
	b.awaitQueued(t, 2)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	release()
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("write queued before Close: %d: %v", i, err)
		}
	}
	if _, err := s.CreateInstance(t.Context(), airlock.Instance{OwnerID: "tok_a", Name: "late"}, "tok_a"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("write after Close = %v, want an error saying the store is closed", err)
	}
	s, err = Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ins, err := s.ListInstances(t.Context(), ""); err != nil || len(ins) != 2 {
		t.Errorf("after reopening: %d instances (%v), want the 2 queued before Close", len(ins), err)
	}
}

// TestGroupCommitBoundsHold queues a slow operation before two fast ones:
// the slow one runs past maxBatchHold, so it commits alone and the fast
// ones form the next batch, instead of holding the writer longer.
func TestGroupCommitBoundsHold(t *testing.T) {
	t.Parallel()
	b := newBatchBundle(t, func(c *config) { c.batchHold = maxBatchHold })
	committed := b.recordBatches()

	release := b.hold(t)
	slow := make(chan error, 1)
	go func() {
		slow <- b.s.inTx(t.Context(), func(tx *txn, now time.Time) error {
			// A slow operation, as a large sweep is: it works past the
			// batch's time bound.
			for start := time.Now(); time.Since(start) < 2*b.s.batchHold; {
				if err := insertInstance(tx, now, "ins_"+airlock.NewID("")); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	b.awaitQueued(t, 1)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = b.s.CreateInstance(t.Context(), airlock.Instance{OwnerID: "tok_a", Name: "fast"}, "tok_a")
		})
	}
	b.awaitQueued(t, 2)
	release()
	wg.Wait()
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sizes := committed()
	// The fast ones normally share the third batch; on a slow machine they
	// may each overrun the bound too.
	rest := 0
	for _, n := range sizes[min(2, len(sizes)):] {
		rest += n
	}
	if len(sizes) < 3 || sizes[0] != 1 || sizes[1] != 1 || rest != 2 {
		t.Errorf("batch sizes %v, want [1 1 2]: the slow operation commits alone, the two fast ones after it", sizes)
	}
}

// TestGroupCommitFirstFails queues a failing operation and then a
// succeeding one behind a held writer: the first runs without a savepoint,
// so its failure rolls back the transaction, and the second, not yet run,
// commits in the next batch, exactly as if each had run alone.
func TestGroupCommitFirstFails(t *testing.T) {
	t.Parallel()
	b := newBatchBundle(t)
	ctx := t.Context()
	committed := b.recordBatches()

	release := b.hold(t)
	failed := make(chan error, 1)
	go func() {
		failed <- b.s.inTx(ctx, func(tx *txn, now time.Time) error {
			if err := insertInstance(tx, now, "ins_failed"); err != nil {
				return err
			}
			return errors.New("boom")
		})
	}()
	b.awaitQueued(t, 1)
	succeeded := make(chan error, 1)
	go func() {
		succeeded <- b.s.inTx(ctx, func(tx *txn, now time.Time) error {
			return insertInstance(tx, now, "ins_ok")
		})
	}()
	b.awaitQueued(t, 1)
	release()

	if err := <-failed; err == nil || err.Error() != "boom" {
		t.Errorf("failing first operation = %v, want boom", err)
	}
	if err := <-succeeded; err != nil {
		t.Errorf("operation queued after it = %v, want success", err)
	}
	if _, err := b.s.GetInstance(ctx, "ins_failed"); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Errorf("the failed operation's write: GetInstance = %v, want not_found", err)
	}
	if _, err := b.s.GetInstance(ctx, "ins_ok"); err != nil {
		t.Errorf("the next operation's write: GetInstance = %v, want it committed", err)
	}
	if batches := committed(); !slices.Equal(batches, []int{1, 1}) {
		t.Errorf("committed batches %v, want [1 1]: the holding operation, then the second alone", batches)
	}
}
