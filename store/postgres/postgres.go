// Package postgres is the PostgreSQL driver of store.Store, on pgx v5: the
// store for teams that run several stateless `airlock serve` replicas
// against one database (docs/operations.md, "Running replicas").
//
// The database decides everything that can race. Every state change is one
// compare-and-set UPDATE whose deadline check reads the database's own
// clock_timestamp() — not now(), which is the transaction's start, and not
// any replica's clock. Every write appends its audit events in its own
// transaction; once it has committed, the store announces the requests it
// changed (NOTIFY, batched per replica, outside the write), so a replica
// listening with Listen (its store.ChangeFeed, in Extras) wakes its waiters for a
// decision made anywhere. Nothing in a write serializes it with other
// writes but the rows they share, so concurrent commits share the
// database's WAL flushes.
//
// It also keeps MCP agent sessions with their instructions and the work
// board, exactly as the SQLite driver does: an approved work_move command runs in the transaction that
// records its approval.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is an store.Store kept in a PostgreSQL database. It is safe for
// concurrent use, and by any number of processes sharing the database.
type Store struct {
	// Core is what the store does as the SQLite store does, over this
	// package's dialect (dialect.go) and statements.
	sqlcore.Core
	*shared
	// check is the token check the calls of a view made by Checking send
	// ahead of their first statement (tokencheck.go); nil on the store
	// Open returns.
	check *airlock.TokenCheck
}

// shared is what a store and its views (Checking) share: everything but
// the token check.
type shared struct {
	pool *pgxpool.Pool
	// clock, when set (tests only), replaces the database's clock: its time
	// is passed to every query as @now. Nil means clock_timestamp().
	clock airlock.Clock
	// schema is where the tables live (the connection's search_path).
	schema string
	// channel is the NOTIFY channel of this schema's changes.
	channel string
	// eventsLock is the advisory lock key that settles event IDs: writers
	// hold it shared, readers take it exclusively for a moment (see gate).
	eventsLock int32
	// gate shares the settling of event IDs among ListEvents callers.
	gate *gate
	// notes batches the announcements of committed changes (notifier).
	notes notes
	// fault is the test hook of WithFaultHook; nil in production.
	fault func(point string) error
	// hooks are the tests' other hooks (export_test.go); zero in production.
	hooks testHooks
	// writesFailing is whether the last write failed because the database
	// could not serve it (noteWrite); Ping then probes with a write.
	writesFailing atomic.Bool

	done      chan struct{} // closed by Close; stops Listen and the notifier
	closeOnce sync.Once
}

// testHooks let tests stop a write just before its COMMIT, drop the
// notifications of committed changes as a replica that died right after
// committing would, send them all through the notifier, change how often
// Listen reads the audit log, change how long the sequencer takes a
// settling's mark, and see every query and batch sent.
type testHooks struct {
	// beforeCommit returns a statement for a write's commit pipeline, sent
	// after its events and before its COMMIT, or "" for none.
	beforeCommit func() string
	dropNotify   func() bool
	batchNotify  bool          // always through the notifier
	listenPoll   time.Duration // 0: listenPoll
	settleLately time.Duration // 0: settleLately
	settleEvents int64         // 0: settleLatelyEvents
	tracer       pgx.QueryTracer
}

var _ store.Store = (*Store)(nil)

// Extras implements store.Store: a PostgreSQL store is shared by
// replicas, so it has a change feed (Listen) and checks tokens within a
// call's first round trip (CheckToken); it has no token stamp.
func (s *Store) Extras() store.Extras {
	return store.Extras{Feed: s, TokenCheck: s, SweepTarget: SweepTarget, SequencerGap: SequencerGap}
}

// SequencerGap is the least time between two rounds of the audit log's
// sequencer on PostgreSQL (store.Extras): a round costs the database its
// round trips, so under load it takes 50 ms of events at a time. At 20 ms,
// as on SQLite, lifecycles at 8 clients ran at 672 and 737/s against 767
// and 783/s (interleaved, 7 December).
const SequencerGap = 50 * time.Millisecond

// SweepTarget is how long an expiry sweep on PostgreSQL should take
// (store.Extras): under half the bound of 50 ms on how long a sweep may
// hold its rows' locks, leaving room for waiting for a core
// (docs/performance.md, "Scale"). On a quiet machine, 100,000 due across
// 3 replicas expired at 21,137/s with 20 ms, sweeps 41 ms at p99; with
// 25 ms, at about 20,400/s, sweeps 52–58 ms at p99.
const SweepTarget = 20 * time.Millisecond

// Defaults of the options.
const (
	// DefaultMaxConns is the pool size per replica when WithMaxConns is not
	// given. Each request holds a connection only for its few statements,
	// so a small pool serves many concurrent requests; waiters (long-polls,
	// event streams) hold none.
	DefaultMaxConns = 10
	// DefaultStatementTimeout bounds every statement, so that a stuck lock
	// or an overloaded database fails a call with an error instead of
	// holding it (and its connection) forever.
	DefaultStatementTimeout = 10 * time.Second
	// idleInTransactionTimeout ends the session of a replica that stopped
	// in the middle of a transaction (a frozen process, a network
	// partition), releasing the row locks it held. Airlock's transactions
	// last milliseconds.
	idleInTransactionTimeout = time.Minute
)

// Option configures Open.
type Option func(*config)

type config struct {
	maxConns         *int32
	statementTimeout *time.Duration
	schema           string
	clock            airlock.Clock
	fault            func(point string) error
	hooks            testHooks
}

// WithMaxConns sets the most connections the store's pool opens. Without
// it, the URL's pool_max_conns applies, else DefaultMaxConns. Listen uses
// one more connection of its own.
func WithMaxConns(n int32) Option {
	return func(c *config) { c.maxConns = &n }
}

// WithStatementTimeout sets the server-side statement_timeout of every
// connection (0 disables it). Without it, the URL's statement_timeout (in
// milliseconds) applies, else DefaultStatementTimeout.
func WithStatementTimeout(d time.Duration) Option {
	return func(c *config) { c.statementTimeout = &d }
}

// WithSchema keeps Airlock's tables in the named schema, created if missing:
// every connection sets its search_path to it. Several Airlocks (or tests)
// can then share one database without seeing each other. The default is
// the search_path of the database URL, usually public.
func WithSchema(name string) Option {
	return func(c *config) { c.schema = name }
}

// WithClock makes the store judge deadlines and stamp times by c instead of
// the database's clock_timestamp(). It exists for the conformance suite,
// which drives a fake clock; production replicas must share the database's
// clock, so never set it there.
func WithClock(c airlock.Clock) Option {
	return func(cfg *config) { cfg.clock = c }
}

// schemaName is a schema name WithSchema accepts. It is compiled on first
// use, not at start-up, which every airlock process (the hook's included)
// would pay for (docs/performance.md).
var schemaName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`) })

// Open connects to the PostgreSQL database at url (postgres://user:password@
// host:5432/dbname?sslmode=…), applies the embedded migrations it lacks, and
// returns a ready store. Replicas may open one database at the same time:
// migrations run under an advisory lock. Close the store when done.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxConns != nil && *cfg.maxConns < 1 {
		return nil, fmt.Errorf("postgres: the pool needs at least 1 connection (got %d)", *cfg.maxConns)
	}
	if cfg.statementTimeout != nil && *cfg.statementTimeout < 0 {
		return nil, fmt.Errorf("postgres: the statement timeout must not be negative (got %s)", *cfg.statementTimeout)
	}
	if cfg.schema != "" && !schemaName().MatchString(cfg.schema) {
		return nil, fmt.Errorf("postgres: schema name %q must be letters, digits and underscores, not starting with a digit, at most 63 long", cfg.schema)
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn's error already hides the password.
		return nil, fmt.Errorf("postgres: read the database URL: %w (want postgres://user:password@host:5432/dbname?sslmode=disable|require|verify-full)", err)
	}
	// The URL's own pool_max_conns and statement_timeout stand unless an
	// option says otherwise; pgxpool has consumed pool_max_conns by now.
	if cfg.maxConns != nil {
		pc.MaxConns = *cfg.maxConns
	} else if !strings.Contains(url, "pool_max_conns") {
		pc.MaxConns = DefaultMaxConns
	}
	rp := pc.ConnConfig.RuntimeParams
	if cfg.schema != "" {
		rp["search_path"] = pgx.Identifier{cfg.schema}.Sanitize()
	}
	if cfg.statementTimeout != nil {
		rp["statement_timeout"] = strconv.FormatInt(cfg.statementTimeout.Milliseconds(), 10)
	} else if rp["statement_timeout"] == "" {
		rp["statement_timeout"] = strconv.FormatInt(DefaultStatementTimeout.Milliseconds(), 10)
	}
	rp["idle_in_transaction_session_timeout"] = strconv.FormatInt(idleInTransactionTimeout.Milliseconds(), 10)
	if rp["application_name"] == "" {
		rp["application_name"] = "airlock"
	}
	if cfg.hooks.tracer != nil {
		pc.ConnConfig.Tracer = cfg.hooks.tracer
	}
	where := fmt.Sprintf("%s:%d/%s", pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)

	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect to %s: %w", where, err)
	}
	s := &Store{shared: &shared{pool: pool, clock: cfg.clock, schema: cfg.schema, fault: cfg.fault, hooks: cfg.hooks,
		gate: newGate(), done: make(chan struct{})}}
	if s.schema == "" {
		var cur *string
		if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: connect to %s: %w", where, err)
		}
		if cur == nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: %s: no schema on the search_path exists; create one or name one in the URL (?search_path=…)", where)
		}
		s.schema = *cur
	}
	s.channel = channelName(s.schema)
	s.eventsLock = lockKey(s.schema, "events")
	s.Core = sqlcore.NewCore(dialect{s}, statementsFor(s.eventsLock), cfg.fault)
	if err := applyMigrations(ctx, pool, s.schema, cfg.schema != "", s.now); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate %s (schema %s): %w", where, s.schema, err)
	}
	s.startNotifier()
	return s, nil
}

// advisoryClass is the first key of every advisory lock Airlock takes
// ("ARLK"), so that its locks do not collide with other applications'.
const advisoryClass int32 = 0x41524c4b

// lockKey returns the second key of the advisory lock named what in schema:
// replicas sharing a schema share the lock, other schemas do not.
func lockKey(schema, what string) int32 {
	h := fnv.New32a()
	h.Write([]byte(schema + "/" + what))
	return int32(h.Sum32())
}

// channelName is the NOTIFY channel of a schema: airlock_changes for
// public, and a name of its own for any other schema, so that Airlocks
// sharing a database hear only their own changes.
func channelName(schema string) string {
	if schema == "public" {
		return "airlock_changes"
	}
	h := fnv.New32a()
	h.Write([]byte(schema))
	return fmt.Sprintf("airlock_changes_%08x", h.Sum32())
}

// now is the value bound to @now in every query: nil, so that the query
// reads clock_timestamp(), unless a test clock was given.
func (s *Store) now() any {
	if s.clock == nil {
		return nil
	}
	return s.clock.Now().UTC().Truncate(time.Microsecond)
}

// Close stops any Listen, sends the notifications of changes already
// committed, and closes the pool. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		<-s.notes.stopped
		s.pool.Close()
	})
	return nil
}

// translate is the one place where pgx and PostgreSQL errors become what
// callers of store.Store see (sqlcore.Translation). Text PostgreSQL
// cannot store is the caller's invalid_request.
func translate(err error, what, id string) error { return translation.Translate(err, what, id) }

var translation = sqlcore.Translation{Driver: "postgres", Unavailable: unavailable,
	Constraint: func(err error) bool {
		pe, ok := errors.AsType[*pgconn.PgError](err)
		return ok && strings.HasPrefix(pe.Code, "23")
	},
	Own: func(err error, what, id string) error {
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && (pe.Code == "22021" || pe.Code == "22P05") {
			// character_not_in_repertoire, untranslatable_character: a NUL
			// byte or invalid UTF-8 that validation should have refused.
			return airlock.Errorf(airlock.CodeInvalidRequest,
				"%s %s: a text field holds a NUL character or invalid UTF-8, which the store cannot keep; remove it", what, id)
		}
		return nil
	},
}

// Transient failures are retried this many times in all, with a short,
// growing, jittered pause between attempts.
const (
	maxAttempts = 4
	retryPause  = 5 * time.Millisecond
)

// commitError marks a failure of COMMIT itself: the transaction may or may
// not have committed, so it is retried only when nothing reached the
// server.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// transient reports whether err left the transaction rolled back for a
// reason worth retrying: a serialization failure or deadlock the server
// rolled back, or a connection lost before COMMIT was sent (the server
// rolls back a transaction whose session ends). A lost connection during
// COMMIT is not retried: the change may have committed, and doing it again
// would answer "someone else won" for the caller's own success.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if ae, ok := errors.AsType[*airlock.Error](err); ok && ae.Code != airlock.CodeUnavailable {
		return false
	}
	if _, ok := errors.AsType[*faultError](err); ok {
		// A test's injected fault must fail the call, whatever it wraps.
		return false
	}
	_, committing := errors.AsType[*commitError](err)
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pe.Code == "40001", pe.Code == "40P01": // serialization_failure, deadlock_detected
			return true
		case committing:
			return false
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", strings.HasPrefix(pe.Code, "08"):
			// admin_shutdown, crash_shutdown, cannot_connect_now (a failover
			// or restart), connection_exception.
			return true
		}
		return false
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	if committing {
		return false
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// requestEvent queues the event of a request's change and announces the
// request. The event of a request becoming approved, denied or expired
// also queues the session's instruction (recordInstructions): every path
// to those states comes through here, so none can forget the instruction,
// and an instruction exists exactly when its decision does.
func (t *tx) requestEvent(typ airlock.EventType, actor string, at time.Time, r airlock.Request) {
	t.stateEvent(airlock.Event{Type: typ, At: at, Actor: actor, RequestID: r.ID, InstanceID: r.InstanceID, State: r.State}, r)
}

// stateEvent queues e, an event of request r, as requestEvent says.
func (t *tx) stateEvent(e airlock.Event, r airlock.Request) {
	typ := e.Type
	t.event(e)
	t.changed = append(t.changed, r.ID)
	switch typ {
	case airlock.EventRequestApproved, airlock.EventRequestDenied, airlock.EventRequestExpired:
		if r.SessionID != "" { // REST tool calls have none: no statement for them
			t.decided = append(t.decided, e)
		}
	}
}

// write runs fn in a READ COMMITTED transaction, appends the events fn
// queued and commits, retrying the whole transaction (fn included) on
// transient failures; once committed, it announces the requests fn
// changed (commit). fn must decide only with the database
// (compare-and-set statements), never with state carried from an earlier
// attempt.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, t *tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.writeOnce(ctx, fn)
		if err == nil || attempt == maxAttempts || !transient(err) {
			s.noteWrite(err)
			return err
		}
		pause := retryPause << (2 * (attempt - 1)) // 5ms, 20ms, 80ms
		pause = pause/2 + rand.N(pause)
		select {
		case <-ctx.Done():
			s.noteWrite(err)
			return err
		case <-time.After(pause):
		}
	}
}

func (s *Store) writeOnce(ctx context.Context, fn func(ctx context.Context, t *tx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	t := &tx{ctx: ctx, s: s, conn: conn, check: s.check}
	defer t.end(context.WithoutCancel(ctx))
	if err := fn(ctx, t); err != nil {
		return err
	}
	if err := recordInstructions(ctx, t); err != nil {
		return err
	}
	return s.commit(ctx, t)
}

// appendSQL appends a transaction's events, last thing before COMMIT (in
// one pipeline with it: see commit). It
// first takes the schema's events lock in shared mode, held until the
// transaction ends, so that a reader can tell how far event IDs are
// settled (see gate). Shared holders never wait for each other, so this
// does not serialize commits. Taking it last, after every row lock the
// transaction needs, keeps it out of any deadlock: a settling that waits
// for it waits only for transactions that are committing.
//
// Nothing here announces the change: NOTIFY inside a write would serialize
// every committing write in the database (PostgreSQL queues notifications
// in commit order under one lock held through the commit's WAL flush), so
// the store announces after COMMIT instead (announce).
const appendSQL = `WITH gate AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(@class, @key))
INSERT INTO events (type, at, actor, request_id, instance_id, token_id, state, subject, policy_hash, trace_id, span_id)
SELECT e.type, e.at, e.actor, e.request_id, e.instance_id, e.token_id, e.state, e.subject, e.policy_hash, e.trace_id, e.span_id
FROM gate, unnest(@types::text[], @ats::timestamptz[], @actors::text[], @requests::text[],
	@instances::text[], @tokens::text[], @states::text[], @subjects::text[], @policy_hashes::text[], @trace_ids::text[], @span_ids::text[])
	WITH ORDINALITY AS e(type, at, actor, request_id, instance_id, token_id, state, subject, policy_hash, trace_id, span_id, ord)
ORDER BY e.ord`

// appendArgs are appendSQL's arguments for t's events.
func (s *Store) appendArgs(t *tx) named {
	n := len(t.events)
	types, ats, actors := make([]string, n), make([]time.Time, n), make([]string, n)
	reqs, insts, toks, states := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	subjects, hashes := make([]string, n), make([]string, n)
	traces, spans := make([]string, n), make([]string, n)
	for i, e := range t.events {
		types[i], ats[i], actors[i] = string(e.Type), e.At, e.Actor
		reqs[i], insts[i], toks[i], states[i] = e.RequestID, e.InstanceID, e.TokenID, string(e.State)
		subjects[i], hashes[i] = e.Subject, e.PolicyHash
		traces[i], spans[i] = e.TraceID, e.SpanID
	}
	return named{
		"class": advisoryClass, "key": s.eventsLock,
		"types": types, "ats": ats, "actors": actors, "requests": reqs, "instances": insts, "tokens": toks, "states": states,
		"subjects": subjects, "policy_hashes": hashes, "trace_ids": traces, "span_ids": spans,
	}
}
