package policy

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/prometheus/client_golang/prometheus"
)

// Engine is the policy in force: the provider's airlock.Policy. It holds
// the compiled rules of one file and swaps them whole at a reload, so an
// evaluation sees one version of the rules, never a mix.
type Engine struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[Set]

	mu sync.Mutex // serializes reloads; guards stats and data
	// stats keeps each rule name's counters across reloads, so that they
	// only ever grow.
	stats map[string]*ruleStats
	data  []byte // the bytes of the file in force
	// seen is the file's size and time when it was last read, for Watch.
	seen fileStamp

	reloadsOK, reloadsRefused atomic.Uint64
	// reloaded, when set, hears of every reload attempt (tests).
	reloaded func(error)
}

// NewEngine loads and compiles the policy file at path. A file that does
// not compile is an error naming the rule and its position; `serve` stops
// on it.
func NewEngine(path string, log *slog.Logger) (*Engine, error) {
	if log == nil {
		log = slog.Default()
	}
	e := &Engine{path: path, log: log, stats: map[string]*ruleStats{}}
	e.seen = stamp(path)
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Compile(data)
	if err != nil {
		return nil, err
	}
	e.install(s, data)
	log.Info("policy loaded", "file", path, "rules", len(s.rules), "sha256", s.Hash)
	return e, nil
}

// install makes s the rules in force; e.mu held (or e not yet shared).
func (e *Engine) install(s *Set, data []byte) {
	for i := range s.rules {
		r := &s.rules[i]
		st, ok := e.stats[r.Name]
		if !ok {
			st = new(ruleStats)
			e.stats[r.Name] = st
		}
		r.stats = st
	}
	e.data = data
	e.cur.Store(s)
}

// GroupsOf returns the reviewer groups the policy file in force lists
// principal in (airlock.GroupDirectory): a map lookup, so a call costs
// no read of the store.
func (e *Engine) GroupsOf(principal string) []string { return e.cur.Load().GroupsOf(principal) }

// Current returns the rules in force.
func (e *Engine) Current() *Set { return e.cur.Load() }

// Evaluate decides a new request by the rules in force (Set.Decide). The
// verdict's Record counts what the rules did and logs what shadow rules
// would have done and the rules that failed: the provider calls it once
// the request is stored, so that a replay counts nothing.
func (e *Engine) Evaluate(ctx context.Context, in airlock.PolicyInput) airlock.PolicyVerdict {
	s := e.cur.Load()
	out := s.Decide(ctx, in)
	v := out.Verdict
	if len(out.hits) > 0 {
		id, tool := in.Request.ID, in.Request.Tool
		v.Record = func() {
			out.count()
			for _, name := range out.Shadowed {
				e.log.Info("policy shadow rule matched; it decided nothing", "rule", name, "request", id, "tool", tool)
			}
			for _, re := range out.Errors {
				e.log.Warn("policy rule failed to evaluate; asking a person", "rule", re.Rule, "request", id, "err", re.Err)
			}
		}
	}
	return v
}

// Reload reads the file again and, if it compiles, puts its rules in
// force. A file that does not compile is refused: the rules in force stay,
// and the error is logged, counted and returned. An unchanged file changes
// nothing.
func (e *Engine) Reload() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.reloadLocked()
	if e.reloaded != nil {
		e.reloaded(err)
	}
	return err
}

func (e *Engine) reloadLocked() error {
	e.seen = stamp(e.path)
	data, err := ReadFile(e.path)
	if err == nil && bytes.Equal(data, e.data) {
		return nil
	}
	var s *Set
	if err == nil {
		s, err = Compile(data)
	}
	if err != nil {
		e.reloadsRefused.Add(1)
		e.log.Error("policy reload refused; the rules in force stay", "file", e.path, "sha256", e.cur.Load().Hash, "err", err)
		return err
	}
	e.install(s, data)
	e.reloadsOK.Add(1)
	e.log.Info("policy reloaded", "file", e.path, "rules", len(s.rules), "sha256", s.Hash)
	return nil
}

// Watch reloads the file on every value from hup (SIGHUP) and whenever
// its size or modification time differs from when it was last read,
// looked at every interval, until ctx ends.
func (e *Engine) Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = e.Reload() // logged and counted
		case <-t.C:
			e.mu.Lock()
			changed := stamp(e.path) != e.seen
			e.mu.Unlock()
			if changed {
				_ = e.Reload()
			}
		}
	}
}

type fileStamp struct {
	size    int64
	modTime time.Time
	missing bool
}

func stamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{missing: true}
	}
	return fileStamp{size: fi.Size(), modTime: fi.ModTime()}
}

var (
	descMatched = prometheus.NewDesc("airlock_policy_rule_matches_total",
		"Requests a policy rule decided (its match was true and it is not a shadow), since start, by rule name.", []string{"rule"}, nil)
	descShadow = prometheus.NewDesc("airlock_policy_rule_shadow_matches_total",
		"Requests a shadow rule matched: what it would have decided, had it not been a shadow.", []string{"rule"}, nil)
	descErrors = prometheus.NewDesc("airlock_policy_rule_errors_total",
		"Evaluations of a rule's match that failed (the request was asked).", []string{"rule"}, nil)
	descReloads = prometheus.NewDesc("airlock_policy_reloads_total",
		"Policy reloads, by result: ok, or refused because the new file did not compile (the old rules stayed).", []string{"result"}, nil)
	descInfo = prometheus.NewDesc("airlock_policy_info",
		"The policy file in force: its SHA-256 and how many rules it has.", []string{"sha256"}, nil)
)

// Describe implements prometheus.Collector.
func (e *Engine) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMatched, descShadow, descErrors, descReloads, descInfo} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: every rule name seen since
// start, in force or not, keeps its counters.
func (e *Engine) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	for name, st := range e.stats {
		ch <- prometheus.MustNewConstMetric(descMatched, prometheus.CounterValue, float64(st.matched.Load()), name)
		ch <- prometheus.MustNewConstMetric(descShadow, prometheus.CounterValue, float64(st.shadowMatched.Load()), name)
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(st.errors.Load()), name)
	}
	e.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(e.reloadsOK.Load()), "ok")
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(e.reloadsRefused.Load()), "refused")
	s := e.cur.Load()
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, float64(len(s.rules)), s.Hash)
}
