package postgres_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// open opens a store on schema, closed when t ends.
func open(t testing.TB, schema string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), testkit.PostgresURL(t), append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openFresh opens a store on a new schema, and names the schema, for
// connections of the test's own to it.
func openFresh(t testing.TB, opts ...postgres.Option) (*postgres.Store, string) {
	t.Helper()
	schema := testkit.SchemaName(t, "t_")
	return open(t, schema, opts...), schema
}

// TestStore is T01 and the rest of the conformance suite on PostgreSQL.
func TestStore(t *testing.T) {
	t.Parallel()
	testkit.PostgresURL(t) // one skip (or, under CI, one failure) rather than one per case
	storetest.Run(t, func(t *testing.T, clock airlock.Clock) store.Store {
		return open(t, testkit.SchemaName(t, "t_"), postgres.WithClock(clock))
	})
}

// TestReplicas runs the suite of two stores sharing one database on two
// stores on one schema, as two replicas share it: two pools, the
// database's clock, its row locks and SKIP LOCKED sweeps.
func TestReplicas(t *testing.T) {
	t.Parallel()
	testkit.PostgresURL(t)
	storetest.RunReplicas(t, storetest.Replicas{Open: func(t *testing.T) (store.Store, store.Store) {
		schema := testkit.SchemaName(t, "t_")
		return open(t, schema), open(t, schema)
	}, OpenN: func(t *testing.T, n int) []store.Store {
		schema := testkit.SchemaName(t, "t_")
		out := make([]store.Store, n)
		for i := range out {
			out[i] = open(t, schema)
		}
		return out
	}})
}

// TestExtras: a PostgreSQL store has a change feed and checks tokens
// within a call's first round trip, which the conformance suite checks
// (Extras/Feed, Extras/TokenCheck); it has no token stamp.
func TestExtras(t *testing.T) {
	t.Parallel()
	s := open(t, testkit.SchemaName(t, "t_"))
	if x := s.Extras(); x.Feed == nil || x.TokenCheck == nil || x.TokenStamp != nil {
		t.Errorf("Extras = %+v, want the change feed and the token check", x)
	}
}

// TestStoreMCP is the conformance suite of the MCP features on
// PostgreSQL: sessions and instructions, the work board, and work_move
// commands applied in their approval's transaction, with T12 (a fault
// injected between recording an approval and its command's effect).
func TestStoreMCP(t *testing.T) {
	t.Parallel()
	testkit.PostgresURL(t)
	storetest.RunMCP(t, func(t *testing.T, clock airlock.Clock, fault func(string) error) store.Store {
		return open(t, testkit.SchemaName(t, "t_"), postgres.WithClock(clock), postgres.WithFaultHook(fault))
	})
}

// conn opens a plain connection to schema for tests that look under the
// store, closed when t ends.
func conn(t testing.TB, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	c, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// instance creates an instance owned by owner.
func instance(t testing.TB, s store.Store, owner string) airlock.Instance {
	t.Helper()
	in, err := s.CreateInstance(t.Context(), airlock.Instance{OwnerID: owner, Name: "worker"}, owner)
	if err != nil {
		t.Fatalf("CreateInstance: %v", err)
	}
	return in
}

// params returns a new request on in with a fresh key, changed by mods.
func params(in airlock.Instance, mods ...func(*store.NewRequestParams)) store.NewRequestParams {
	key := airlock.NewID("key_")
	p := store.NewRequestParams{
		Request: airlock.Request{ID: airlock.NewID(airlock.PrefixRequest), InstanceID: in.ID, OwnerID: in.OwnerID,
			Kind: airlock.KindToolCall, Tool: "shell.exec", Arguments: json.RawMessage(`{"cmd":"ls"}`), Timeout: "1h",
			IdempotencyKey: key, Fingerprint: "fp_" + key},
		Window: time.Hour,
		Actor:  in.OwnerID,
	}
	for _, m := range mods {
		m(&p)
	}
	return p
}

// seed creates n requests on in, eight at a time, and returns them in
// creation order.
func seed(t testing.TB, s store.Store, in airlock.Instance, n int, mods ...func(*store.NewRequestParams)) []airlock.Request {
	t.Helper()
	out := make([]airlock.Request, n)
	testkit.ForEach(n, 8, func(_, i int) {
		r, created, err := s.CreateRequest(t.Context(), params(in, mods...))
		if err != nil || !created {
			t.Errorf("CreateRequest = created %v, %v", created, err)
			return
		}
		out[i] = r
	})
	if t.Failed() {
		t.FailNow()
	}
	slices.SortFunc(out, func(a, b airlock.Request) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

func code(err error) string {
	e, ok := errors.AsType[*airlock.Error](err)
	if !ok {
		return fmt.Sprintf("%v", err)
	}
	return fmt.Sprintf("%s/%s", e.Code, e.State)
}

// TestOpenTogether starts three replicas on a new schema at once: each
// migration is applied exactly once, and all three work.
func TestOpenTogether(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	stores := make([]*postgres.Store, 3)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), testkit.PostgresURL(t), postgres.WithSchema(schema))
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
				return
			}
			stores[i] = s
		})
	}
	wg.Wait()
	for _, s := range stores {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	var versions []int
	rows, err := conn(t, schema).Query(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range versions {
		if v != i+1 {
			t.Fatalf("schema_migrations = %v, want 1, 2, … once each", versions)
		}
	}
	for i, s := range stores {
		if err := s.Ping(t.Context()); err != nil {
			t.Errorf("store %d: Ping: %v", i, err)
		}
		instance(t, s, "tok_a")
	}
	all, err := stores[0].ListInstances(t.Context(), "")
	if err != nil || len(all) != 3 {
		t.Fatalf("ListInstances = %d, %v; want the 3 made through 3 replicas", len(all), err)
	}
}

// TestReopenKeepsData closes a store and opens the schema again: nothing
// to migrate, everything still there.
func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	storetest.Reopen(t, func(t *testing.T) store.Store { return open(t, schema) })
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	open(t, schema).Close()
	if _, err := conn(t, schema).Exec(t.Context(),
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', now())`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(t.Context(), testkit.PostgresURL(t), postgres.WithSchema(schema))
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open on a newer schema = %v, want an error saying it is newer", err)
	}
}

// TestOpenErrors checks that Open's refusals say what to fix.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dbURL := testkit.PostgresURL(t)
	for _, tc := range []struct {
		name string
		url  string
		opts []postgres.Option
		want string
	}{
		{"unreadable URL", "postgres://a b@:x/", nil, "postgres://user:password@host"},
		{"bad schema name", dbURL, []postgres.Option{postgres.WithSchema("x; DROP TABLE y")}, "schema name"},
		{"no connections", dbURL, []postgres.Option{postgres.WithMaxConns(0)}, "at least 1 connection"},
		{"nobody listening", "postgres://postgres:secret-pw@127.0.0.1:1/test?sslmode=disable&connect_timeout=5", nil, "127.0.0.1:1/test"},
	} {
		s, err := postgres.Open(t.Context(), tc.url, tc.opts...)
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded, want an error", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("%s: Open = %q, want it to mention %q and never the password", tc.name, err, tc.want)
		}
	}
}

// TestSchemaGuards checks the schema's own defences: even a query that
// forgot its WHERE state = 'pending' cannot rewrite a terminal request,
// approve at or after the deadline, or touch the audit log.
func TestSchemaGuards(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	in := instance(t, s, "tok_a")
	r, _, err := s.CreateRequest(t.Context(), params(in))
	if err != nil {
		t.Fatal(err)
	}
	pending, _, err := s.CreateRequest(t.Context(), params(in))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(t.Context(), store.DecideParams{ID: r.ID, Status: airlock.StateDenied, Actor: "tok_r"}); err != nil {
		t.Fatal(err)
	}
	c := conn(t, schema)
	for _, q := range []string{
		`UPDATE requests SET state = 'approved', expires_at = decided_at + interval '1 minute' WHERE id = '` + r.ID + `'`,
		`UPDATE requests SET note = 'rewritten' WHERE id = '` + r.ID + `'`,
		`UPDATE requests SET state = 'approved', decided_at = deadline_at, decided_by = 'x', expires_at = deadline_at + interval '1 minute' WHERE id = '` + pending.ID + `'`,
		`UPDATE requests SET state = 'approved', decided_at = created_at, decided_by = 'x' WHERE id = '` + pending.ID + `'`,
		`UPDATE events SET actor = 'z'`,
		`DELETE FROM events`,
		`TRUNCATE events`,
		// Payloads change only by one purge of a decided request (0023).
		`UPDATE requests SET arguments = '{"a":2}' WHERE id = '` + r.ID + `'`,
		`UPDATE requests SET arguments_digest = 'sha256:x' WHERE id = '` + r.ID + `'`,
		`UPDATE requests SET purged_at = now(), arguments = NULL, agent_reasoning = '', context = '{"c":1}' WHERE id = '` + r.ID + `'`,
		`UPDATE requests SET purged_at = now(), arguments = NULL, agent_reasoning = '', context = NULL WHERE id = '` + pending.ID + `'`,
	} {
		if _, err := c.Exec(t.Context(), q); err == nil {
			t.Errorf("%s succeeded, want the schema to refuse it", q)
		}
	}
	if _, err := c.Exec(t.Context(), `UPDATE requests SET purged_at = now(), arguments = NULL, agent_reasoning = '', context = NULL WHERE id = '`+r.ID+`'`); err != nil {
		t.Fatalf("a purge of a decided request: %v", err)
	}
	for _, q := range []string{
		`UPDATE requests SET purged_at = NULL WHERE id = '` + r.ID + `'`,
		`UPDATE requests SET reasoning_digest = 'sha256:y' WHERE id = '` + r.ID + `'`,
	} {
		if _, err := c.Exec(t.Context(), q); err == nil {
			t.Errorf("%s succeeded, want a purged request to stay purged", q)
		}
	}
}

// dbNow reads the database's clock.
func dbNow(t testing.TB, c *pgx.Conn) time.Time {
	t.Helper()
	var now time.Time
	if err := c.QueryRow(t.Context(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// TestDatabaseClock checks that, without a test clock, the database's
// clock_timestamp() judges and stamps: times come from it, and a decision
// that had to wait for a row lock past the deadline is refused — it is
// judged when it gets the lock, not when its statement (or its
// transaction, as now() would) began.
func TestDatabaseClock(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	c := conn(t, schema)
	in := instance(t, s, "tok_a")

	t.Run("stamps", func(t *testing.T) {
		before := dbNow(t, c)
		r, _, err := s.CreateRequest(t.Context(), params(in))
		if err != nil {
			t.Fatal(err)
		}
		d, err := s.Decide(t.Context(), store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"})
		if err != nil {
			t.Fatal(err)
		}
		after := dbNow(t, c)
		if r.CreatedAt.Before(before) || d.Decision.DecidedAt.After(after) || d.Decision.DecidedAt.Before(r.CreatedAt) ||
			!r.DeadlineAt.Equal(r.CreatedAt.Add(time.Hour)) || !d.Decision.ExpiresAt.Equal(d.Decision.DecidedAt.Add(time.Minute)) {
			t.Fatalf("created %v, decided %v, expires %v; want within the database's %v … %v", r.CreatedAt, d.Decision.DecidedAt, d.Decision.ExpiresAt, before, after)
		}
		if r.CreatedAt.Location() != time.UTC || r.CreatedAt.Nanosecond()%1000 != 0 {
			t.Fatalf("CreatedAt = %v, want UTC microseconds", r.CreatedAt)
		}
	})

	t.Run("a decision waiting for a lock is judged after it", func(t *testing.T) {
		r, _, err := s.CreateRequest(t.Context(), params(in, func(p *store.NewRequestParams) { p.Window = 300 * time.Millisecond }))
		if err != nil {
			t.Fatal(err)
		}
		// Another session holds the row, as a replica stalled mid-write would.
		judgedAfterLock(t, schema, `SELECT 1 FROM requests WHERE id = $1 FOR UPDATE`, r.ID, r.DeadlineAt, "decision", func() error {
			_, err := s.Decide(t.Context(), store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"})
			return err
		})
	})
}

// judgedAfterLock runs write while another session of schema holds lock
// (a statement that locks a row, with arg), until the database's clock has
// passed deadline; then it releases the lock. write, judged when it gets
// the lock, must be refused deadline_passed (expired). It skips t when the
// machine was too slow to start write before the deadline; what names the
// write, for messages.
func judgedAfterLock(t *testing.T, schema, lock, arg string, deadline time.Time, what string, write func() error) {
	t.Helper()
	holder, holderPID := holdLock(t, conn(t, schema), lock, arg)
	done := make(chan error, 1)
	go func() { done <- write() }()
	watcher := conn(t, schema)
	waitBlocked(t, watcher, holderPID, "the "+what+" to wait for the lock")
	if dbNow(t, watcher).After(deadline) {
		holder.Rollback(t.Context())
		<-done
		t.Skip("the machine was too slow to start the " + what + " before the deadline")
	}
	testkit.Eventually(t, 10*time.Second, "the deadline", func() bool { return !dbNow(t, watcher).Before(deadline) })
	if err := holder.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if e, ok := errors.AsType[*airlock.Error](err); !ok || e.Code != airlock.CodeDeadlinePassed || e.State != airlock.StateExpired {
		t.Fatalf("%s that got its lock after the deadline = %v, want deadline_passed (expired)", what, err)
	}
}

// holdLock runs lock (a statement that locks rows, with args) in a
// transaction of its own on c, which it returns with c's backend PID; the
// transaction is rolled back when t ends, if it has not been before.
func holdLock(t *testing.T, c *pgx.Conn, lock string, args ...any) (pgx.Tx, int32) {
	t.Helper()
	var pid int32
	if err := c.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), lock, args...); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// waitBlocked waits, watching on watcher, until some session waits for a
// lock that backend pid holds.
func waitBlocked(t *testing.T, watcher *pgx.Conn, pid int32, what string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what, func() bool {
		var n int
		if err := watcher.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE $1 = ANY (pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// TestChangeFeed checks Listen's notifications: a decision through store
// B is heard by a listener on store A, so are creations committed close
// together (announced together), and a change too large for one
// notification still reaches it — whether B sends them in its commits'
// pipelines or through its notifier.
func TestChangeFeed(t *testing.T) {
	t.Parallel()
	t.Run("sent with the commit or batched", func(t *testing.T) {
		t.Parallel()
		testChangeFeed(t)
	})
	t.Run("batched", func(t *testing.T) {
		t.Parallel()
		testChangeFeed(t, postgres.WithBatchedNotificationsForTest())
	})
}

func testChangeFeed(t *testing.T, writerOpts ...postgres.Option) {
	schema := testkit.SchemaName(t, "t_")
	// A reads the audit log only once an hour: what it hears here, it
	// heard from notifications.
	a, b := open(t, schema, postgres.WithListenPollForTest(time.Hour)), open(t, schema, writerOpts...)
	in := instance(t, b, "tok_a")

	heard := make(chan []string, 64)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan error, 1)
	go func() {
		listening <- a.Listen(ctx, func(ids []string) { heard <- ids })
	}()
	defer func() {
		cancel()
		if err := <-listening; err != nil {
			t.Errorf("Listen after its context ended = %v, want nil", err)
		}
	}()
	hear := func(t *testing.T, want ...string) {
		t.Helper()
		missing := map[string]bool{}
		for _, id := range want {
			missing[id] = true
		}
		timeout := time.After(5 * time.Second)
		for len(missing) > 0 {
			select {
			case ids := <-heard:
				if ids == nil {
					t.Fatalf("heard a re-read-everything signal, want IDs %v", want)
				}
				for _, id := range ids {
					delete(missing, id)
				}
			case <-timeout:
				t.Fatalf("%d of %d IDs not heard within 5s", len(missing), len(want))
			}
		}
	}

	select {
	case ids := <-heard:
		if ids != nil {
			t.Fatalf("first call = %v, want nil: once listening, waiters re-read what they may have missed", ids)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen never said it was listening")
	}

	r, _, err := b.CreateRequest(t.Context(), params(in))
	if err != nil {
		t.Fatal(err)
	}
	hear(t, r.ID)
	start := time.Now()
	if _, err := b.Decide(t.Context(), store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"}); err != nil {
		t.Fatal(err)
	}
	hear(t, r.ID)
	t.Logf("decision on B heard on A after %v", time.Since(start))

	// 300 creations, eight at a time: commits close together are announced
	// together, and every one is heard.
	rs := seed(t, b, in, 300)
	hear(t, ids(rs)...)
	// 300 cancellations in one transaction: more than one payload's worth.
	if _, err := b.DeleteInstance(t.Context(), in.ID, "tok_a"); err != nil {
		t.Fatal(err)
	}
	hear(t, ids(rs)...)
}

func ids(rs []airlock.Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// TestListenAfterADroppedConnection cuts the listener's connection: Listen
// returns an error, and listening again starts with changed(nil), the
// signal to re-read whatever was missed meanwhile.
func TestListenAfterADroppedConnection(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	c := conn(t, schema)
	heard := make(chan []string, 16)
	errs := make(chan error, 1)
	go func() { errs <- s.Listen(t.Context(), func(ids []string) { heard <- ids }) }()
	if ids := <-heard; ids != nil {
		t.Fatalf("first call = %v, want nil", ids)
	}
	var pids []int32
	testkit.Eventually(t, 10*time.Second, "the listener's session", func() bool {
		rows, err := c.Query(t.Context(), `SELECT pid FROM pg_stat_activity WHERE query = $1`,
			`LISTEN "`+channelOf(t, c)+`"`)
		if err != nil {
			t.Fatal(err)
		}
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		return len(pids) == 1
	})
	if _, err := c.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, pids[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("Listen on a dropped connection returned nil, want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not notice its connection was dropped")
	}

	ctx, cancel := context.WithCancel(t.Context())
	go func() { errs <- s.Listen(ctx, func(ids []string) { heard <- ids }) }()
	if ids := <-heard; ids != nil {
		t.Fatalf("first call after reconnecting = %v, want nil", ids)
	}
	cancel()
	if err := <-errs; err != nil {
		t.Fatalf("Listen = %v after its context ended, want nil", err)
	}
}

// channelOf is the NOTIFY channel of the connection's schema, as the store
// names it.
func channelOf(t testing.TB, c *pgx.Conn) string {
	t.Helper()
	var schema string
	if err := c.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	h := fnv.New32a()
	h.Write([]byte(schema))
	return fmt.Sprintf("airlock_changes_%08x", h.Sum32())
}

// TestAgreesWithSQLite runs one script of edge cases through both drivers,
// on the same fake clock, and requires the same answers, value for value:
// JSON bytes (huge numbers, exponents, unicode, escapes, whitespace), text
// in every field, times at microsecond precision truncated (not rounded)
// from nanoseconds, decisions, executions, tokens and the audit log.
func TestAgreesWithSQLite(t *testing.T) {
	t.Parallel()
	agree(t, agreeScript)
}

// agree runs script on a PostgreSQL store and on a SQLite store, each on
// a fake clock started at agreeEpoch, and requires the same observations
// of both, value for value.
func agree(t *testing.T, script func(*testing.T, store.Store, *storetest.FakeClock) []observation) {
	t.Helper()
	clockPG := storetest.NewFakeClock(agreeEpoch)
	pg := open(t, testkit.SchemaName(t, "t_"), postgres.WithClock(clockPG))
	clockLite := storetest.NewFakeClock(agreeEpoch)
	lite, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"), sqlite.WithClock(clockLite))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })

	got, want := script(t, pg, clockPG), script(t, lite, clockLite)
	if len(got) != len(want) {
		t.Fatalf("PostgreSQL made %d observations, SQLite %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("observation %d (%s):\n postgres %s\n sqlite   %s", i, want[i].what, show(got[i].value), show(want[i].value))
		}
	}
}

// agreeEpoch has nanoseconds on purpose: both stores must truncate them.
var agreeEpoch = time.Date(2031, time.December, 31, 23, 59, 59, 999999999, time.UTC)

type observation struct {
	what  string
	value any
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// agreeScript runs the edge cases on s and returns what it saw, with the
// values each driver numbers its own way (Seq, event IDs) zeroed.
func agreeScript(t *testing.T, s store.Store, clock *storetest.FakeClock) []observation {
	ctx := t.Context()
	var obs []observation
	see := func(what string, v any, err error) {
		if err != nil {
			obs = append(obs, observation{what, "error " + code(err)})
			return
		}
		switch x := v.(type) {
		case airlock.Request:
			x.Seq = 0
			v = x
		case []airlock.Request:
			for i := range x {
				x[i].Seq = 0
			}
		case []airlock.Event:
			for i := range x {
				x[i].ID, x[i].UID = 0, "" // each store numbers and draws its own
			}
		}
		obs = append(obs, observation{what, v})
	}

	in, err := s.CreateInstance(ctx, airlock.Instance{ID: "ins_edge", OwnerID: "tok_a", Name: "büro ⚙ 工作站",
		Metadata: json.RawMessage(`{"host" : "h\u00e9",	"ids":[1e2, 1E-2, -0]}`)}, "tok_a")
	see("create instance", in, err)

	big := `{"n":123456789012345678901234567890123456789,"f":1.7976931348623157e308,"over":1e400,"tiny":5e-324,` +
		`"negzero":-0,"neg0f":-0.0,"exp":1E+2,"frac":0.1000000000000000055511151231257827}`
	uni := "{\n\t\"emoji\": \"🛫 \\ud83d\\ude80\",\n\t\"rtl\": \"\u202eevil\u202c\",\n\t\"zw\": \"a\u200bb\u2060c\",\n" +
		"\t\"nfd\": \"e\u0301\", \"nfc\": \"\u00e9\", \"cjk\": \"審査\", \"max\": \"\U0010ffff\", \"nonchar\": \"\uffff\",\n" +
		"\t\"esc\": \"\\u2028\\u2029\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"ls\": \"\u2028\"\n}"
	huge := `{"blob":"` + strings.Repeat("ab✓", 90000) + `"}`
	mk := func(id string, mods ...func(*store.NewRequestParams)) store.NewRequestParams {
		p := store.NewRequestParams{
			Request: airlock.Request{ID: id, InstanceID: in.ID, OwnerID: in.OwnerID, Kind: airlock.KindToolCall,
				Tool: "pay.refund", Arguments: json.RawMessage(`{}`), Timeout: "PT10M",
				AgentReasoning: "The customer was charged twice —\nsee ticket «42»\ttab", IdempotencyKey: "key_" + id, Fingerprint: "fp_" + id},
			Window: 10*time.Minute + 999*time.Nanosecond,
			Actor:  in.OwnerID,
		}
		for _, m := range mods {
			m(&p)
		}
		return p
	}
	create := func(what string, p store.NewRequestParams) airlock.Request {
		r, created, err := s.CreateRequest(ctx, p)
		shown := r
		shown.Seq = 0 // PostgreSQL's sequence skips a number on a replay
		see(what, []any{shown, created}, err)
		return r
	}
	r1 := create("big numbers", mk("apr_big", func(p *store.NewRequestParams) { p.Request.Arguments = json.RawMessage(big) }))
	clock.Advance(1500 * time.Nanosecond)
	r2 := create("unicode", mk("apr_uni", func(p *store.NewRequestParams) {
		p.Request.Arguments, p.Request.Context = json.RawMessage(uni), json.RawMessage(`{"observed": "ünï", "n": 10000000000000000000001}`)
	}))
	r3 := create("huge", mk("apr_huge", func(p *store.NewRequestParams) { p.Request.Arguments = json.RawMessage(huge) }))
	r4 := create("mcp fields", mk("apr_mcp", func(p *store.NewRequestParams) {
		r := &p.Request
		r.Kind, r.Tool, r.Arguments = airlock.KindWorkChange, "work_move", json.RawMessage(`{"itemId":"wi_1",  "columnKey":"done"}`)
		r.Title, r.Description, r.TargetType, r.TargetID, r.SessionID = "Move «Ship it» ✅", "line one\nline two", "work_item", "wi_1", "ses_x"
		r.Proposal = &airlock.Proposal{Mode: "command", Command: &airlock.Command{Method: "work_move", Input: json.RawMessage(`{"itemId":"wi_1",  "columnKey":"done"}`)}}
	}))
	rq := create("advisory question", mk("apr_q", func(p *store.NewRequestParams) {
		r := &p.Request
		r.Kind, r.Tool, r.Arguments = airlock.KindAgentRequest, "", nil
		r.Proposal, r.Question = &airlock.Proposal{Mode: "advisory"}, &airlock.Question{Choices: []string{"blue 🔵", "grün", "\u202e"}}
	}))
	create("policy approval", mk("apr_pol", func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Note: "read-only ✓", Validity: time.Minute + 1500*time.Nanosecond}
	}))
	create("replay", mk("apr_other_id", func(p *store.NewRequestParams) {
		p.Request.IdempotencyKey, p.Request.Fingerprint = "key_apr_big", "fp_apr_big"
	}))
	create("conflict", mk("apr_other_id", func(p *store.NewRequestParams) {
		p.Request.IdempotencyKey = "key_apr_big"
	}))

	clock.Advance(time.Second + 1*time.Nanosecond)
	d, err := s.Decide(ctx, store.DecideParams{ID: rq.ID, Status: airlock.StateApproved, Note: "sí", Answer: "grün",
		Validity: time.Minute, Actor: "tok_r"})
	see("answer", d, err)
	d, err = s.Decide(ctx, store.DecideParams{ID: r1.ID, Status: airlock.StateApproved, Note: "ok — 承認",
		Validity: 90*time.Second + 999*time.Nanosecond, Actor: "tok_r"})
	see("approve", d, err)
	clock.Set(d.Decision.ExpiresAt.Add(-time.Microsecond))
	r, err := s.ClaimExecution(ctx, r1.ID, "tok_a", nil)
	see("claim at expires_at-1µs", r, err)
	r, err = s.ClaimExecution(ctx, r1.ID, "tok_a", nil)
	see("second claim", r, err)
	clock.Advance(time.Hour)
	r, err = s.ReportExecution(ctx, r1.ID, airlock.ReportInput{Status: airlock.ExecSucceeded, Detail: "exit 0 ✓\n"}, "tok_a")
	see("report", r, err)

	clock.Set(r2.DeadlineAt.Add(-time.Microsecond))
	r, err = s.Cancel(ctx, r2.ID, "tok_a")
	see("cancel at deadline-1µs", r, err)
	clock.Set(r3.DeadlineAt)
	r, err = s.Decide(ctx, store.DecideParams{ID: r3.ID, Status: airlock.StateDenied, Actor: "tok_r"})
	see("deny at the deadline", r, err)
	r, err = s.GetRequest(ctx, r3.ID)
	see("expired by the refused denial", r, err)
	clock.Advance(time.Hour)
	rs, err := s.ExpireDue(ctx, 10)
	see("sweep", rs, err)
	next, ok, err := s.NextDeadline(ctx)
	see("next deadline", []any{next, ok}, err)
	rs, _, err = s.ListRequests(ctx, store.RequestFilter{Limit: 100})
	see("list", rs, err)
	r, err = s.GetRequest(ctx, r4.ID)
	see("get", r, err)

	got, err := s.GetInstance(ctx, in.ID)
	see("get instance", got, err)
	ins, err := s.ListInstances(ctx, "tok_a")
	see("list instances", ins, err)
	clock.Set(agreeEpoch.Add(48 * time.Hour))
	in2, err := s.CreateInstance(ctx, airlock.Instance{ID: "ins_two", OwnerID: "tok_a", Name: "two"}, "tok_a")
	see("second instance", in2, err)
	create("on the second", mk("apr_two", func(p *store.NewRequestParams) { p.Request.InstanceID = in2.ID }))
	cancelled, err := s.DeleteInstance(ctx, in2.ID, "tok_admin")
	see("delete instance", cancelled, err)

	hash := []byte{0x00, 0xff, 0x10, 0x00, 0x7f}
	see("create token", nil, s.CreateToken(ctx, airlock.Token{ID: "tok_x", Name: "ci ⚙", Role: airlock.RoleAgent,
		Scopes: []string{airlock.ScopeWorkWrite}, Principal: "alice", Hash: hash, CreatedBy: "tok_admin"}))
	see("put token", nil, s.PutToken(ctx, airlock.Token{ID: "tok_boot", Name: "boot", Role: airlock.RoleAdmin,
		Hash: airlock.HashSecret("s"), CreatedAt: agreeEpoch.Add(time.Nanosecond), CreatedBy: "system"}))
	tok, err := s.RevokeToken(ctx, "tok_x", "tok_admin")
	see("revoke token", tok, err)
	tok, err = s.TokenByHash(ctx, hash)
	see("token by hash", tok, err)
	toks, err := s.ListTokens(ctx)
	see("list tokens", toks, err)

	evs, err := s.ListEvents(ctx, 0, 1000)
	see("events", evs, err)
	return obs
}

// TestRetriesTransientFailures breaks write transactions the ways a busy
// or failing-over database does: they are retried (a bounded number of
// times) and commit once.
func TestRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	insert := func(ctx context.Context, tx postgres.TxForTest, id string) error {
		_, err := tx.Exec(ctx, `INSERT INTO instances (id, owner_id, name, created_at) VALUES ($1, 'tok_a', 'x', now())`, id)
		return err
	}
	count := func(id string) int {
		var n int
		if err := conn(t, schema).QueryRow(t.Context(), `SELECT count(*) FROM instances WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("connection killed mid-transaction", func(t *testing.T) {
		attempts := 0
		err := s.WriteForTest(t.Context(), func(ctx context.Context, tx postgres.TxForTest) error {
			attempts++
			if err := insert(ctx, tx, "ins_killed"); err != nil {
				return err
			}
			if attempts == 1 {
				_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
				return err
			}
			return nil
		})
		if err != nil || attempts != 2 || count("ins_killed") != 1 {
			t.Fatalf("after a killed connection: %v, %d attempts, %d rows; want success on the 2nd attempt, 1 row", err, attempts, count("ins_killed"))
		}
	})

	t.Run("serialization failures", func(t *testing.T) {
		attempts := 0
		err := s.WriteForTest(t.Context(), func(ctx context.Context, tx postgres.TxForTest) error {
			attempts++
			if attempts < 3 {
				_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END $$`)
				return err
			}
			return insert(ctx, tx, "ins_serial")
		})
		if err != nil || attempts != 3 || count("ins_serial") != 1 {
			t.Fatalf("after 2 serialization failures: %v, %d attempts; want success on the 3rd", err, attempts)
		}
	})

	t.Run("gives up", func(t *testing.T) {
		attempts := 0
		err := s.WriteForTest(t.Context(), func(ctx context.Context, tx postgres.TxForTest) error {
			attempts++
			_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = 'deadlock_detected'; END $$`)
			return err
		})
		if err == nil || attempts != postgres.MaxAttempts {
			t.Fatalf("always failing: %v after %d attempts, want an error after %d", err, attempts, postgres.MaxAttempts)
		}
	})

	t.Run("not retried", func(t *testing.T) {
		attempts := 0
		err := s.WriteForTest(t.Context(), func(ctx context.Context, tx postgres.TxForTest) error {
			attempts++
			return insert(ctx, tx, "ins_serial") // a duplicate: a bug, not a transient failure
		})
		if err == nil || attempts != 1 {
			t.Fatalf("constraint violation: %v after %d attempts, want an error after 1", err, attempts)
		}
	})
}

// TestConnectionSettings checks what every pooled connection is set to,
// and that options override the URL, which overrides the defaults.
func TestConnectionSettings(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	base := testkit.PostgresURL(t)
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	for _, tc := range []struct {
		name      string
		url       string
		opts      []postgres.Option
		conns     int32
		statement string
	}{
		{"defaults", base, nil, postgres.DefaultMaxConns, "10s"},
		{"from the URL", base + sep + "pool_max_conns=3&statement_timeout=5000", nil, 3, "5s"},
		{"options win", base + sep + "pool_max_conns=3&statement_timeout=5000",
			[]postgres.Option{postgres.WithMaxConns(5), postgres.WithStatementTimeout(2 * time.Second)}, 5, "2s"},
	} {
		s, err := postgres.Open(t.Context(), tc.url, append(tc.opts, postgres.WithSchema(schema))...)
		if err != nil {
			t.Fatalf("%s: Open: %v", tc.name, err)
		}
		pool := s.PoolForTest()
		if got := pool.Config().MaxConns; got != tc.conns {
			t.Errorf("%s: MaxConns = %d, want %d", tc.name, got, tc.conns)
		}
		want := map[string]string{
			"statement_timeout": tc.statement, "search_path": `"` + schema + `"`, "application_name": "airlock",
			"idle_in_transaction_session_timeout": "1min",
		}
		for name, w := range want {
			var got string
			if err := pool.QueryRow(t.Context(), "SHOW "+name).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != w {
				t.Errorf("%s: %s = %q, want %q", tc.name, name, got, w)
			}
		}
		s.Close()
	}
}

// BenchmarkLifecycle measures one request's round — create, approve, read
// back — through the store, and the same three statements as bare SQL
// (no audit events, no NOTIFY, no retry loop) for comparison.
func BenchmarkLifecycle(b *testing.B) {
	schema := testkit.SchemaName(b, "t_")
	s := open(b, schema)
	in := instance(b, s, "tok_a")
	ctx := b.Context()
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			r, _, err := s.CreateRequest(ctx, params(in))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Decide(ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.GetRequest(ctx, r.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct SQL", func(b *testing.B) {
		pool := s.PoolForTest()
		for b.Loop() {
			id := airlock.NewID(airlock.PrefixRequest)
			if _, err := pool.Exec(ctx, `INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, arguments, timeout,
	agent_reasoning, created_at, deadline_at, idempotency_key, fingerprint)
VALUES ($1, $2, 'tok_a', 'pending', 'tool_call', 'shell.exec', '{"cmd":"ls"}', '1h', '', clock_timestamp(),
	clock_timestamp() + interval '1 hour', $1, $1)`, id, in.ID); err != nil {
				b.Fatal(err)
			}
			tag, err := pool.Exec(ctx, `UPDATE requests SET state = 'approved', decided_at = clock_timestamp(), decided_by = 'tok_r',
	expires_at = clock_timestamp() + interval '1 minute'
WHERE id = $1 AND state = 'pending' AND deadline_at > clock_timestamp()`, id)
			if err != nil || tag.RowsAffected() != 1 {
				b.Fatal(tag, err)
			}
			var state string
			if err := pool.QueryRow(ctx, `SELECT state FROM requests WHERE id = $1`, id).Scan(&state); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkChangeFeed measures how long a decision made through one store
// takes to reach a Listen on another (two replicas): p50 and p99.
func BenchmarkChangeFeed(b *testing.B) {
	schema := testkit.SchemaName(b, "t_")
	a, s := open(b, schema), open(b, schema)
	in := instance(b, s, "tok_a")
	heard := make(chan string, 1024)
	listening := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Listen(ctx, func(ids []string) {
			if ids == nil {
				listening <- struct{}{}
			}
			for _, id := range ids {
				heard <- id
			}
		})
	}()
	defer func() { cancel(); <-done }()
	<-listening
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		r, _, err := s.CreateRequest(b.Context(), params(in))
		if err != nil {
			b.Fatal(err)
		}
		for id := range heard { // skip the creation's notice
			if id == r.ID {
				break
			}
		}
		b.StartTimer()
		start := time.Now()
		if _, err := s.Decide(b.Context(), store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"}); err != nil {
			b.Fatal(err)
		}
		for id := range heard {
			if id == r.ID {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// TestLongPollAcrossReplicas runs two provider services (two replicas) on
// one schema: a long-poll on replica A returns as soon as a reviewer
// decides on replica B, woken by B's notification, not by its own timer.
// Then a request whose deadline passes with both schedulers running is
// expired once, and the long-poll on A returns it.
func TestLongPollAcrossReplicas(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var services []*provider.Service
	ctx, cancel := context.WithCancel(t.Context())
	var running sync.WaitGroup
	t.Cleanup(func() { cancel(); running.Wait() })
	for range 2 {
		svc, err := provider.New(provider.Config{Store: open(t, schema), Logger: logger, Limits: airlock.Limits{
			MinTimeout: time.Millisecond, MaxTimeout: time.Hour, DefaultTimeout: time.Minute,
			ApprovalValidity: time.Minute, MaxApprovalValidity: time.Hour,
		}})
		if err != nil {
			t.Fatal(err)
		}
		running.Go(func() { svc.Run(ctx) })
		services = append(services, svc)
	}
	a, b := services[0], services[1]
	// Real tokens: a long-poll re-checks its caller's token as it waits.
	mint := func(role airlock.Role, principal string) airlock.Caller {
		t.Helper()
		admin := airlock.Caller{Token: airlock.Token{ID: "tok_admin", Role: airlock.RoleAdmin}}
		_, secret, err := a.CreateToken(t.Context(), admin, airlock.NewTokenInput{Name: principal, Role: role, Principal: principal})
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.Authenticate(t.Context(), secret)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	agent, reviewer := mint(airlock.RoleAgent, "bot"), mint(airlock.RoleReviewer, "ada")
	in, err := a.RegisterInstance(t.Context(), agent, airlock.InstanceInput{Name: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	poll := func(id string) chan airlock.Request {
		t.Helper()
		got := make(chan airlock.Request, 1)
		go func() {
			r, err := a.Request(t.Context(), agent, id, 30*time.Second)
			if err != nil {
				t.Errorf("long-poll: %v", err)
			}
			got <- r
		}()
		testkit.Eventually(t, 10*time.Second, "the long-poll to wait", func() bool { return a.Waiters() == 1 })
		return got
	}

	r, _, err := a.CreateRequest(t.Context(), agent, in.ID, "key-1", airlock.CreateRequestInput{
		Tool: "shell.exec", Arguments: json.RawMessage(`{"cmd":"ls"}`), Timeout: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	got := poll(r.ID)
	start := time.Now()
	if _, err := b.Decide(t.Context(), reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.State != airlock.StateApproved {
			t.Fatalf("long-poll on A returned %s, want approved", r.State)
		}
		t.Logf("long-poll on A answered %v after the decision call on B began", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("a long-poll on A did not hear a decision made on B")
	}

	r, _, err = a.CreateRequest(t.Context(), agent, in.ID, "key-2", airlock.CreateRequestInput{
		Tool: "shell.exec", Arguments: json.RawMessage(`{"cmd":"ls"}`), Timeout: "300ms"})
	if err != nil {
		t.Fatal(err)
	}
	got = poll(r.ID)
	select {
	case r := <-got:
		if r.State != airlock.StateExpired {
			t.Fatalf("long-poll past the deadline returned %s, want expired", r.State)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not return after the deadline")
	}
	expiries := 0
	for _, e := range storetest.AllEvents(t, open(t, schema)) {
		if e.Type == airlock.EventRequestExpired && e.RequestID == r.ID {
			expiries++
		}
	}
	if expiries != 1 {
		t.Fatalf("%d expiry events for %s with two schedulers running, want 1", expiries, r.ID)
	}
}

// BenchmarkLifecycleParallel is BenchmarkLifecycle with 8 clients at once,
// the store's side of the HTTP benchmark in e2e/replicas: create, approve
// and read through the store, against the same three statements as direct
// SQL from 8 connections, half just before and half just after. It
// reports both rates and their ratio: what concurrent commits cost when
// they can share the database's WAL flushes.
func BenchmarkLifecycleParallel(b *testing.B) {
	const clients = 8
	schema := testkit.SchemaName(b, "t_")
	s := open(b, schema, postgres.WithMaxConns(clients))
	in := instance(b, s, "tok_a")
	ctx := b.Context()
	pool := s.PoolForTest()
	run := func(n int, lifecycle func() error) time.Duration {
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := lifecycle(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	st := func() error {
		r, _, err := s.CreateRequest(ctx, params(in))
		if err != nil {
			return err
		}
		if _, err := s.Decide(ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"}); err != nil {
			return err
		}
		_, err = s.GetRequest(ctx, r.ID)
		return err
	}
	direct := func() error {
		id := airlock.NewID(airlock.PrefixRequest)
		if _, err := pool.Exec(ctx, `INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, arguments, timeout,
	agent_reasoning, created_at, deadline_at, idempotency_key, fingerprint)
VALUES ($1, $2, 'tok_a', 'pending', 'tool_call', 'shell.exec', '{"cmd":"ls"}', '1h', '', clock_timestamp(),
	clock_timestamp() + interval '1 hour', $1, $1)`, id, in.ID); err != nil {
			return err
		}
		tag, err := pool.Exec(ctx, `UPDATE requests SET state = 'approved', decided_at = clock_timestamp(), decided_by = 'tok_r',
	expires_at = clock_timestamp() + interval '1 minute'
WHERE id = $1 AND state = 'pending' AND deadline_at > clock_timestamp()`, id)
		if err != nil || tag.RowsAffected() != 1 {
			return fmt.Errorf("update: %v (%d rows)", err, tag.RowsAffected())
		}
		var state string
		return pool.QueryRow(ctx, `SELECT state FROM requests WHERE id = $1`, id).Scan(&state)
	}
	b.StopTimer()
	rawTook := run(b.N/2, direct)
	b.StartTimer()
	took := run(b.N, st)
	b.StopTimer()
	rawTook += run(b.N-b.N/2, direct)
	rate, rawRate := float64(b.N)/took.Seconds(), float64(b.N)/rawTook.Seconds()
	b.ReportMetric(rate, "lifecycles/s")
	b.ReportMetric(rawRate, "raw-lifecycles/s")
	b.ReportMetric(rate/rawRate, "ratio_to_raw")
}
