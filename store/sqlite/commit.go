package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/store/sqlcore"
)

// Bounds of one batch, so that no transaction holds the writer for long:
// at most maxBatch operations, and no operation starts in a transaction
// that has already run for maxBatchHold. Without the second, an expiry
// sweep (500 rows) batched with other sweeps would hold the writer for
// all of them together.
const (
	maxBatch     = 64
	maxBatchHold = 5 * time.Millisecond
)

// errClosed answers writes that arrive after Close.
var errClosed = errors.New("sqlite: the store is closed; open it again to write")

// op is one write operation waiting for the writer: inTx's fn, the caller's
// context (for its values; a cancellation after the writer took the op
// does not interrupt it, since an interrupted statement can roll back the
// whole shared transaction), and where its result goes.
type op struct {
	ctx context.Context
	fn  func(tx *txn, now time.Time) error
	// core, when set instead of fn, is a write of sqlcore.Core (Write).
	core func(sqlcore.Tx) error
	done chan result
}

// result is what the writer answers an op: its error (nil once committed),
// or the value it panicked with, re-raised in the caller's goroutine; and
// whether it changed a token (txn.TokenChanged).
type result struct {
	err          error
	panicked     any
	tokenChanged bool
}

func (r result) failed() bool { return r.err != nil || r.panicked != nil }

// WriteStats counts the write transactions of a store since it opened.
// Ops / Commits is the average batch size: how many callers' writes shared
// one commit (one fsync) under concurrent load.
type WriteStats struct {
	Ops      int64 // write operations run
	Commits  int64 // transactions committed
	MaxBatch int64 // most operations in one transaction
}

// WriteStats returns the store's write counters, for benchmarks and for
// judging how well concurrent writes are grouped.
func (s *Store) WriteStats() WriteStats {
	return WriteStats{Ops: s.stats.ops.Load(), Commits: s.stats.commits.Load(), MaxBatch: s.stats.maxBatch.Load()}
}

// Batch describes one committed write transaction, for WithBatchObserver.
type Batch struct {
	Ops   int       // operations that ran in it
	Began time.Time // when it asked for the write lock
	// Held is from asking for the write lock until the commit was durable:
	// how long the transaction kept every other write waiting.
	Held time.Duration
	// Commit is the part of Held spent in COMMIT: writing the WAL frames
	// and syncing them.
	Commit time.Duration
}

// WithBatchObserver calls observe after each write transaction commits,
// on the writer's goroutine (so observe must be quick). Benchmarks use it
// to see how long transactions hold the writer — an expiry sweep must not
// hold it for long — and how many operations shared each commit.
func WithBatchObserver(observe func(Batch)) Option {
	return func(cfg *config) { cfg.observe = observe }
}

type writeStats struct {
	ops, commits, maxBatch atomic.Int64
}

// inTx runs fn in a write transaction and returns once that transaction
// has committed (nil) or fn's writes were undone (fn's error, or the
// transaction's). fn gets the store's now, read after the write lock is
// held: a now read before waiting for the lock could be stale by the wait,
// and would let a decision land after its deadline.
//
// Concurrent calls share transactions (group commit): the writer takes
// every operation waiting at that moment, up to maxBatch, runs each in its
// own savepoint, and commits them with one fsync. An operation that
// returns an error is rolled back to its savepoint alone, so each commits
// exactly what it would have committed on its own; a failed commit fails
// them all. A lone writer's operation runs at once, in its own transaction:
// the writer never waits for company. When nobody else writes or waits, the
// caller runs it itself, in its own goroutine (runHere), and the writer's
// goroutine takes what queues meanwhile.
func (s *Store) inTx(ctx context.Context, fn func(tx *txn, now time.Time) error) error {
	return s.submit(ctx, &op{ctx: ctx, fn: fn}).err
}

// submit queues o for the writer, as inTx says, and returns its result.
func (s *Store) submit(ctx context.Context, o *op) result {
	if err := ctx.Err(); err != nil {
		return result{err: err}
	}
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return result{err: errClosed}
	}
	if !s.writerBusy && len(s.queue) == 0 {
		// Nobody writes and nobody waits: run it here, as the writer would
		// alone, rather than hand it to the writer's goroutine and wait to
		// be woken with its result (two goroutine switches on the path of
		// every write a lone client makes).
		s.writerBusy = true
		s.qmu.Unlock()
		if s.enqueued != nil {
			s.enqueued()
		}
		return s.runHere(o)
	}
	o.done = make(chan result, 1)
	s.queue = append(s.queue, o)
	s.qmu.Unlock()
	if s.enqueued != nil {
		s.enqueued()
	}
	select {
	case s.wake <- struct{}{}:
	default: // the writer is already due to look at the queue
	}
	var r result
	select {
	case r = <-o.done:
	case <-ctx.Done():
		if s.withdraw(o) {
			return result{err: ctx.Err()} // never taken: nothing was written
		}
		// Taken: the answer comes once its batch has committed or rolled
		// back, so that an error from inTx always means not written.
		r = <-o.done
	}
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r
}

// runHere runs o as a batch of its own in the caller's goroutine, which
// holds the writer's role (writerBusy), then gives the role back and wakes
// the writer for the operations queued meanwhile.
func (s *Store) runHere(o *op) result {
	var results [1]result
	func() {
		defer s.releaseWriter()
		ran, changed := s.runBatch([]*op{o}, results[:])
		s.noteWrites(results[:ran], changed)
		s.write.prepareWanted(context.Background())
		if s.logEmptied.Swap(false) {
			// The writer emptied the log and stopped watching for idle
			// spells: tell it the log holds frames again.
			s.wakeWriter()
		}
	}()
	if results[0].panicked != nil {
		panic(results[0].panicked)
	}
	return results[0]
}

// holdWriter takes the writer's role if nobody holds it.
func (s *Store) holdWriter() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.writerBusy {
		return false
	}
	s.writerBusy = true
	return true
}

// releaseWriter gives the writer's role back, and wakes the writer if
// operations queued while it was held, or the store is closing.
func (s *Store) releaseWriter() {
	s.qmu.Lock()
	s.writerBusy = false
	wake := len(s.queue) > 0 || s.closed
	s.qmu.Unlock()
	if wake {
		s.wakeWriter()
	}
}

// wakeWriter tells the writer to look at the queue again.
func (s *Store) wakeWriter() {
	select {
	case s.wake <- struct{}{}:
	default: // the writer is already due to look at the queue
	}
}

// withdraw removes o from the queue if the writer has not taken it.
func (s *Store) withdraw(o *op) bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	for i, q := range s.queue {
		if q == o {
			s.queue = slices.Delete(s.queue, i, i+1)
			return true
		}
	}
	return false
}

// writeLoop is the store's one writer, apart from lone writes their
// callers run (runHere); it holds the writer's role while it works. It
// takes the operations waiting (at most maxBatch), runs them as one batch,
// answers them, and after the batch prepares the statements it met for the
// first time. Once no write has come for emptyLogAfter it empties the log
// (emptyLog). Once the store is closing it runs what is still queued, then
// returns.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	batch := make([]*op, 0, maxBatch)
	results := make([]result, maxBatch)
	// idle fires once no write has come for emptyLogAfter; logged is
	// whether the log may hold frames (a previous process's too).
	idle := time.NewTimer(s.emptyLogAfter)
	defer idle.Stop()
	logged := true
	for {
		s.qmu.Lock()
		for len(s.queue) == 0 || s.writerBusy {
			if s.closed && len(s.queue) == 0 && !s.writerBusy {
				s.qmu.Unlock()
				return
			}
			s.qmu.Unlock()
			if logged {
				select {
				case <-s.wake:
				case <-idle.C:
					// A lone caller's write (runHere) does not reset the
					// timer: the last commit says how idle the store is.
					if wait := s.emptyLogAfter - time.Since(time.Unix(0, s.lastCommit.Load())); wait > 0 {
						idle.Reset(wait)
						break
					}
					if s.holdWriter() {
						// Not emptied (a reader on an older snapshot): try
						// again after another idle spell.
						logged = !s.emptyLog()
						s.logEmptied.Store(!logged)
						s.releaseWriter()
					}
					idle.Reset(s.emptyLogAfter)
				}
			} else {
				<-s.wake
				if !s.logEmptied.Load() {
					logged = true // a lone caller wrote (runHere)
					idle.Reset(s.emptyLogAfter)
				}
			}
			s.qmu.Lock()
		}
		s.writerBusy = true
		n := min(len(s.queue), maxBatch)
		batch = append(batch, s.queue[:n]...)
		rest := copy(s.queue, s.queue[n:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		s.qmu.Unlock()

		ran, changed := s.runBatch(batch, results[:n])
		s.noteWrites(results[:ran], changed)
		if ran < n {
			// Over its time: the rest go back to the front of the queue,
			// not run, and form the next batch.
			s.qmu.Lock()
			s.queue = append(slices.Clone(batch[ran:n]), s.queue...)
			s.qmu.Unlock()
		}
		for i, o := range batch[:ran] {
			o.done <- results[i]
			results[i] = result{}
		}
		clear(batch)
		batch = batch[:0]
		s.write.prepareWanted(context.Background())
		s.logEmptied.Store(false)
		logged = true
		idle.Reset(s.emptyLogAfter)
		s.qmu.Lock()
		s.writerBusy = false // the loop looks at the queue next
		s.qmu.Unlock()
	}
}

// runBatch runs batch in one transaction, fills results, and returns how
// many of the operations it took: all of them, unless the transaction ran
// past its time bound (maxBatchHold) before the rest started, or its first
// operation failed (they are not run, and have no result). The first
// operation runs without a savepoint, exactly as in a transaction of its
// own; each later one within a savepoint of its own. changed reports
// whether the committed transaction changed a row; it is asked of SQLite
// only while writes are failing (noteWrites), and true otherwise.
func (s *Store) runBatch(batch []*op, results []result) (taken int, changed bool) {
	ctx := context.Background()
	failAll := func(err error) int {
		for i := range results {
			if !results[i].failed() {
				results[i] = result{err: err}
			}
		}
		return len(batch)
	}
	begin := time.Now()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return failAll(err), false
	}
	t := &txn{Tx: tx, p: s.write, ctx: ctx, s: s}
	// A commit that changed no row writes nothing, and so succeeds on a
	// full disk: while writes are failing, only a batch that changed rows
	// may say that the store writes again.
	changesBefore := int64(-1)
	if s.writesFailing.Load() {
		if err := t.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&changesBefore); err != nil {
			changesBefore = -1
		}
	}
	changed = true
	multi := len(batch) > 1
	ran := 0
	for taken < len(batch) {
		if multi && taken > 0 && time.Since(begin) >= s.batchHold {
			break
		}
		i, o := taken, batch[taken]
		taken++
		if err := o.ctx.Err(); err != nil {
			results[i] = result{err: err} // given up before it ran
			continue
		}
		// The first operation to run needs no savepoint: nothing ran
		// before it, so when it fails the whole transaction rolls back and
		// the operations after it, not yet run, go back to the queue.
		alone := !multi || ran == 0
		if !alone {
			if _, err := t.ExecContext(ctx, `SAVEPOINT op`); err != nil {
				tx.Rollback()
				return failAll(fmt.Errorf("group commit: savepoint: %w", err)), false
			}
		}
		results[i] = s.run(t, o)
		ran++
		switch {
		case alone && results[i].failed():
			tx.Rollback()
			return taken, false
		case alone:
		case results[i].failed():
			// Undo this operation alone. If SQLite already rolled the whole
			// transaction back (an I/O error, a full disk), the savepoint
			// is gone and so is every operation's work: fail them all.
			if _, err := t.ExecContext(ctx, `ROLLBACK TO op`); err != nil {
				tx.Rollback()
				// The operation's error is the cause for all of them: a full
				// disk fails the others as unavailable, too.
				cause := results[i].err
				if cause == nil {
					cause = errors.New("it panicked")
				}
				return failAll(fmt.Errorf("group commit: an operation's error ended the shared transaction: %w (then %w)", cause, err)), false
			}
			fallthrough
		default:
			if _, err := t.ExecContext(ctx, `RELEASE op`); err != nil {
				tx.Rollback()
				return failAll(fmt.Errorf("group commit: release savepoint: %w", err)), false
			}
		}
	}
	results = results[:taken]
	if s.beforeCommit != nil {
		if err := s.beforeCommit(taken); err != nil {
			tx.Rollback()
			failAll(fmt.Errorf("commit: %w", err))
			return taken, false
		}
	}
	if changesBefore >= 0 {
		var after int64
		if err := t.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&after); err == nil && after == changesBefore {
			changed = false
		}
	}
	committing := time.Now()
	if err := tx.Commit(); err != nil {
		// SQLite may keep the transaction open after a failed COMMIT; end
		// it so that the next batch can begin.
		s.write.DB.ExecContext(ctx, `ROLLBACK`)
		failAll(fmt.Errorf("commit: %w", err))
		return taken, false
	}
	s.lastCommit.Store(time.Now().UnixNano())
	if t.appended {
		s.eventsAppended()
	}
	s.stats.ops.Add(int64(ran))
	s.stats.commits.Add(1)
	s.ckpt.notify()
	if n := int64(taken); n > s.stats.maxBatch.Load() {
		s.stats.maxBatch.Store(n) // only the writer stores it
	}
	if s.observe != nil {
		end := time.Now()
		s.observe(Batch{Ops: ran, Began: begin, Held: end.Sub(begin), Commit: end.Sub(committing)})
	}
	return taken, changed
}

// run runs one operation with the store's now, read now that the write
// lock is held, and turns a panic into a result the caller re-raises.
func (s *Store) run(t *txn, o *op) (r result) {
	defer func() {
		if p := recover(); p != nil {
			r = result{panicked: p}
		}
		t.ctx = context.Background()
	}()
	t.ctx = context.WithoutCancel(o.ctx)
	t.begin(s.now())
	if o.core != nil {
		err := o.core(t)
		return result{err: err, tokenChanged: t.tokenChanged}
	}
	return result{err: o.fn(t, t.now)}
}
