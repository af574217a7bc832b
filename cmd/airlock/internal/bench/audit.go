package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/airlockhq/airlock/provider"
)

// The audit scenario is the lifecycle (create → approve → read) with the
// audit log's sequencer on and off in interleaved passes on the same warm
// servers (interleave.go), and reports log_ratio, the lifecycles per
// second with the log over those without (docs/performance.md, "What the
// audit log costs"; target ≥ 0.95). While the sequencer is off, events
// wait for their leaves; switching it on appends them before the next pass
// starts, so each pass with the log pays for its own events' leaves only.

// auditOrder is the audit scenario's measured passes: whether the
// sequencer runs in each.
var auditOrder = [...]bool{true, false, false, true}

// AuditReport is what the audit scenario measured.
type AuditReport struct {
	// Compared says whether the run measured with the log and without: on
	// its own servers it does; at --url it cannot switch the sequencer,
	// and measures with the log only (Note says so).
	Compared bool        `json:"compared"`
	Note     string      `json:"note,omitempty"`
	Passes   []AuditPass `json:"passes,omitempty"`
	// WithLog and WithoutLog are the passes of each state summed.
	WithLog    Result  `json:"with_log"`
	WithoutLog *Result `json:"without_log,omitempty"`
	// LogRatio is WithLog's ops/s over WithoutLog's (target ≥ 0.95).
	LogRatio float64 `json:"log_ratio,omitempty"`
	// PassSpread is as in ClaimReport: when it exceeds |1 − LogRatio| the
	// machine's noise is larger than what the log costs.
	PassSpread float64 `json:"pass_spread,omitempty"`
	// LogServerCPUUS is the server CPU per lifecycle with the log less
	// without.
	LogServerCPUUS float64 `json:"log_server_cpu_us_per_op,omitempty"`
}

// AuditPass is one pass of the audit scenario.
type AuditPass struct {
	Log bool `json:"log"`
	// Leaves is how many events got their leaf during the pass, from the
	// servers' metrics: none while the log is off, which shows the switch
	// reached every server.
	Leaves uint64 `json:"leaves"`
	Result
}

// validateAudit checks what only the audit scenario needs.
func (c Config) validateAudit() error {
	if c.Scenario == Audit && len(c.URLs) == 0 && c.Count < len(auditOrder) {
		return fmt.Errorf("--count must be at least %d for audit: it runs %d passes, the log on and off", len(auditOrder), len(auditOrder))
	}
	if c.Scenario == Audit && len(c.URLs) == 0 && c.Duration < 100*time.Millisecond {
		return fmt.Errorf("--duration must be at least 100ms for audit: it runs a warm-up and %d passes within it", len(auditOrder))
	}
	return nil
}

// runAudit runs the audit scenario.
func runAudit(ctx context.Context, cfg Config, t *target, rep *Report) error {
	run := randomHex(4)
	ar := &AuditReport{Compared: len(cfg.URLs) == 0}
	var leaves []uint64 // per measured pass
	pass := func(phase int, _ bool, duration time.Duration, count int) (Result, error) {
		before, err := t.readAudit(ctx)
		if err != nil {
			return Result{}, err
		}
		defer func() {
			if after, err := t.readAudit(ctx); err == nil && phase < len(auditOrder) {
				leaves = append(leaves, after.lag.count-before.lag.count)
			}
		}()
		return runLoad(ctx, cfg.Clients, duration, count, 0, t.serverCPU(), func(ctx context.Context, i int) (clientOp, func(), error) {
			base := t.base(i)
			inst, err := t.newInstance(ctx, base, fmt.Sprintf("bench %s-%d client %d", run, phase, i))
			if err != nil {
				return nil, nil, err
			}
			return lifecycleOp(t, base, inst, run, phase, false), nil, nil
		})
	}
	if !ar.Compared {
		ar.Note = "a server at --url always runs its audit log: the log on only, no log_ratio (it needs the run's own servers)"
		fmt.Fprintf(cfg.Progress, "audit: %d clients against %s, the log on (%s), up to %s or %d operations\n", cfg.Clients, t.describe(), ar.Note, cfg.Duration, cfg.Count)
		res, err := pass(0, true, cfg.Duration, cfg.Count)
		if err != nil {
			return err
		}
		ar.WithLog, rep.Result, rep.AuditCompare = res, res, ar
		return nil
	}
	results, err := runInterleaved(ctx, cfg, t, "audit", "log", auditOrder[:], func(on bool) error { return t.setAuditSequencing(ctx, on) }, pass)
	if err != nil {
		return err
	}
	var on, off []Result
	if len(leaves) != len(results) {
		return fmt.Errorf("audit: read the servers' metrics after %d of %d passes", len(leaves), len(results))
	}
	for i, res := range results {
		ar.Passes = append(ar.Passes, AuditPass{Log: auditOrder[i], Leaves: leaves[i], Result: res})
		if !auditOrder[i] && leaves[i] > 0 {
			return fmt.Errorf("audit pass %d, log off: %d events got their leaves: the switch did not reach every server", i+1, leaves[i])
		}
		if auditOrder[i] {
			on = append(on, res)
		} else {
			off = append(off, res)
		}
	}
	without := mergeResults(off)
	ar.WithLog, ar.WithoutLog = mergeResults(on), &without
	if without.OpsPerS > 0 {
		ar.LogRatio = round(ar.WithLog.OpsPerS/without.OpsPerS, 3)
	}
	ar.PassSpread = round(max(passSpread(on), passSpread(off)), 3)
	if ar.WithLog.ServerCPUPerOpUS > 0 && without.ServerCPUPerOpUS > 0 {
		ar.LogServerCPUUS = round(ar.WithLog.ServerCPUPerOpUS-without.ServerCPUPerOpUS, 1)
	}
	rep.Result, rep.AuditCompare = ar.WithLog, ar
	return nil
}

// switchAudit turns svc's sequencer on or off; on, it first appends every
// event that waited while it was off (on the replica holding the lease;
// the others append nothing), so that the next pass pays for its own
// events' leaves only.
func switchAudit(ctx context.Context, svc *provider.Service, on bool) error {
	svc.SetAuditSequencing(on)
	for on {
		n, err := svc.SequenceAudit(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return nil
}

// setAuditSequencing switches the sequencer on or off in every server of
// the run: in its child processes, or in this one.
func (t *target) setAuditSequencing(ctx context.Context, on bool) error {
	if len(t.children) == 0 && len(t.servers) == 0 {
		return errors.New("the audit log's sequencer can be switched only in the run's own servers, not at --url")
	}
	for _, c := range t.children {
		if err := c.setAuditSequencing(on); err != nil {
			return err
		}
	}
	for _, s := range t.servers {
		if err := switchAudit(ctx, s.svc, on); err != nil {
			return err
		}
	}
	return nil
}

// childAudit answers "audit on" and "audit off": the state the child's
// sequencer is in now, or why it could not switch.
type childAudit struct {
	Audit bool   `json:"audit"`
	Error string `json:"error,omitempty"`
}

// auditCommand answers a child's "audit on" or "audit off" with set.
func auditCommand(ctx context.Context, line string, set func(ctx context.Context, on bool) error) childAudit {
	on := line == "audit on"
	if set == nil {
		return childAudit{Error: "this server has no audit log"}
	}
	if err := set(ctx, on); err != nil {
		return childAudit{Error: err.Error()}
	}
	return childAudit{Audit: on}
}

// setAuditSequencing tells an Airlock child to run its sequencer or not,
// and checks that it did.
func (c *child) setAuditSequencing(on bool) error {
	var a childAudit
	if err := c.switchChild("audit "+onOff(on), &a); err != nil {
		return err
	}
	if a.Error != "" || a.Audit != on {
		return fmt.Errorf("the benchmark's server process %d did not switch the audit log %s: %s", c.pid, onOff(on), a.Error)
	}
	return nil
}

// writeRows adds the audit scenario's rows after the log-on row.
func (ar *AuditReport) writeRows(row func(name string, res Result)) {
	if ar.WithoutLog == nil {
		return
	}
	row("lifecycle, audit log off", *ar.WithoutLog)
	for i, p := range ar.Passes {
		row(fmt.Sprintf("  pass %d, log %s", i+1, onOff(p.Log)), p.Result)
	}
}

// writeSummary says what the audit scenario's rows mean.
func (ar *AuditReport) writeSummary(w io.Writer) {
	if !ar.Compared {
		fmt.Fprintf(w, "\naudit: create → approve → read; %s\n", ar.Note)
		return
	}
	order := make([]bool, len(ar.Passes))
	for i, p := range ar.Passes {
		order[i] = p.Log
	}
	comparison{
		scenario: "audit", what: "create → approve → read, the audit log's sequencer on and off",
		ratioName: "log_ratio", ratioOf: "lifecycles/s with the log ÷ without", cost: "the log's cost",
		cpuOf: "server CPU per lifecycle", on: "with the log", off: "without",
		ratio: ar.LogRatio, spread: ar.PassSpread, order: order,
		onCPU: ar.WithLog.ServerCPUPerOpUS, offCPU: ar.WithoutLog.ServerCPUPerOpUS, deltaCPU: ar.LogServerCPUUS,
	}.write(w)
}
