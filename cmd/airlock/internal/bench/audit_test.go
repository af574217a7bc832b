package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	dto "github.com/prometheus/client_model/go"
)

// TestAudit runs the audit scenario on SQLite and on PostgreSQL: a warm-up,
// then passes with the sequencer on, off, off, on in the server process.
// No event gets its leaf during a pass with the log off (the run refuses
// one that does, so a run without error proves the switch reached the
// server), each state is summed, and log_ratio is between them.
func TestAudit(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Scenario: Audit, Clients: 2, Duration: 40 * time.Second, Count: 24}
			if store == "postgres" {
				cfg.DB = testkit.PostgresURL(t)
			}
			rep := run(t, cfg)
			a := rep.AuditCompare
			if a == nil || !a.Compared || len(a.Passes) != len(auditOrder) || a.WithoutLog == nil {
				t.Fatalf("audit report %+v, want compared over %d passes", a, len(auditOrder))
			}
			for i, p := range a.Passes {
				if p.Log != auditOrder[i] {
					t.Errorf("pass %d had the log %v, want %v", i+1, p.Log, auditOrder[i])
				}
				if !p.Log && p.Leaves != 0 {
					t.Errorf("pass %d, log off: %d leaves", i+1, p.Leaves)
				}
				checkResult(t, fmt.Sprintf("pass %d, log %s", i+1, onOff(p.Log)), p.Result, 6)
			}
			checkResult(t, "log on", a.WithLog, 11)
			checkResult(t, "log off", *a.WithoutLog, 11)
			if want := round(a.WithLog.OpsPerS/a.WithoutLog.OpsPerS, 3); a.LogRatio != want || want <= 0 {
				t.Errorf("log_ratio %v, want %v", a.LogRatio, want)
			}
			b, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{"audit_compare.log_ratio", "audit_compare.with_log.ops_per_s", "audit_compare.without_log.ops_per_s"} {
				if lookup(m, path) == nil {
					t.Errorf("JSON report has no %s:\n%s", path, b)
				}
			}
			var table bytes.Buffer
			rep.WriteTable(&table)
			for _, want := range []string{"airlock lifecycle, audit log on", "lifecycle, audit log off", "pass 2, log off", "log_ratio: ", "on, off, off, on"} {
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
		})
	}
}

// TestLifecycleAuditTiming: a lifecycle run reports the audit log's timing
// from its server's metrics: a leaf for each of the run's events (a create
// and an approval each, at least), their lag, and the checkpoint that
// covered them.
func TestLifecycleAuditTiming(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Scenario: Lifecycle, Clients: 2, Duration: 20 * time.Second, Count: 20})
	a := rep.Audit
	if a == nil {
		t.Fatal("no audit timing in the report")
	}
	if a.Leaves < 2*uint64(rep.Ops) || a.LagP99MS <= 0 || a.LagP50MS > a.LagP99MS {
		t.Errorf("audit timing %+v for %d lifecycles; want at least two leaves each, with lags", *a, rep.Ops)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "audit log: ") {
		t.Errorf("table lacks the audit log's timing:\n%s", table.String())
	}
}

// The quantile of a histogram is the upper bound of the bucket it falls
// in; a reading less an earlier one is the samples between them.
func TestHistogramQuantile(t *testing.T) {
	t.Parallel()
	bucket := func(le float64, n uint64) *dto.Bucket { return &dto.Bucket{UpperBound: &le, CumulativeCount: &n} }
	reading := func(counts ...uint64) histogram {
		var g histogram
		n := counts[len(counts)-1]
		if err := g.add(&dto.Histogram{SampleCount: &n, Bucket: []*dto.Bucket{bucket(0.001, counts[0]), bucket(0.01, counts[1]), bucket(0.1, counts[2])}}); err != nil {
			t.Fatal(err)
		}
		return g
	}
	before := reading(5, 5, 5, 5)
	after := reading(5, 55, 104, 105) // 50 at ≤10 ms, 49 at ≤100 ms, 1 beyond
	d := after.since(before)
	for _, tc := range []struct{ q, want float64 }{{0.5, 0.01}, {0.51, 0.1}, {0.99, 0.1}, {1, math.Inf(1)}} {
		if got := d.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%g) = %g, want %g", tc.q, got, tc.want)
		}
	}
	if d.count != 100 || (histogram{}).quantile(0.99) != 0 {
		t.Errorf("count %d; empty quantile %g", d.count, (histogram{}).quantile(0.99))
	}
}
