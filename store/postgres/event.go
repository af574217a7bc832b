package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
)

// Bounds for ListEvents, as in the SQLite driver.
const (
	defaultEventLimit = 100
	maxEventLimit     = 1000
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

// querier is a pool or a connection.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryAll runs a query and scans each of its rows with scan, in the
// query's order.
func queryAll[T any](ctx context.Context, q querier, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlcore.Collect(rows, func() (T, error) { return scan(rows) })
}

// ListEvents returns up to limit events with ID > after, oldest first
// (default 100, at most 1000). It returns only settled events (see gate),
// so resuming after the last ID it returned never skips an event that
// commits later, on this replica or another.
func (s *Store) ListEvents(ctx context.Context, after int64, limit int) ([]airlock.Event, error) {
	if limit <= 0 {
		limit = defaultEventLimit
	}
	limit = min(limit, maxEventLimit)
	evs, err := readEvents(ctx, checked{s}, after, math.MaxInt64, limit)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].ID <= s.gate.settled.Load() {
		return evs, translate(err, "events", "list")
	}
	upto, err := s.settledUpTo(ctx)
	if err != nil {
		return nil, translate(err, "events", "list")
	}
	evs, err = readEvents(ctx, checked{s}, after, upto, limit)
	return evs, translate(err, "events", "list")
}

// readEvents reads up to limit events with after < ID <= upto, oldest
// first.
func readEvents(ctx context.Context, q querier, after, upto int64, limit int) ([]airlock.Event, error) {
	rows, err := q.Query(ctx, `SELECT id, type, at, actor, request_id, instance_id, token_id, state, subject, policy_hash
FROM events WHERE id > @after AND id <= @upto ORDER BY id LIMIT @limit`,
		named{"after": after, "upto": upto, "limit": limit})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []airlock.Event
	for rows.Next() {
		var (
			e          airlock.Event
			typ, state string
		)
		if err := rows.Scan(&e.ID, &typ, &e.At, &e.Actor, &e.RequestID, &e.InstanceID, &e.TokenID, &state, &e.Subject, &e.PolicyHash); err != nil {
			return nil, err
		}
		e.Type, e.State, e.At = airlock.EventType(typ), airlock.State(state), e.At.UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}
