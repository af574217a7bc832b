package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// clientOp is one client's operation; the load loop calls it until the
// run's bounds are reached.
type clientOp func(ctx context.Context, n int64) error

// cpuReader reads the CPU time (user and system) a server apart from this
// process has used so far.
type cpuReader func() (time.Duration, error)

// giveUpAfter is how many errors, with not one success, stop a run: the
// target is refusing everything, and the report would measure nothing.
const giveUpAfter = 200

// runLoad runs op on clients concurrent clients until count operations
// have been issued or duration has passed, whichever is first, and
// measures the successful ones. prepare makes client i's op (its instance,
// its MCP session) before the clock starts; done, when set, undoes it.
//
// With rate > 0 the operations are issued on a schedule, rate per second
// in all, instead of as fast as the clients go: operation n is due at
// start + n/rate, and its latency runs from when it was due, so a server
// that falls behind shows it in the latency rather than by slowing the
// schedule (no coordinated omission). The clients must be enough to keep
// up; an operation that starts late still counts its wait.
//
// server, when set, reads the CPU time of a server in another process:
// read at the start and the end of the measured window, as this process's
// own is, it splits the CPU per operation between the server and the
// clients.
func runLoad(ctx context.Context, clients int, duration time.Duration, count int, rate float64, server cpuReader,
	prepare func(ctx context.Context, i int) (clientOp, func(), error),
) (Result, error) {
	ops := make([]clientOp, clients)
	for i := range clients {
		op, done, err := prepare(ctx, i)
		if err != nil {
			return Result{}, fmt.Errorf("prepare client %d: %w", i, err)
		}
		if done != nil {
			defer done()
		}
		ops[i] = op
	}
	var (
		issued, ok, failed atomic.Int64
		mu                 sync.Mutex
		kinds              = map[string]int64{}
		firstErr           error
		all, lags          samples
		wg                 sync.WaitGroup
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var srv0 time.Duration
	if server != nil {
		var err error
		if srv0, err = server(); err != nil {
			return Result{}, err
		}
	}
	cpu0 := cpuTime()
	start := time.Now()
	end := start.Add(duration)
	for i := range clients {
		wg.Go(func() {
			var mine, lag samples
			for time.Now().Before(end) && runCtx.Err() == nil {
				n := issued.Add(1)
				if n > int64(count) {
					break
				}
				t0 := time.Now()
				if rate > 0 {
					due := start.Add(time.Duration(float64(n-1) / rate * float64(time.Second)))
					if !due.Before(end) {
						break
					}
					if wait := time.Until(due); wait > 0 {
						select {
						case <-time.After(wait):
						case <-runCtx.Done():
						}
					}
					t0 = due
				}
				if rate > 0 {
					lag = append(lag, time.Since(t0))
				}
				err := ops[i](runCtx, n)
				d := time.Since(t0)
				if err != nil {
					if runCtx.Err() != nil && ctx.Err() == nil {
						break // stopped by giving up, not a failure of this op
					}
					mu.Lock()
					kinds[kind(err)]++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					if failed.Add(1) >= giveUpAfter && ok.Load() == 0 {
						cancel()
					}
					continue
				}
				ok.Add(1)
				mine = append(mine, d)
			}
			mu.Lock()
			all = append(all, mine...)
			lags = append(lags, lag...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := cpuTime()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var srv1 time.Duration
	if server != nil {
		var err error
		if srv1, err = server(); err != nil {
			return Result{}, err
		}
	}
	if ok.Load() == 0 && failed.Load() > 0 {
		return Result{}, fmt.Errorf("every operation failed (%d), the first with: %w%s", failed.Load(), firstErr, hint(firstErr))
	}
	res := Result{Ops: ok.Load(), Errors: failed.Load(), ElapsedS: round(elapsed.Seconds(), 3), LatencyMS: all.latency(), lat: all}
	if rate > 0 && len(lags) > 0 {
		l := lags.latency()
		res.StartLagMS = &l
	}
	if len(kinds) > 0 {
		res.ErrorKinds = kinds
	}
	if elapsed > 0 {
		res.OpsPerS = round(float64(res.Ops)/elapsed.Seconds(), 1)
	}
	if cpu0 >= 0 && cpu1 >= cpu0 && res.Ops > 0 {
		res.CPUPerOpUS = round(float64((cpu1-cpu0).Microseconds())/float64(res.Ops), 1)
		if server != nil {
			res.ClientCPUPerOpUS = res.CPUPerOpUS
		}
	}
	if server != nil && srv1 >= srv0 && res.Ops > 0 {
		res.ServerCPUPerOpUS = round(float64((srv1-srv0).Microseconds())/float64(res.Ops), 1)
	}
	return res, nil
}

// hint says what to do about an error every operation got.
func hint(err error) string {
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusTooManyRequests {
		return " (the server's per-token rate limit: start it with --rate-limit 1000000 for a benchmark)"
	}
	return ""
}

// runLoadScenario runs lifecycle, create, mcp, grant or consume.
func runLoadScenario(ctx context.Context, cfg Config, t *target, rep *Report) error {
	// run names this scenario's keys; phase, the runLoad call (--half-max
	// makes two), so that no key is used twice.
	run, phase := randomHex(4), 0
	// grants are the grant scenario's grants, by phase.
	grants := map[int][]string{}
	var prepare func(ctx context.Context, i int) (clientOp, func(), error)
	// setup, when set, runs before each runLoad, outside its window.
	var setup func(ctx context.Context) error
	// measure is one runLoad of phase, its servers profiled over its
	// window when the run profiles windows (the paced run's to the
	// --cpuprofile file, --half-max's maximum to the file with .max).
	measure := func(rate float64, suffix string) (Result, error) {
		if setup != nil {
			if err := setup(ctx); err != nil {
				return Result{}, err
			}
		}
		stopProfile, err := t.windowProfile(cfg, suffix)
		if err != nil {
			return Result{}, err
		}
		res, err := runLoad(ctx, cfg.Clients, cfg.Duration, cfg.Count, rate, t.serverCPU(), prepare)
		if perr := stopProfile(); err == nil {
			err = perr
		}
		return res, err
	}
	// afterSetup is the audit log's reading once a consume run's setup was
	// sequenced; the run's audit timing starts there.
	var afterSetup *auditReading
	// mcpLog reads the MCP revision of the mcp scenario's calls.
	var mcpLog *revisionLog
	switch cfg.Scenario {
	case Lifecycle, Create:
		prepare = func(ctx context.Context, i int) (clientOp, func(), error) {
			base, ph := t.base(i), phase
			inst, err := t.newInstance(ctx, base, fmt.Sprintf("bench %s-%d client %d", run, ph, i))
			if err != nil {
				return nil, nil, err
			}
			return lifecycleOp(t, base, inst, run, ph, cfg.Scenario == Create), nil, nil
		}
	case Grant:
		prepare = func(ctx context.Context, i int) (clientOp, func(), error) {
			ph := phase
			op, done, id, err := prepareGrant(ctx, cfg, t, i, run, ph)
			if err == nil {
				grants[ph] = append(grants[ph], id)
			}
			return op, done, err
		}
	case Consume:
		var pool *tokenPool
		// Each runLoad (phase) consumes tokens of its own, made before it
		// starts, so that a window's profile leaves them out.
		setup = func(ctx context.Context) error {
			var err error
			if pool, err = makeTokens(ctx, cfg, t, run, phase); err != nil {
				return err
			}
			// The tokens' creates, decisions and claims are events the
			// sequencer appends after their commits: let it catch up, so
			// that the consumes are measured alone and the run's audit
			// timing counts their leaves only.
			if r, err := t.auditCaughtUp(ctx); err == nil {
				afterSetup = &r
			}
			return nil
		}
		prepare = func(ctx context.Context, i int) (clientOp, func(), error) {
			return consumeOp(t, i, pool), nil, nil
		}
	case MCP:
		// Only with --half-max (runMCP runs the scenario otherwise): its
		// runs are at 2026-07-28, every call checked for it.
		mcpLog = newRevisionLog(mcpRevision(true), t.hc.Transport)
		prepare = func(ctx context.Context, i int) (clientOp, func(), error) {
			return mcpClient(ctx, cfg, t, i, mcpRevision(true), mcpLog, run, phase)
		}
	}
	rate := cfg.Rate
	if cfg.HalfMax {
		fmt.Fprintf(cfg.Progress, "%s: %d clients against %s, as fast as they go for up to %s or %d operations, to find the maximum\n",
			cfg.Scenario, cfg.Clients, t.describe(), cfg.Duration, cfg.Count)
		maxRes, err := measure(0, "max")
		if err != nil {
			return err
		}
		rep.Max = &maxRes
		phase++
		rate = math.Round(maxRes.OpsPerS / 2)
		if rate < 1 {
			return fmt.Errorf("the maximum was %.2f operations/s: too few to pace at half of it", maxRes.OpsPerS)
		}
		rep.Bounds.Rate = rate
	}
	paced := ""
	if rate > 0 {
		paced = fmt.Sprintf(", paced at %g/s", rate)
	}
	fmt.Fprintf(cfg.Progress, "%s: %d clients against %s, up to %s or %d operations%s\n", cfg.Scenario, cfg.Clients, t.describe(), cfg.Duration, cfg.Count, paced)
	before, auditErr := t.readAudit(ctx)
	res, err := measure(rate, "")
	if err != nil {
		return err
	}
	rep.Result = res
	if afterSetup != nil {
		before, auditErr = *afterSetup, nil
	}
	if auditErr == nil {
		rep.Audit, auditErr = t.auditTimingSince(ctx, before)
	}
	if auditErr != nil {
		fmt.Fprintf(cfg.Progress, "no audit log timing: %v\n", auditErr)
	}
	if mcpLog != nil {
		if _, err := mcpLog.check(); err != nil {
			return err
		}
		rep.MCP = &MCPReport{At2026: res, Note: "with --half-max both runs are at 2026-07-28: no revision_ratio (leave out --half-max for it)"}
	}
	if cfg.Scenario == Grant {
		if rep.Grant, err = grantReport(ctx, t, grants[phase]); err != nil {
			return err
		}
	}
	if cfg.Webhooks > 0 {
		return runWebhooks(ctx, cfg, t, rep, func(rate float64) (Result, error) {
			phase++
			return runLoad(ctx, cfg.Clients, cfg.Duration, cfg.Count, rate, t.serverCPU(), prepare)
		})
	}
	return nil
}

// lifecycleOp is a client's operation of the lifecycle scenario: create,
// approve, read, on its instance inst; createOnly stops after the create
// (the create scenario). run and phase name its idempotency keys.
func lifecycleOp(t *target, base, inst, run string, phase int, createOnly bool) clientOp {
	return func(ctx context.Context, n int64) error {
		key := fmt.Sprintf("bench-%s-%d-%d", run, phase, n)
		r, err := t.create(ctx, base, inst, key, requestBody(n, "1h"))
		if err != nil || createOnly {
			return err
		}
		if err := t.approveCreated(ctx, base, r); err != nil {
			return err
		}
		got, err := t.read(ctx, base, r.ID)
		if err == nil && got.State != "approved" {
			err = fmt.Errorf("read %s as %s, want approved", r.ID, got.State)
		}
		return err
	}
}

// requestBody is a CreateApprovalRequest like an adapter's.
func requestBody(n int64, timeout string) string {
	return fmt.Sprintf(`{"tool":"payments.refund","arguments":{"payment_id":"pay_%d","amount":4900,"currency":"GBP"},"timeout":%q,"agent_reasoning":"The customer was charged twice.","context":{"bench":true}}`, n, timeout)
}
