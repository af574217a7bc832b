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
		{"next deadline", explain(postgres.NextDeadlineSQLForTest), 2},
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
