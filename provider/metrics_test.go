package provider

import (
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestExpiryLagMetric checks airlock_expiry_lag_seconds: how long after its
// deadline the sweep that expired a request committed, not the decision's
// date (which is the deadline itself, a lag of 0 every time).
func TestExpiryLagMetric(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	reg := prometheus.NewRegistry()
	svc, err := New(Config{Store: b.store, Clock: b.clock, Metrics: NewMetrics(reg, nil),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r := b.create(t, "1m")
	b.clock.Set(r.DeadlineAt.Add(3 * time.Second))
	if n, err := svc.ExpireDue(t.Context()); err != nil || n != 1 {
		t.Fatalf("ExpireDue = %d, %v; want 1 expired", n, err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "airlock_expiry_lag_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-3) > 1e-6 {
			t.Fatalf("expiry lag: %d samples summing to %gs, want 1 of 3s", h.GetSampleCount(), h.GetSampleSum())
		}
		return
	}
	t.Fatal("no airlock_expiry_lag_seconds in the registry")
}
