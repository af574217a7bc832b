package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// maxBatch bounds how many write operations share one transaction, so that
// no batch (an expiry sweep among them) holds the writer for long.
const maxBatch = 64

// errClosed answers writes that arrive after Close.
var errClosed = errors.New("sqlite: the store is closed; open it again to write")

// op is one write operation waiting for the writer: inTx's fn, the caller's
// context (for its values; a cancellation after the writer took the op
// does not interrupt it, since an interrupted statement can roll back the
// whole shared transaction), and where its result goes.
type op struct {
	ctx  context.Context
	fn   func(tx *txn, now time.Time) error
	done chan result
}

// result is what the writer answers an op: its error (nil once committed),
// or the value it panicked with, re-raised in the caller's goroutine.
type result struct {
	err      error
	panicked any
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
// the writer never waits for company.
func (s *Store) inTx(ctx context.Context, fn func(tx *txn, now time.Time) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{ctx: ctx, fn: fn, done: make(chan result, 1)}
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return errClosed
	}
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
			return ctx.Err() // never taken: nothing was written
		}
		// Taken: the answer comes once its batch has committed or rolled
		// back, so that an error from inTx always means not written.
		r = <-o.done
	}
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.err
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

// writeLoop is the store's one writer. It takes the operations waiting (at
// most maxBatch), runs them as one batch, answers them, and after the
// batch prepares the statements it met for the first time. Once the store
// is closing it runs what is still queued, then returns.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	batch := make([]*op, 0, maxBatch)
	results := make([]result, maxBatch)
	for {
		s.qmu.Lock()
		for len(s.queue) == 0 {
			if s.closed {
				s.qmu.Unlock()
				return
			}
			s.qmu.Unlock()
			<-s.wake
			s.qmu.Lock()
		}
		n := min(len(s.queue), maxBatch)
		batch = append(batch, s.queue[:n]...)
		rest := copy(s.queue, s.queue[n:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		s.qmu.Unlock()

		s.runBatch(batch, results[:n])
		for i, o := range batch {
			o.done <- results[i]
			results[i] = result{}
			batch[i] = nil
		}
		batch = batch[:0]
		s.write.prepareWanted(context.Background())
	}
}

// runBatch runs batch in one transaction and fills results. A batch of one
// runs without savepoints, exactly as a transaction of its own.
func (s *Store) runBatch(batch []*op, results []result) {
	ctx := context.Background()
	failAll := func(err error) {
		for i := range results {
			if !results[i].failed() {
				results[i] = result{err: err}
			}
		}
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		failAll(err)
		return
	}
	t := &txn{Tx: tx, p: s.write, ctx: ctx}
	multi := len(batch) > 1
	ran := 0
	for i, o := range batch {
		if err := o.ctx.Err(); err != nil {
			results[i] = result{err: err} // given up before it ran
			continue
		}
		if multi {
			if _, err := t.ExecContext(ctx, `SAVEPOINT op`); err != nil {
				tx.Rollback()
				failAll(fmt.Errorf("group commit: savepoint: %w", err))
				return
			}
		}
		results[i] = s.run(t, o)
		ran++
		switch {
		case !multi && results[i].failed():
			tx.Rollback()
			return
		case !multi:
		case results[i].failed():
			// Undo this operation alone. If SQLite already rolled the whole
			// transaction back (an I/O error, a full disk), the savepoint
			// is gone and so is every operation's work: fail them all.
			if _, err := t.ExecContext(ctx, `ROLLBACK TO op`); err != nil {
				tx.Rollback()
				failAll(fmt.Errorf("group commit: an operation's error ended the shared transaction: %w", err))
				return
			}
			fallthrough
		default:
			if _, err := t.ExecContext(ctx, `RELEASE op`); err != nil {
				tx.Rollback()
				failAll(fmt.Errorf("group commit: release savepoint: %w", err))
				return
			}
		}
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(len(batch)); err != nil {
			tx.Rollback()
			failAll(fmt.Errorf("commit: %w", err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		// SQLite may keep the transaction open after a failed COMMIT; end
		// it so that the next batch can begin.
		s.write.DB.ExecContext(ctx, `ROLLBACK`)
		failAll(fmt.Errorf("commit: %w", err))
		return
	}
	s.stats.ops.Add(int64(ran))
	s.stats.commits.Add(1)
	if n := int64(len(batch)); n > s.stats.maxBatch.Load() {
		s.stats.maxBatch.Store(n) // only the writer stores it
	}
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
	return result{err: o.fn(t, s.now())}
}
