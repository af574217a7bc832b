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
	svc, reg := measuredService(t, b)
	r := b.create(t, "1m")
	b.clock.Set(r.DeadlineAt.Add(3 * time.Second))
	if n, err := svc.ExpireDue(t.Context()); err != nil || n != 1 {
		t.Fatalf("ExpireDue = %d, %v; want 1 expired", n, err)
	}
	if n, sum := histogramOf(t, reg, "airlock_expiry_lag_seconds"); n != 1 || math.Abs(sum-3) > 1e-6 {
		t.Fatalf("expiry lag: %d samples summing to %gs, want 1 of 3s", n, sum)
	}
}

// measuredService is a service over b's store whose metrics go to a
// registry of its own, returned beside it.
func measuredService(t *testing.T, b *bundle) (*Service, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	svc, err := New(Config{Store: b.store, Clock: b.clock, Metrics: NewMetrics(reg, nil),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return svc, reg
}

// histogramOf returns the named histogram's sample count and sum in reg.
func histogramOf(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("no %s in the registry", name)
	return 0, 0
}

// TestAuditMetrics checks airlock_audit_sequencing_lag_seconds (each
// event's wait for its leaf) and airlock_audit_checkpoint_delay_seconds
// (the first uncovered leaf's wait for a checkpoint), and that a paused
// sequencer appends nothing until it runs again.
func TestAuditMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	svc, reg := measuredService(t, b)
	b.create(t, "10m")
	events := len(allEvents(t, b))
	b.clock.Advance(250 * time.Millisecond)
	if n, err := svc.SequenceAudit(t.Context()); err != nil || n != events {
		t.Fatalf("SequenceAudit = %d, %v; want the %d events", n, err, events)
	}
	if n, sum := histogramOf(t, reg, "airlock_audit_sequencing_lag_seconds"); n != uint64(events) || math.Abs(sum-0.25*float64(events)) > 1e-6 {
		t.Fatalf("sequencing lag: %d samples summing to %gs, want %d of 0.25s", n, sum, events)
	}
	// The first round signed the first checkpoint at once.
	if n, sum := histogramOf(t, reg, "airlock_audit_checkpoint_delay_seconds"); n != 1 || sum != 0 {
		t.Fatalf("checkpoint delay: %d samples summing to %gs, want one of 0s", n, sum)
	}

	// Paused, the sequencer appends nothing; the events wait.
	svc.SetAuditSequencing(false)
	b.create(t, "10m")
	b.clock.Advance(time.Second)
	if n, err := svc.SequenceAudit(t.Context()); err != nil || n != 0 {
		t.Fatalf("paused: SequenceAudit = %d, %v; want nothing appended", n, err)
	}
	svc.SetAuditSequencing(true)
	if n, err := svc.SequenceAudit(t.Context()); err != nil || n == 0 {
		t.Fatalf("running again: SequenceAudit = %d, %v; want the waiting events", n, err)
	}
	// Their leaves are not checkpointed until a checkpoint interval after
	// the last checkpoint: 10 s on, the next round signs one, 9 s after
	// the first uncovered leaf.
	b.clock.Advance(9 * time.Second)
	if _, err := svc.SequenceAudit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, sum := histogramOf(t, reg, "airlock_audit_checkpoint_delay_seconds"); n != 2 || math.Abs(sum-9) > 1e-6 {
		t.Fatalf("checkpoint delay: %d samples summing to %gs, want a second of 9s", n, sum)
	}
}

// TestCancelledMetric checks airlock_requests_total{state="cancelled"}
// after an instance delete: one count per request it cancelled, as one
// Add rather than one Inc each.
func TestCancelledMetric(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	svc, reg := measuredService(t, b)
	for range 3 {
		b.create(t, "10m")
	}
	if n, err := svc.DeleteInstance(t.Context(), b.agent, b.inst.ID); err != nil || n != 3 {
		t.Fatalf("DeleteInstance = %d, %v; want 3 cancelled", n, err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "airlock_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == "cancelled" {
				if got := m.GetCounter().GetValue(); got != 3 {
					t.Fatalf(`airlock_requests_total{state="cancelled"} = %g, want 3`, got)
				}
				return
			}
		}
	}
	t.Fatal(`no airlock_requests_total{state="cancelled"} in the registry`)
}
