package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The audit log's timing in a run (docs/performance.md, "What the audit
// log costs"): every server publishes how long each event waited for its
// leaf and how long the tree grew before a checkpoint covered it, as
// Prometheus histograms at /metrics. The run reads them from every server
// before its measured part and after it, once the sequencer has caught up,
// and reports the difference: the measured part's own events.

// Histograms the run reads.
const (
	lagMetric        = "airlock_audit_sequencing_lag_seconds"
	checkpointMetric = "airlock_audit_checkpoint_delay_seconds"
)

// AuditTiming is the audit log's timing over the measured part of a run.
// Percentiles come from the servers' histogram buckets: each is the upper
// bound of the bucket the percentile falls in, so the true value is at
// most that; -1 is beyond the last bucket (32.8 s of lag, 819 s of
// checkpoint delay).
type AuditTiming struct {
	// Leaves is how many events got their leaf.
	Leaves uint64 `json:"leaves"`
	// LagP50MS and LagP99MS bound the wait from an event's commit to its
	// leaf (target p99 ≤ 1 s at half the maximum load).
	LagP50MS float64 `json:"lag_p50_ms_at_most"`
	LagP99MS float64 `json:"lag_p99_ms_at_most"`
	// Checkpoints is how many checkpoints covered new leaves, and
	// CheckpointMaxS bounds the longest a leaf waited for one (target
	// ≤ 2 × the checkpoint interval).
	Checkpoints    uint64  `json:"checkpoints"`
	CheckpointMaxS float64 `json:"checkpoint_delay_max_s_at_most,omitempty"`
}

// histogram is a Prometheus histogram's cumulative buckets, summed over
// servers.
type histogram struct {
	count  uint64
	bounds []float64 // upper bounds, ascending; +Inf last
	counts []uint64  // cumulative, one per bound
}

// add adds h's buckets to g, which must have the same bounds or none.
func (g *histogram) add(h *dto.Histogram) error {
	if g.bounds == nil {
		for _, b := range h.GetBucket() {
			g.bounds = append(g.bounds, b.GetUpperBound())
			g.counts = append(g.counts, 0)
		}
		g.bounds = append(g.bounds, math.Inf(1))
		g.counts = append(g.counts, 0)
	}
	if len(h.GetBucket())+1 != len(g.bounds) {
		return fmt.Errorf("servers publish the histogram with different buckets")
	}
	for i, b := range h.GetBucket() {
		g.counts[i] += b.GetCumulativeCount()
	}
	g.counts[len(g.counts)-1] += h.GetSampleCount()
	g.count += h.GetSampleCount()
	return nil
}

// since is g less an earlier reading of the same servers.
func (g histogram) since(before histogram) histogram {
	out := histogram{count: g.count - before.count, bounds: g.bounds, counts: slices.Clone(g.counts)}
	for i := range out.counts {
		if i < len(before.counts) {
			out.counts[i] -= before.counts[i]
		}
	}
	return out
}

// quantile returns the upper bound of the bucket holding quantile q, in
// seconds; 0 without samples, +Inf beyond the last finite bucket.
func (g histogram) quantile(q float64) float64 {
	if g.count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(g.count)))
	for i, c := range g.counts {
		if c >= rank {
			return g.bounds[i]
		}
	}
	return math.Inf(1)
}

// auditReading is both histograms, summed over the run's servers.
type auditReading struct{ lag, checkpoint histogram }

// readAudit reads both histograms from every server of the run.
func (t *target) readAudit(ctx context.Context) (auditReading, error) {
	var r auditReading
	for _, base := range t.urls {
		families, err := t.scrape(ctx, base)
		if err != nil {
			return auditReading{}, err
		}
		for name, h := range map[string]*histogram{lagMetric: &r.lag, checkpointMetric: &r.checkpoint} {
			f, ok := families[name]
			if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram() == nil {
				return auditReading{}, fmt.Errorf("%s/metrics has no histogram %s: a server older than the audit log's metrics", base, name)
			}
			if err := h.add(f.GetMetric()[0].GetHistogram()); err != nil {
				return auditReading{}, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return r, nil
}

// scrape reads a server's /metrics.
func (t *target) scrape(ctx context.Context, base string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := t.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s/metrics: %w", base, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s/metrics: %s", base, res.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s/metrics: %w", base, err)
	}
	return families, nil
}

// auditSettle bounds how long the run waits after its measured part for the
// sequencer to append the events committed at its end; auditQuiet is how
// long the leaf count must stand still to count as caught up.
const (
	auditSettle = 10 * time.Second
	auditQuiet  = 300 * time.Millisecond
)

// auditTimingSince reads the histograms once the sequencer has caught up
// and returns the timing since before.
func (t *target) auditTimingSince(ctx context.Context, before auditReading) (*AuditTiming, error) {
	last, err := t.auditCaughtUp(ctx)
	if err != nil {
		return nil, err
	}
	lag, cp := last.lag.since(before.lag), last.checkpoint.since(before.checkpoint)
	return &AuditTiming{
		Leaves:   lag.count,
		LagP50MS: finite(1000 * lag.quantile(0.50)), LagP99MS: finite(1000 * lag.quantile(0.99)),
		Checkpoints: cp.count, CheckpointMaxS: finite(cp.quantile(1)),
	}, nil
}

// auditCaughtUp waits, at most auditSettle, until the sequencer has caught
// up (the leaf count stood still for auditQuiet), and returns the reading
// then.
func (t *target) auditCaughtUp(ctx context.Context) (auditReading, error) {
	deadline := time.Now().Add(auditSettle)
	last, err := t.readAudit(ctx)
	if err != nil {
		return auditReading{}, err
	}
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return auditReading{}, ctx.Err()
		case <-time.After(auditQuiet):
		}
		now, err := t.readAudit(ctx)
		if err != nil {
			return auditReading{}, err
		}
		if now.lag.count == last.lag.count {
			return now, nil
		}
		last = now
	}
	return last, nil
}

// finite rounds x, and reports a value beyond the histogram's last finite
// bucket as -1, which JSON can carry.
func finite(x float64) float64 {
	if math.IsInf(x, 0) {
		return -1
	}
	return round(x, 3)
}
