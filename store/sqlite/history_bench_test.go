package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fatigue"
	"github.com/airlockhq/airlock/store"
)

// historyRows is how many requests BenchmarkHistory seeds:
// AIRLOCK_HISTORY_ROWS, or 1,000,000.
func historyRows() int {
	if n, err := strconv.Atoi(os.Getenv("AIRLOCK_HISTORY_ROWS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// seedHistory writes n decided requests straight into a migrated store's
// file, created over the last days days (a test-only seeding: the store's
// writes would take an hour): 70 % approved, 20 % denied, 10 % expired;
// of the decisions, a quarter by a policy rule, a quarter by a grant, the
// rest by 20 reviewers; 50 tools; arguments of about 40 bytes.
func seedHistory(b *testing.B, path string, n, days int) {
	b.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateInstance(context.Background(), airlock.Instance{ID: "ins_1", OwnerID: "tok_a", Name: "bench"}, "tok_a"); err != nil {
		b.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMicro()
	step := int64(days) * 24 * int64(time.Hour/time.Microsecond) / int64(n)
	_, err = db.Exec(`
WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?1),
r AS (SELECT n, ?2 - (?1 - n) * ?3 AS created,
	CASE WHEN n % 10 < 7 THEN 'approved' WHEN n % 10 < 9 THEN 'denied' ELSE 'expired' END AS state,
	CASE n % 4 WHEN 0 THEN 'policy:read-only' WHEN 1 THEN 'grant:grt_1' ELSE 'tok_reviewer_' || (n % 20) END AS by
	FROM i)
INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, arguments, timeout, agent_reasoning, created_at, deadline_at,
	decided_at, decided_by, expires_at, fingerprint)
SELECT 'apr_' || n, 'ins_1', 'tok_a', state, 'tool_call', 'tool_' || (n % 50),
	'{"path":"/srv/' || (n % 1000) || '","n":' || n || '}', '10m', '', created, created + 600000000,
	CASE state WHEN 'expired' THEN created + 600000000 ELSE created + 5000000 END,
	CASE state WHEN 'expired' THEN 'system:expiry' ELSE by END,
	CASE state WHEN 'approved' THEN created + 305000000 END, 'fp_' || n
FROM r`, n, now, step)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHistory measures the reads behind GET /v1/reviewers/{p}/stats
// and GET /v1/suggestions over a store of historyRows() requests made
// over 90 days: the 30-day window (a third of them) for every decider,
// for one reviewer, and the decided calls the suggestions read; then all
// of them in a 90-day window.
func BenchmarkHistory(b *testing.B) {
	n := historyRows()
	path := filepath.Join(b.TempDir(), "history.db")
	start := time.Now()
	seedHistory(b, path, n, 90)
	b.Logf("seeded %d requests in %s", n, time.Since(start).Round(time.Millisecond))
	s, err := Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	count := func(b *testing.B, read func(store.HistoryParams, func(store.DecidedRequest) error) error, p store.HistoryParams) {
		for b.Loop() {
			rows := 0
			if err := read(p, func(store.DecidedRequest) error { rows++; return nil }); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(rows), "rows")
		}
	}
	times := func(p store.HistoryParams, fn func(store.DecidedRequest) error) error {
		return s.DecisionTimes(ctx, p, fn)
	}
	calls := func(p store.HistoryParams, fn func(store.DecidedRequest) error) error {
		return s.DecidedCalls(ctx, p, fn)
	}
	for _, days := range []int{30, 90} {
		age := time.Duration(days) * 24 * time.Hour
		b.Run(strconv.Itoa(days)+"d/times-all", func(b *testing.B) { count(b, times, store.HistoryParams{Age: age}) })
		b.Run(strconv.Itoa(days)+"d/times-one", func(b *testing.B) {
			count(b, times, store.HistoryParams{Age: age, DecidedBy: "tok_reviewer_2"})
		})
		b.Run(strconv.Itoa(days)+"d/calls", func(b *testing.B) { count(b, calls, store.HistoryParams{Age: age}) })
		// What the endpoints do: the read and the tally (stats), the read
		// and the patterns (suggestions).
		b.Run(strconv.Itoa(days)+"d/stats-all", func(b *testing.B) {
			for b.Loop() {
				var t fatigue.Tally
				if err := s.DecisionTimes(ctx, store.HistoryParams{Age: age}, func(d store.DecidedRequest) error { t.Add(d); return nil }); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(t.Stats())), "deciders")
			}
		})
		b.Run(strconv.Itoa(days)+"d/suggestions", func(b *testing.B) {
			for b.Loop() {
				var sg fatigue.Suggester
				if err := s.DecidedCalls(ctx, store.HistoryParams{Age: age}, func(d store.DecidedRequest) error { sg.Add(d); return nil }); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(sg.Suggestions(fatigue.DefaultMinApprovals))), "suggestions")
			}
		})
	}
}

// TestHistoryUsesTheIndex: the history's reads use the index
// requests_decided (migration 0028), the statistics reading nothing else
// (a covering index), never a scan of the requests table.
func TestHistoryUsesTheIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bind := strings.NewReplacer("@now", "0", "@age", "1", "@decided_by", "'x'")
	for name, q := range map[string]string{"Times": historySQL.Times, "TimesBy": historySQL.TimesBy, "Calls": historySQL.Calls} {
		rows, err := db.Query("EXPLAIN QUERY PLAN " + bind.Replace(q))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		joined := strings.Join(plan, "; ")
		want := "USING INDEX requests_decided"
		if name != "Calls" {
			want = "USING COVERING INDEX requests_decided"
		}
		if !strings.Contains(joined, want) {
			t.Errorf("%s's plan is %q; want it %s", name, joined, want)
		}
	}
}
