package notify

import (
	"bytes"
	"context"
	"math"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the delivery engine's series on /metrics
// (docs/notifications.md, Metrics). A nil *Metrics records nothing.
type Metrics struct {
	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
	lag      prometheus.Histogram
	disabled prometheus.Gauge
}

// NewMetrics registers the engine's series with reg. The backlog gauges
// read st when scraped, so they count the work of every process sharing
// the store.
func NewMetrics(reg prometheus.Registerer, st store.Notify) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_webhook_attempts_total",
			Help: "Delivery attempts made by this process, by outcome: delivered, retry (failed, to be tried again) or failed (no retry left).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_webhook_attempt_duration_seconds",
			Help:    "Time from sending a delivery attempt to the receiver's answer (or the error).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_webhook_delivery_lag_seconds",
			Help:    "Time from an event's commit to the receiver accepting its delivery (retries included).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 22),
		}),
		disabled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "airlock_webhook_endpoints_disabled",
			Help: "Endpoints disabled for failing too long, as this process last read them.",
		}),
	}
	reg.MustRegister(m.attempts, m.latency, m.lag, m.disabled)
	backlog := func(pick func(store.Backlog) int64) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			b, err := st.DeliveryBacklog(ctx)
			if err != nil {
				return math.NaN()
			}
			return float64(pick(b))
		}
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_webhook_backlog_deliveries",
		Help: "Deliveries queued and not yet delivered or failed (waiting retries included), across every replica.",
	}, backlog(func(b store.Backlog) int64 { return b.Pending })))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_webhook_backlog_events",
		Help: "Events committed and not yet fanned out into deliveries, across every replica.",
	}, backlog(func(b store.Backlog) int64 { return b.Unqueued })))
	return m
}

// attempted counts an attempt of d with outcome, made at start and
// answered at end.
func (m *Metrics) attempted(d airlock.Delivery, outcome airlock.DeliveryOutcome, start, end time.Time) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(string(outcome)).Inc()
	m.latency.Observe(end.Sub(start).Seconds())
	if outcome != airlock.OutcomeDelivered || d.EventID == 0 {
		return // a test delivery has no commit to be late after
	}
	if at, ok := committedAt(d.Payload); ok {
		m.lag.Observe(max(end.Sub(at), 0).Seconds())
	}
}

func (m *Metrics) setDisabled(n int) {
	if m != nil {
		m.disabled.Set(float64(n))
	}
}

// committedAt reads the event's commit time from a body Body wrote: its
// "timestamp", the second field.
func committedAt(payload []byte) (time.Time, bool) {
	const key = `,"timestamp":"`
	i := bytes.Index(payload, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := payload[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return at, err == nil
}
