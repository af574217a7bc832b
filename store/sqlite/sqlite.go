// Package sqlite is the SQLite driver of store.Store: one file, pure Go
// (modernc.org/sqlite, no cgo), the default store of `airlock serve`.
//
// Writes go through a single connection, so they queue in Go instead of
// fighting over SQLite's lock; reads use a separate pool and, in WAL mode,
// never wait for writes. Every state change is one compare-and-set UPDATE
// judged by the injected airlock.Clock, whose now is passed to each query.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Store is an store.Store kept in one SQLite file. It is safe for
// concurrent use, and by several processes on the same file.
type Store struct {
	// Core is what the store does as the PostgreSQL store does, over this
	// package's dialect (dialect.go) and statements.
	sqlcore.Core

	// eventWatchers are called after each commit that appended events
	// (WatchEvents); watchMu orders their registrations.
	eventWatchers atomic.Pointer[[]func()]
	watchMu       sync.Mutex

	// write has exactly one connection: writers queue for it in Go, so
	// SQLite's lock is only ever contended by other processes.
	write *pool
	// read is a pool of query_only connections; in WAL mode readers see the
	// last committed state without blocking the writer.
	read  *pool
	clock airlock.Clock
	// fault is the test hook of WithFaultHook; nil in production.
	fault func(point string) error
	// beforeCommit, set by tests only, runs before each batch's COMMIT;
	// its error fails the commit.
	beforeCommit func(ops int) error

	// enqueued, set by tests only, runs after an operation is queued, or
	// before a lone one runs in its caller's goroutine (runHere).
	enqueued func()
	// batchHold is maxBatchHold; tests that need a batch kept whole under
	// the race detector's slowness raise it.
	batchHold time.Duration
	// observe is WithBatchObserver's function; nil when not set.
	observe func(Batch)
	// busyTimeout is the connections' busy timeout (WithBusyTimeout).
	busyTimeout time.Duration
	// emptyLogAfter is how long the writer waits idle before it empties
	// the log (checkpoint.go); emptied, set by tests only, observes it.
	emptyLogAfter time.Duration
	emptied       func(ok bool, took time.Duration)

	// queue holds the write operations waiting for writeLoop, the one
	// writer, in arrival order; closed refuses new ones.
	qmu    sync.Mutex
	queue  []*op
	closed bool
	// writerBusy is whether the writer's role is held: by writeLoop while
	// it runs a batch or empties the log, or by a caller running its write
	// itself because nobody else wrote or waited (runHere).
	writerBusy bool
	// lastCommit is when the last write transaction committed (Unix
	// nanoseconds): the writer empties the log once it is emptyLogAfter
	// old. logEmptied is whether the log was emptied with no commit since.
	lastCommit atomic.Int64
	logEmptied atomic.Bool
	// wake tells the writer the queue or closed changed (capacity 1, so a
	// wake-up is never lost and never blocks).
	wake       chan struct{}
	writerDone chan struct{} // closed when writeLoop has returned
	writing    bool          // writeLoop was started
	stats      writeStats

	// writesFailing is whether the last writes failed because the store
	// could not write (noteWrites); Ping then probes with a write.
	writesFailing atomic.Bool

	// path is the database file's; the token stamp lives beside it.
	path string
	// ckpt checkpoints the log beside the writer (checkpoint.go).
	ckpt *checkpointer

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// statements are the store's SQL, concern by concern.
var statements = sqlcore.Statements{Requests: requestSQL, Instances: instanceSQL, Tokens: tokenSQL, Grants: grantSQL,
	Board: boardSQL, Notify: endpointSQL, Reviewers: reviewerSQL, WebSessions: webSessionSQL,
	SigningKeys: signingKeySQL, PushKeys: pushKeySQL, TokenUses: tokenUseSQL, Audit: auditSQL, Retention: retentionSQL, Tasks: taskSQL,
	History: historySQL, Passkeys: passkeySQL}

// Extras implements store.Store: a SQLite store has a token stamp
// (tokenstamp.go) and tells its watchers of events as they commit
// (WatchEvents); it has no change feed, since one process serves its file.
func (s *Store) Extras() store.Extras {
	return store.Extras{TokenStamp: s, Events: s}
}

// WatchEvents implements store.EventWatcher: appended runs after each
// commit that appended events, with every earlier watcher's.
func (s *Store) WatchEvents(appended func()) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	var ws []func()
	if old := s.eventWatchers.Load(); old != nil {
		ws = append(ws, *old...)
	}
	ws = append(ws, appended)
	s.eventWatchers.Store(&ws)
}

// eventsAppended tells the watchers that a commit appended events.
func (s *Store) eventsAppended() {
	if ws := s.eventWatchers.Load(); ws != nil {
		for _, w := range *ws {
			w()
		}
	}
}

// Option configures Open.
type Option func(*config)

type config struct {
	clock        airlock.Clock
	busyTimeout  time.Duration
	fault        func(point string) error
	beforeCommit func(ops int) error
	enqueued     func()
	batchHold    time.Duration
	observe      func(Batch)
	checkpointed func(logPages, copied int)
	// emptyLogAfter and emptied, set by tests only, change the idle spell
	// after which the writer empties the log and observe each attempt.
	emptyLogAfter time.Duration
	emptied       func(ok bool, took time.Duration)
}

// WithClock sets the clock that judges every deadline and expires_at and
// stamps every time the store records. Tests inject a fake clock; the
// default is airlock.SystemClock.
func WithClock(c airlock.Clock) Option {
	return func(cfg *config) { cfg.clock = c }
}

// WithBusyTimeout sets how long a connection waits for another process's
// lock on the file before giving up (default 10s). Within one process the
// single write connection means it is never needed.
func WithBusyTimeout(d time.Duration) Option {
	return func(cfg *config) { cfg.busyTimeout = d }
}

// Open opens (creating if needed) the SQLite database at path, applies the
// embedded migrations it lacks, and returns a ready store. Close it when
// done.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if path == "" || path == ":memory:" {
		// Two pools on ":memory:" would be two different databases.
		return nil, fmt.Errorf("sqlite: a database file path is required (got %q)", path)
	}
	cfg := config{clock: airlock.SystemClock{}, busyTimeout: 10 * time.Second, batchHold: maxBatchHold, emptyLogAfter: emptyLogAfter}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Store{path: path, clock: cfg.clock, fault: cfg.fault, beforeCommit: cfg.beforeCommit, enqueued: cfg.enqueued, batchHold: cfg.batchHold, observe: cfg.observe,
		busyTimeout: cfg.busyTimeout, emptyLogAfter: cfg.emptyLogAfter, emptied: cfg.emptied,
		wake: make(chan struct{}, 1), writerDone: make(chan struct{})}
	s.Core = sqlcore.NewCore(dialect{s}, &statements, cfg.fault)

	wdb, err := sql.Open("sqlite", dsn(path, false, cfg.busyTimeout))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.write = newPool(wdb)
	s.write.SetMaxOpenConns(1)
	s.write.SetMaxIdleConns(1)
	s.write.SetConnMaxLifetime(0)
	s.write.SetConnMaxIdleTime(0)
	// The first write connection switches the file to WAL before the
	// readers open, and migrates it.
	if err := applyMigrations(ctx, s.write.DB, s.now); err != nil {
		s.write.Close()
		return nil, fmt.Errorf("sqlite: migrate %s: %w", path, err)
	}

	rdb, err := sql.Open("sqlite", dsn(path, true, cfg.busyTimeout))
	if err != nil {
		s.write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.read = newPool(rdb)
	n := max(4, runtime.GOMAXPROCS(0))
	s.read.SetMaxOpenConns(n)
	s.read.SetMaxIdleConns(n)
	if err := s.read.PingContext(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	cdb, err := sql.Open("sqlite", dsn(path, false, cfg.busyTimeout))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.ckpt = newCheckpointer(cdb)
	s.ckpt.checkpointed = cfg.checkpointed
	go s.ckpt.run()
	s.writing = true
	go s.writeLoop()
	return s, nil
}

// writeCacheKiB is the write connection's page cache, in KiB.
const writeCacheKiB = 64 << 10

// dsn builds the connection string. busy_timeout comes first (the driver
// applies it before any other pragma), so that switching to WAL or reading
// the schema waits for another process instead of failing with SQLITE_BUSY.
// Write connections BEGIN IMMEDIATE: a transaction takes the write lock when
// it starts, never by upgrading a read lock later — an upgrade that loses
// fails at once with SQLITE_BUSY, ignoring busy_timeout.
func dsn(path string, readOnly bool, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		// The writer's page cache: 64 MiB, not SQLite's 2 MiB default, so
		// that a sweep over a large backlog finds the pages it rewrites in
		// memory (100,000 due requests expired about twice as fast).
		q.Add("_pragma", fmt.Sprintf("cache_size(%d)", -writeCacheKiB))
		// Statement journals in memory: a statement that changes many rows
		// and may abort (the requests table's CHECKs and triggers), an
		// expiry sweep say, copies each page it first touches to one, which
		// in a temporary file was a write(2) per page — a third of a
		// sweep's time in the writer.
		q.Add("_pragma", "temp_store(MEMORY)")
		// Checkpoints run beside the writer (checkpoint.go); its own
		// automatic one is the backstop.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", backstopCheckpointPages))
		q.Set("_txlock", "immediate")
	}
	// A file: URI, with the path escaped, so that '?', '#' or '%' in a file
	// name are not read as the start of the parameters.
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// now is the store's clock, in UTC and truncated to the microsecond that it
// stores, so that what a write returns equals what a later read returns.
func (s *Store) now() time.Time {
	return s.clock.Now().UTC().Truncate(time.Microsecond)
}

// translate is the one place where database/sql and driver errors become
// what callers of store.Store see (sqlcore.Translation). A store that
// cannot serve now is one with a full disk, an I/O error, a file locked by
// another process (unavailable).
func translate(err error, what, id string) error { return translation.Translate(err, what, id) }

var translation = sqlcore.Translation{Driver: "sqlite", Unavailable: unavailable, Constraint: func(err error) bool {
	se, ok := errors.AsType[*msqlite.Error](err)
	return ok && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}}

// Close refuses new writes, lets the writer finish those already queued,
// then closes both pools. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.qmu.Lock()
		s.closed = true
		s.qmu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
		if s.writing {
			<-s.writerDone
		}
		var errs []error
		if s.ckpt != nil {
			errs = append(errs, s.ckpt.close())
		}
		if s.read != nil {
			errs = append(errs, s.read.Close())
		}
		errs = append(errs, s.write.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// micros is how times are stored: unix microseconds.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros reads a stored time back, in UTC.
func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }
