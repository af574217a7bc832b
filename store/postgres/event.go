package postgres

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// How event IDs stay safe to resume after (SSE Last-Event-ID) without
// serializing commits.
//
// Event IDs come from a sequence, drawn before their transaction commits,
// so they are not in commit order: a writer may draw 10, another draw 11
// and commit first. A reader that returned 11 and was then asked for the
// events after 11 would never return 10. The IDs a reader returns must
// therefore all be settled: every ID up to them is either committed and
// visible, or will never be.
//
// Writers take the schema's events lock in SHARED mode just before they
// append their events, and hold it until their transaction ends
// (appendSQL). Shared holders do not wait for each other, so concurrent
// commits share the database's WAL flushes as plain ones do. A reader that
// needs to know how far IDs are settled takes the same lock EXCLUSIVELY
// for a moment (settleSQL): it is granted once every writer that had
// already drawn IDs has committed or rolled back, and writers that come
// later queue behind it and draw larger IDs. The largest visible ID read
// while holding it is therefore settled, and so is every smaller one.
//
// Readers pay for that moment only when there is something new: ListEvents
// first reads without the lock, returns at once when everything it found
// is at or below the settled mark it already knows, and settles again only
// when it found newer events. Concurrent readers of one store share one
// settling (gate), and the lock is waited for at most settleLockTimeout,
// so a writer frozen between its append and its COMMIT stalls event
// readers for that long at most, never other writers.

// settleLately is how long after a settling began the audit log's
// sequencer takes its mark rather than settling again (SettleLately).
// Each settling stalls every writer for a moment: at the sequencer's pace
// under load (a round every 50 ms) its settlings made a tenth of a
// lifecycle's time in PostgreSQL (docs/performance.md, "What a lifecycle
// asks of PostgreSQL"). Its rounds then read again the events of the last
// settleLately, which have leaves; the anti-join skips them.
const settleLately = 500 * time.Millisecond

// settleLatelyEvents bounds what the sequencer reads again: past this many
// event IDs above the mark it settles, however recent the mark. Under a
// burst (a sweep expiring thousands a second) it then settles each round,
// as it did before, rather than re-read thousands of events each round.
const settleLatelyEvents = 1000

// settleLockTimeout bounds how long a settling waits for the events lock.
// Writers hold it for milliseconds; new writers queue behind a waiting
// settling, so a longer wait would stall them for as long.
const settleLockTimeout = 500 * time.Millisecond

// settleSQL is sent as one simple query, one implicit transaction: the
// lock is taken by one statement and the maximum is read by the next, with
// a snapshot taken after the lock was granted; the lock is released when
// the implicit transaction ends with the last statement.
const settleSQL = `SET LOCAL lock_timeout = %d; SELECT pg_advisory_xact_lock(%d, %d); SELECT coalesce(max(id), 0) FROM events`

// gate shares settlings between the concurrent readers of one store. A
// caller needs a settling that begins after its own unlocked read; callers
// that arrive while one runs all wait for the next one, which the first of
// them runs.
type gate struct {
	// settled is the largest event ID known to be settled.
	settled atomic.Int64
	// began is when the latest settling began (UnixNano; 0: none yet).
	began atomic.Int64
	// lead is held (a one-slot channel) by the caller running a settling.
	lead chan struct{}

	mu   sync.Mutex
	next *settling // the settling that new callers join; nil until one joins
}

// settling is one run of settleSQL that callers wait for.
type settling struct {
	done chan struct{}
	upto int64
	err  error
}

func newGate() *gate { return &gate{lead: make(chan struct{}, 1)} }

// raise records that IDs up to n are settled.
func (g *gate) raise(n int64) {
	for {
		cur := g.settled.Load()
		if n <= cur || g.settled.CompareAndSwap(cur, n) {
			return
		}
	}
}

// settledUpTo returns an ID up to which every event is settled, from a
// settling that began after settle was called.
func (s *Store) settledUpTo(ctx context.Context) (int64, error) {
	g := s.gate
	g.mu.Lock()
	c := g.next
	if c == nil {
		c = &settling{done: make(chan struct{})}
		g.next = c
	}
	g.mu.Unlock()
	for {
		select {
		case <-c.done:
			return c.upto, c.err
		case <-ctx.Done():
			return 0, ctx.Err()
		case g.lead <- struct{}{}:
		}
		// Leading: run the settling that callers are waiting for, unless
		// it already ran (then c.done is closed, and the loop returns).
		g.mu.Lock()
		mine := g.next == c
		if mine {
			g.next = nil
		}
		g.mu.Unlock()
		if mine {
			// Others wait on this run too: it must not end with this
			// caller's context.
			g.began.Store(time.Now().UnixNano())
			c.upto, c.err = s.runSettle(context.WithoutCancel(ctx))
			if c.err == nil {
				g.raise(c.upto)
			}
			close(c.done)
		}
		<-g.lead
	}
}

// runSettle runs settleSQL on a connection of the pool.
func (s *Store) runSettle(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, settleLockTimeout+DefaultStatementTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	q := fmt.Sprintf(settleSQL, settleLockTimeout.Milliseconds(), advisoryClass, s.eventsLock)
	results, err := conn.Conn().PgConn().Exec(ctx, q).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("settle event IDs (the events lock is held by a transaction that does not finish, or the database is unreachable): %w", err)
	}
	if len(results) != 3 || len(results[2].Rows) != 1 || len(results[2].Rows[0]) != 1 {
		return 0, fmt.Errorf("settle event IDs: unexpected reply to %q", q)
	}
	return strconv.ParseInt(string(results[2].Rows[0][0]), 10, 64)
}
