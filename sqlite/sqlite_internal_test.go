package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestPragmas checks the settings the DSN promises on both pools.
func TestPragmas(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	if _, err := s.write.ExecContext(ctx, `INSERT INTO events (type, at, actor) VALUES ('x', 0, 'y')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE events SET actor = 'z'`, `DELETE FROM events`} {
		if _, err := s.write.ExecContext(ctx, q); err == nil {
			t.Errorf("%s succeeded, want the audit log to be append-only", q)
		}
	}
}

// TestListByStateUsesIndex checks that listing requests by state, newest
// first, reads an index that serves both the filter and the order, rather
// than walking the whole table: with a long history and a rare state, the
// walk reads every row.
func TestListByStateUsesIndex(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range []airlock.RequestFilter{
		{State: airlock.StateExpired},
		{State: airlock.StateApproved, BeforeSeq: 1000},
		{State: airlock.StatePending, Kind: airlock.KindToolCall},
	} {
		q, args, err := listQuery(f)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.read.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		got := strings.Join(plan, "; ")
		if !strings.Contains(got, "INDEX requests_state") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%+v: plan %q, want requests_state for the filter and the order", f, got)
		}
	}
}
