package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/store/postgres"
	"github.com/jackc/pgx/v5"
)

// TestExpiryPlans checks how PostgreSQL runs the expiry statements against
// a backlog: a sweep walks requests_pending_by_second in its order (by the
// second of the deadline, then seq) and stops at its limit, and
// NextDeadline reads the first second's entries of the same index;
// neither sorts. 5,000 pending requests due within 30 ms of each other,
// analyzed, make the planner choose as it would in a real backlog.
func TestExpiryPlans(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	in := instance(t, s, "tok_a")
	conn := conn(t, schema)
	if _, err := conn.Exec(t.Context(), `INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, timeout,
	agent_reasoning, created_at, deadline_at, fingerprint)
SELECT 'apr_' || g, $1, 'tok_a', 'pending', 'tool_call', 't', '1m', '', now(),
	now() + interval '1 minute' + random() * interval '30 milliseconds', 'f'
FROM generate_series(1, 5000) g`, in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `ANALYZE requests`); err != nil {
		t.Fatal(err)
	}
	explain := func(query string, args ...any) string {
		t.Helper()
		rows, err := conn.Query(t.Context(), "EXPLAIN "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	sweep := strings.NewReplacer("@now", "$1::timestamptz", "@limit", "100", "@actor", "'expiry'").Replace(postgres.ExpireDueSQLForTest)
	for _, tc := range []struct {
		name, plan string
		scans      int
	}{
		{"sweep", explain(sweep, time.Now().Add(2*time.Minute)), 1},
		{"next deadline", explain(strings.NewReplacer("@exact", "1000", "@probe", "1001").Replace(postgres.NextDeadlineSQLForTest)), 2},
	} {
		// An index scan, an index-only scan or a bitmap index scan all
		// read the index; which one the planner picks depends on its
		// estimates.
		if n := strings.Count(tc.plan, "Index Only Scan using requests_pending_by_second") +
			strings.Count(tc.plan, "Index Scan using requests_pending_by_second") +
			strings.Count(tc.plan, "Bitmap Index Scan on requests_pending_by_second"); n < tc.scans || strings.Contains(tc.plan, "Sort") {
			t.Errorf("%s: plan\n%s\nwant %d scans of requests_pending_by_second and no sort", tc.name, tc.plan, tc.scans)
		}
		if testing.Verbose() {
			t.Logf("%s:\n%s", tc.name, tc.plan)
		}
	}
}

// TestHistoryPlans checks that the history's reads (reviewer statistics,
// suggestions) read the window through the index requests_decided
// (migration 0028), not the whole table: 20,000 decided requests over a
// year, analyzed, and a 30-day window of them.
func TestHistoryPlans(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	in := instance(t, s, "tok_a")
	conn := conn(t, schema)
	if _, err := conn.Exec(t.Context(), `INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, arguments, timeout,
	agent_reasoning, created_at, deadline_at, decided_at, decided_by, expires_at, fingerprint)
SELECT 'apr_' || g, $1, 'tok_a', CASE WHEN g % 5 = 0 THEN 'denied' ELSE 'approved' END, 'tool_call', 't' || (g % 10),
	'{"n":' || g || '}', '1m', '', now() - g * interval '26 minutes', now() - g * interval '26 minutes' + interval '1 minute',
	now() - g * interval '26 minutes' + interval '5 seconds', 'tok_r' || (g % 20),
	CASE WHEN g % 5 = 0 THEN NULL ELSE now() END, 'f'
FROM generate_series(1, 20000) g`, in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `ANALYZE requests`); err != nil {
		t.Fatal(err)
	}
	bind := strings.NewReplacer("@now::timestamptz", "NULL::timestamptz", "@age::interval", "'30 days'::interval", "@decided_by::text", "'tok_r1'")
	times, timesBy, calls := postgres.HistorySQLForTest()
	for name, q := range map[string]string{"times": times, "times by": timesBy, "calls": calls} {
		rows, err := conn.Query(t.Context(), "EXPLAIN "+bind.Replace(q))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, "requests_decided") || strings.Contains(plan, "Seq Scan on requests") {
			t.Errorf("%s: plan\n%s\nwant a scan of requests_decided, not of the table", name, plan)
		}
		if testing.Verbose() {
			t.Logf("%s:\n%s", name, plan)
		}
	}
}

// TestFirstPagePlan checks that the reviewer's first page (the newest
// pending requests, Requests.List's candidates) reads only its own
// entries of requests_pending_seq (migration 0033) when newer decided
// requests lie above an older pending backlog: 20,000 pending, then
// 20,000 approved, analyzed. Without it the planner scanned the primary
// key backward and filtered out every decided row first.
func TestFirstPagePlan(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	in := instance(t, s, "tok_a")
	conn := conn(t, schema)
	for _, q := range []string{
		`INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, timeout, agent_reasoning, created_at, deadline_at, fingerprint)
SELECT 'apr_p' || g, $1, 'tok_a', 'pending', 'tool_call', 't', '1d', '', now(), now() + interval '1 day', 'f'
FROM generate_series(1, 20000) g`,
		`INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, timeout, agent_reasoning, created_at, deadline_at,
	decided_at, decided_by, expires_at, fingerprint)
SELECT 'apr_d' || g, $1, 'tok_a', 'approved', 'tool_call', 't', '1h', '', now() - interval '2 hours', now() - interval '1 hour',
	now() - interval '90 minutes', 'tok_r', now() - interval '85 minutes', 'f'
FROM generate_series(1, 20000) g`,
	} {
		if _, err := conn.Exec(t.Context(), q, in.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(t.Context(), `ANALYZE requests`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(t.Context(), `EXPLAIN (ANALYZE, COSTS OFF) SELECT r.seq FROM requests r WHERE r.state = 'pending' ORDER BY r.seq DESC LIMIT 201`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "Backward using requests_pending_seq") || strings.Contains(plan, "Rows Removed by Filter") || strings.Contains(plan, "Sort") {
		t.Errorf("first page plan\n%s\nwant a backward scan of requests_pending_seq, no filter, no sort", plan)
	}
}
