package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TxForTest is what WriteForTest's fn may run statements on.
type TxForTest interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// WriteForTest runs fn in one of the store's write transactions, with its
// retries, so tests can break a transaction on purpose.
func (s *Store) WriteForTest(ctx context.Context, fn func(ctx context.Context, tx TxForTest) error) error {
	return s.write(ctx, func(ctx context.Context, t *tx) error { return fn(ctx, t) })
}

// MaxAttempts is how many times a transient failure is tried in all.
const MaxAttempts = maxAttempts

// PoolForTest exposes the store's pool, so tests can check its settings.
func (s *Store) PoolForTest() *pgxpool.Pool { return s.pool }

// WithBeforeCommitForTest calls f as every write builds its commit
// pipeline; a statement f returns ("" for none) runs in that pipeline after
// the write's events are appended and before its COMMIT. A statement that
// waits (for a lock the test holds) holds the write there, on the path
// production runs.
func WithBeforeCommitForTest(f func() string) Option {
	return func(c *config) { c.hooks.beforeCommit = f }
}

// WithDroppedNotificationsForTest drops the notifications of committed
// changes while drop returns true, as a replica that died between its
// COMMIT and its NOTIFY would.
func WithDroppedNotificationsForTest(drop func() bool) Option {
	return func(c *config) { c.hooks.dropNotify = drop }
}

// Settled returns the largest event ID the store knows to be settled.
func (s *Store) Settled() int64 { return s.gate.settled.Load() }

// ListenPoll is how often Listen reads the audit log.
const ListenPoll = listenPoll

// WithListenPollForTest makes Listen read the audit log every d instead of
// every ListenPoll; tests of notifications alone set it long.
func WithListenPollForTest(d time.Duration) Option {
	return func(c *config) { c.hooks.listenPoll = d }
}

// WithSettleLatelyForTest makes the sequencer take a settling's mark for
// d after it began and while fewer than events IDs behind, instead of for
// settleLately and settleLatelyEvents.
func WithSettleLatelyForTest(d time.Duration, events int64) Option {
	return func(c *config) { c.hooks.settleLately, c.hooks.settleEvents = d, events }
}

// EventsLockForTest returns the two keys of the schema's events lock, as
// pg_locks shows them (classid, objid).
func (s *Store) EventsLockForTest() (classid, objid int64) {
	return int64(uint32(advisoryClass)), int64(uint32(s.eventsLock))
}

// WithBatchedNotificationsForTest sends every notification through the
// notifier, never in a write's own commit pipeline.
func WithBatchedNotificationsForTest() Option {
	return func(c *config) { c.hooks.batchNotify = true }
}

// The expiry statements, for TestExpiryPlans.
var (
	ExpireDueSQLForTest    = statements().Requests.ExpireDue
	NextDeadlineSQLForTest = statements().Requests.NextDeadline
)

// WithTracerForTest sees every query and batch the store's pool sends
// (pgx.QueryTracer, and pgx.BatchTracer if t is one).
func WithTracerForTest(t pgx.QueryTracer) Option {
	return func(c *config) { c.hooks.tracer = t }
}

// HistorySQLForTest are the history's statements (sqlcore.HistorySQL).
var HistorySQLForTest = func() (times, timesBy, calls string) {
	q := statements().History
	return q.Times, q.TimesBy, q.Calls
}
