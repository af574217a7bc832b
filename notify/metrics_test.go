package notify_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/notify"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metric reads one series of reg: a counter's or gauge's value, or a
// histogram's count; labels narrow it to one series.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// waitMetrics polls reg until ok holds of it: attempts are counted when
// the sender returns, a moment after the receiver has the webhook.
func waitMetrics(t *testing.T, reg *prometheus.Registry, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			mfs, _ := reg.Gather()
			t.Fatalf("metrics never showed %s: %v", what, mfs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMetrics: the delivery series move with what the engine does —
// attempts by outcome, their latency, the lag from commit of what was
// delivered, the backlog as it fills and drains, disabled endpoints.
func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := prometheus.NewRegistry()
	m := notify.NewMetrics(reg, b.store)
	if got := metric(t, reg, "airlock_webhook_backlog_deliveries"); got != 0 {
		t.Fatalf("backlog before anything: %v", got)
	}
	// One endpoint fails once then accepts; the other always fails and
	// is disabled at its second failure.
	flaky := newReceiver(t, func(n int, _ http.ResponseWriter, _ *http.Request) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	dead := newReceiver(t, func(int, http.ResponseWriter, *http.Request) int { return http.StatusBadGateway })
	b.endpoint(t, flaky, airlock.NotifyCreated)
	b.endpoint(t, dead, airlock.NotifyCreated)
	b.request(t, time.Hour)
	// Committed, not yet fanned out: the engine is not running.
	if got := metric(t, reg, "airlock_webhook_backlog_events"); got < 1 {
		t.Fatalf("backlog of events after a commit, before the engine runs: %v", got)
	}
	b.run(t, notify.Config{Metrics: m, Schedule: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond},
		Jitter: func(d time.Duration) time.Duration { return d }, DisableAfter: time.Microsecond})
	waitMetrics(t, reg, "one delivery after one retry, one endpoint disabled", func() bool {
		return metric(t, reg, "airlock_webhook_attempts_total", "outcome", "delivered") == 1 &&
			metric(t, reg, "airlock_webhook_endpoints_disabled") == 1
	})
	waitMetrics(t, reg, "an empty backlog", func() bool {
		return metric(t, reg, "airlock_webhook_backlog_deliveries") == 0 && metric(t, reg, "airlock_webhook_backlog_events") == 0
	})
	retries := metric(t, reg, "airlock_webhook_attempts_total", "outcome", "retry")
	if retries < 2 { // the flaky endpoint's first, the dead one's first
		t.Errorf("retry attempts = %v, want at least 2", retries)
	}
	attempts := retries + metric(t, reg, "airlock_webhook_attempts_total", "outcome", "delivered") +
		metric(t, reg, "airlock_webhook_attempts_total", "outcome", "failed")
	if got := metric(t, reg, "airlock_webhook_attempt_duration_seconds"); got != attempts {
		t.Errorf("attempt latencies observed %v, attempts %v", got, attempts)
	}
	if got := metric(t, reg, "airlock_webhook_delivery_lag_seconds"); got != 1 {
		t.Errorf("delivery lags observed %v, want 1 (the one delivered event)", got)
	}
}
