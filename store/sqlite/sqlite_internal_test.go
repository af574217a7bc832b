package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
)

// openInternal opens a store on a new file, closed when t ends.
func openInternal(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPragmas checks the settings the DSN promises on both pools.
func TestPragmas(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	for _, p := range []struct {
		db     *sql.DB
		pool   string
		pragma string
		want   string
	}{
		{s.write.DB, "write", "journal_mode", "wal"},
		{s.write.DB, "write", "synchronous", "2"}, // FULL
		{s.write.DB, "write", "foreign_keys", "1"},
		{s.write.DB, "write", "busy_timeout", "10000"},
		{s.write.DB, "write", "query_only", "0"},
		{s.write.DB, "write", "cache_size", "-65536"},
		{s.write.DB, "write", "temp_store", "2"}, // MEMORY
		{s.write.DB, "write", "wal_autocheckpoint", "16384"},
		{s.read.DB, "read", "journal_mode", "wal"},
		{s.read.DB, "read", "foreign_keys", "1"},
		{s.read.DB, "read", "busy_timeout", "10000"},
		{s.read.DB, "read", "query_only", "1"},
	} {
		var got string
		if err := p.db.QueryRowContext(t.Context(), "PRAGMA "+p.pragma).Scan(&got); err != nil {
			t.Fatalf("%s pool: PRAGMA %s: %v", p.pool, p.pragma, err)
		}
		if !strings.EqualFold(got, p.want) {
			t.Errorf("%s pool: %s = %s, want %s", p.pool, p.pragma, got, p.want)
		}
	}
	if got := s.write.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("write pool allows %d connections, want 1", got)
	}
}

// TestTerminalIsFinal checks the schema's own guard: even a query that
// forgot its WHERE state = 'pending' cannot rewrite a terminal request.
func TestTerminalIsFinal(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := t.Context()
	if _, err := s.write.ExecContext(ctx, `INSERT INTO instances (id, owner_id, name, created_at) VALUES ('ins_1', 'tok_a', 'x', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, timeout, agent_reasoning,
		created_at, deadline_at, decided_at, decided_by, fingerprint)
		VALUES ('apr_1', 'ins_1', 'tok_a', 'denied', 'tool_call', 't', '', '', 0, 10, 5, 'tok_r', 'f')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE requests SET state = 'approved', expires_at = 100 WHERE id = 'apr_1'`,
		`UPDATE requests SET note = 'rewritten' WHERE id = 'apr_1'`,
	} {
		if _, err := s.write.ExecContext(ctx, q); err == nil {
			t.Errorf("%s succeeded, want the schema to refuse it", q)
		}
	}
	// Payloads change only by one purge of a decided request (migration
	// 0023).
	if _, err := s.write.ExecContext(ctx, `INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, arguments, timeout, agent_reasoning,
		created_at, deadline_at, fingerprint)
		VALUES ('apr_2', 'ins_1', 'tok_a', 'pending', 'tool_call', 't', '{"a":1}', '', 'why', 0, 10, 'f')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE requests SET arguments = '{"a":2}' WHERE id = 'apr_1'`,
		`UPDATE requests SET arguments_digest = 'sha256:x' WHERE id = 'apr_1'`,
		`UPDATE requests SET purged_at = 7, context = '{}' WHERE id = 'apr_1'`,
		`UPDATE requests SET purged_at = 7, arguments = NULL, agent_reasoning = '' WHERE id = 'apr_2'`,
	} {
		if _, err := s.write.ExecContext(ctx, q); err == nil {
			t.Errorf("%s succeeded, want the schema to refuse it", q)
		}
	}
	if _, err := s.write.ExecContext(ctx, `UPDATE requests SET purged_at = 7, arguments_digest = 'sha256:x' WHERE id = 'apr_1'`); err != nil {
		t.Fatalf("a purge of a decided request: %v", err)
	}
	for _, q := range []string{
		`UPDATE requests SET purged_at = NULL WHERE id = 'apr_1'`,
		`UPDATE requests SET purged_at = 8 WHERE id = 'apr_1'`,
		`UPDATE requests SET arguments_digest = 'sha256:y' WHERE id = 'apr_1'`,
	} {
		if _, err := s.write.ExecContext(ctx, q); err == nil {
			t.Errorf("%s succeeded, want a purged request to stay purged", q)
		}
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO events (type, at, actor) VALUES ('x', 0, 'y')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE events SET actor = 'z'`, `DELETE FROM events`} {
		if _, err := s.write.ExecContext(ctx, q); err == nil {
			t.Errorf("%s succeeded, want the audit log to be append-only", q)
		}
	}
}

// queryPlan returns SQLite's plan for query, its steps joined by " | ".
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.write.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, " | ")
}

// TestExpiryPlans checks how SQLite runs the expiry statements, which run
// against a backlog of any size: a sweep walks the partial index of
// pending requests in its order (by the second of the deadline, then seq)
// and stops at its limit, and an expiry by ID looks each ID up. An index
// added for another query can change these plans (one on (state, seq)
// made every sweep sort every pending request), so they are pinned here.
func TestExpiryPlans(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	args := []any{sql.Named("event", "request.expired"), sql.Named("now", 1), sql.Named("actor", "expiry"),
		sql.Named("limit", 100), sql.Named("ids", `["apr_1"]`), sql.Named("trace_id", ""), sql.Named("span_id", ""),
		sql.Named("exact", 1000), sql.Named("probe", 1001)}
	for _, tc := range []struct {
		name, query, want string
	}{
		{"sweep events", expiredEventsSQL, "SEARCH requests USING INDEX requests_pending_by_second (<expr><?)"},
		{"sweep", expireDueSQL, "SEARCH requests USING COVERING INDEX requests_pending_by_second (<expr><?)"},
		// The first entry of the index, then (up to 1,001 of) its
		// second's entries.
		{"next deadline", nextDeadlineSQL, "MATERIALIZE first | SCAN requests USING COVERING INDEX requests_pending_by_second | " +
			"SCAN first | SEARCH r USING COVERING INDEX requests_pending_by_second (<expr>=?)"},
		{"events by ID", expiredByIDEventsSQL, "SEARCH r USING INDEX sqlite_autoindex_requests_1 (id=?)"},
		{"expiry by ID", expireByIDSQL, "SEARCH r USING INDEX sqlite_autoindex_requests_1 (id=?)"},
	} {
		plan := queryPlan(t, s, tc.query, args...)
		if !strings.Contains(plan, tc.want) || (tc.query != expiredByIDEventsSQL && strings.Contains(plan, "TEMP B-TREE FOR ORDER BY")) {
			t.Errorf("%s: plan %q, want %s and no sort", tc.name, plan, tc.want)
		}
	}
}

// TestGetManyPlan checks that GetRequests looks each ID up by the
// primary key, never scanning the requests: its statement reads up to
// 1,000 IDs whatever the table holds.
func TestGetManyPlan(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	plan := queryPlan(t, s, requestSQL.GetMany, sql.Named("ids", `["apr_1","apr_2"]`))
	if want := "SEARCH requests USING INDEX sqlite_autoindex_requests_1 (id=?)"; !strings.Contains(plan, want) || strings.Contains(plan, "SCAN requests") {
		t.Errorf("plan %q, want %s and no scan of the requests", plan, want)
	}
}

// TestPendingCountPlans checks that the pending counts (migration 0034)
// read only index entries of pending requests: an instance's, those of
// its own in requests_instance_pending; the gauge's, every entry of a
// partial index of pending requests. Any other plan would read decided
// requests of the history too.
func TestPendingCountPlans(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	for _, tc := range []struct {
		name, query, want string
	}{
		{"instance", instanceSQL.Instance, "SEARCH r USING COVERING INDEX requests_instance_pending (instance_id=?)"},
		{"gauge", requestSQL.CountPending, "SCAN requests USING COVERING INDEX requests_pending_by_second"},
	} {
		plan := queryPlan(t, s, tc.query, sql.Named("id", "ins_1"))
		if !strings.Contains(plan, tc.want) {
			t.Errorf("%s: plan %q, want %s", tc.name, plan, tc.want)
		}
	}
}

// watchedCtx is a context that counts how often its Done is asked for:
// whoever asks means to watch it for its end.
type watchedCtx struct {
	context.Context
	watched atomic.Int32
}

func (c *watchedCtx) Done() <-chan struct{} {
	c.watched.Add(1)
	return c.Context.Done()
}

// TestPointReadDoesNotWatchContext checks that a read of one row does not
// watch its caller's context while it runs: database/sql and
// modernc.org/sqlite would each start a goroutine a statement to do so,
// on the path of every such read, for a statement that ends about as soon.
// A caller that has already given up still gets its context's error.
func TestPointReadDoesNotWatchContext(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	in, err := s.CreateInstance(t.Context(), airlock.Instance{OwnerID: "tok_a", Name: "read"}, "tok_a")
	if err != nil {
		t.Fatal(err)
	}
	ctx := &watchedCtx{Context: t.Context()}
	if _, err := s.GetInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if n := ctx.watched.Load(); n != 0 {
		t.Errorf("a read of one row asked for its context's Done %d times, want 0", n)
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.GetInstance(gone, in.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("a read for a caller that gave up = %v, want context.Canceled", err)
	}
}
