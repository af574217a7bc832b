package provider

import (
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fatigue"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the provider's Prometheus collectors.
type Metrics struct {
	transitions     *prometheus.CounterVec
	decisionLatency prometheus.Histogram
	expiryLag       prometheus.Histogram
	heavyRefused    *prometheus.CounterVec
	auditLag        prometheus.Histogram
	checkpointDelay prometheus.Histogram
	timeToDecision  *prometheus.HistogramVec
	fastApprovals   prometheus.Counter
}

// NewMetrics creates the provider's collectors and registers them with reg.
// pending, when not nil, backs the pending-requests gauge.
func NewMetrics(reg prometheus.Registerer, pending func() float64) *Metrics {
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_requests_total",
			Help: "Requests that entered each state (pending counts creations), by this process.",
		}, []string{"state"}),
		decisionLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_decision_latency_seconds",
			Help:    "Time from creation to a reviewer's decision.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
		}),
		expiryLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_expiry_lag_seconds",
			Help:    "How long after its deadline the scheduler's sweep that expired a request committed (by this process's clock).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		auditLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_audit_sequencing_lag_seconds",
			Help:    "How long after its event an event's leaf was appended to the audit log's tree, on the replica that sequences (by its clock).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		checkpointDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "airlock_audit_checkpoint_delay_seconds",
			Help:    "How long the first leaf no checkpoint covered waited for one, on the replica that sequences.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14),
		}),
		timeToDecision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "airlock_time_to_decision_seconds",
			Help:    "Time from creation to an approval or denial, by kind of decider: person, policy (a rule), grant or system (docs/policy.md, \"Fatigue, measured\").",
			Buckets: []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600},
		}, []string{"decider"}),
		fastApprovals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_fast_approvals_total",
			Help: "Approvals by people faster than the arguments could be read: under max(2 s, 2 s per KiB of arguments) from creation.",
		}),
		heavyRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_heavy_reads_refused_total",
			Help: "Lists and searches refused with 429 because their token (scope token) or this process (scope server) had every slot in use.",
		}, []string{"scope"}),
	}
	for _, s := range airlock.States {
		m.transitions.WithLabelValues(string(s))
	}
	for _, k := range []string{fatigue.KindPerson, fatigue.KindPolicy, fatigue.KindGrant} {
		m.timeToDecision.WithLabelValues(k)
	}
	m.heavyRefused.WithLabelValues("token")
	m.heavyRefused.WithLabelValues("server")
	reg.MustRegister(m.transitions, m.decisionLatency, m.expiryLag, m.heavyRefused, m.auditLag, m.checkpointDelay,
		m.timeToDecision, m.fastApprovals)
	if pending != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "airlock_requests_pending",
			Help: "Requests pending now.",
		}, pending))
	}
	return m
}

func (m *Metrics) entered(r airlock.Request) {
	if m == nil {
		return
	}
	m.transitions.WithLabelValues(string(r.State)).Inc()
	if d := r.Decision; d != nil && (d.Status == airlock.StateApproved || d.Status == airlock.StateDenied) && !airlock.DecidedByPolicy(d.DecidedBy) {
		m.decisionLatency.Observe(d.DecidedAt.Sub(r.CreatedAt).Seconds())
	}
	if d := r.Decision; d != nil && (d.Status == airlock.StateApproved || d.Status == airlock.StateDenied) {
		took, kind := max(d.DecidedAt.Sub(r.CreatedAt), 0), fatigue.KindOf(d.DecidedBy)
		m.timeToDecision.WithLabelValues(kind).Observe(took.Seconds())
		if kind == fatigue.KindPerson && d.Status == airlock.StateApproved && fatigue.Fast(took, len(r.Arguments)) {
			m.fastApprovals.Inc()
		}
	}
}

// expired counts a request the scheduler expired, and how long after its
// deadline the sweep that expired it committed. (Not the decision's time:
// an expired request's decision is dated at its deadline, so that lag
// would always be 0.)
func (m *Metrics) expired(r airlock.Request, committed time.Time) {
	if m == nil {
		return
	}
	m.transitions.WithLabelValues(string(airlock.StateExpired)).Inc()
	m.expiryLag.Observe(max(0, committed.Sub(r.DeadlineAt)).Seconds())
}

// heavyReadRefused counts a heavy read refused for want of a slot of its
// token's (scope "token") or of the process's ("server").
func (m *Metrics) heavyReadRefused(scope string) {
	if m == nil {
		return
	}
	m.heavyRefused.WithLabelValues(scope).Inc()
}

// sequenced observes how long each event of a batch waited for its leaf,
// appended at now.
func (m *Metrics) sequenced(at []time.Time, now time.Time) {
	if m == nil {
		return
	}
	for _, t := range at {
		m.auditLag.Observe(max(0, now.Sub(t)).Seconds())
	}
}

// checkpointed observes how long the tree grew before a checkpoint
// covered it.
func (m *Metrics) checkpointed(waited time.Duration) {
	if m == nil {
		return
	}
	m.checkpointDelay.Observe(max(0, waited).Seconds())
}
