package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// The claim scenario is a lifecycle that ends in the execution claim:
// create → approve (a reviewer's decision) → claim, per client in a loop.
// Every successful claim signs an approval token (docs/tokens.md), so the
// scenario measures what signing costs: on its own servers it runs passes
// with tokens on and off, interleaved on the same warm servers, and
// reports each state and tokens_ratio, their claims per second
// (docs/performance.md, "What an approval token costs").

// claimOrder is the claim scenario's measured passes: whether each signs
// tokens (interleave.go says why in this order).
var claimOrder = [...]bool{true, false, false, true}

// errNoToken is a claim answered without an approval token while tokens
// are on: a server that silently stopped signing must not be measured.
var errNoToken = errors.New("claim answered without an approval token")

// errUnexpectedToken is a claim answered with a token while tokens are
// off: the switch did not reach the server, and the pass would measure
// signing under the wrong name.
var errUnexpectedToken = errors.New("claim answered with an approval token while tokens are off")

// ClaimReport is what the claim scenario measured.
type ClaimReport struct {
	// Compared says whether the run measured with tokens and without: on
	// its own servers it does; a server at --url always signs, and the run
	// measures tokens on only (Note says so).
	Compared bool   `json:"compared"`
	Note     string `json:"note,omitempty"`
	// Passes are the measured passes in the order they ran.
	Passes []ClaimPass `json:"passes,omitempty"`
	// WithTokens and WithoutTokens are the passes of each state summed:
	// their operations over their time, their latencies together, their
	// CPU over their operations.
	WithTokens    Result  `json:"with_tokens"`
	WithoutTokens *Result `json:"without_tokens,omitempty"`
	// TokensRatio is WithTokens' ops/s over WithoutTokens' (target ≥ 0.95).
	TokensRatio float64 `json:"tokens_ratio,omitempty"`
	// PassSpread is how far apart the passes of one state are: the
	// larger, over the two states, of (fastest − slowest) ÷ slowest in
	// ops/s. When it exceeds |1 − TokensRatio| the machine's noise is
	// larger than what the token costs, and the ratio says only that.
	PassSpread float64 `json:"pass_spread,omitempty"`
	// TokenServerCPUUS is the server CPU per claim with tokens less
	// without: what signing a token costs the server, within the
	// measurement's noise (it can come out negative).
	TokenServerCPUUS float64 `json:"token_server_cpu_us_per_op,omitempty"`
}

// ClaimPass is one pass of the claim scenario.
type ClaimPass struct {
	Tokens bool `json:"tokens"`
	Result
}

// validateClaim checks what only the claim scenario needs.
func (c Config) validateClaim() error {
	if c.Scenario == Claim && len(c.URLs) == 0 && c.Count < len(claimOrder) {
		return fmt.Errorf("--count must be at least %d for claim: it runs %d passes, tokens on and off", len(claimOrder), len(claimOrder))
	}
	if c.Scenario == Claim && len(c.URLs) == 0 && c.Duration < 100*time.Millisecond {
		return fmt.Errorf("--duration must be at least 100ms for claim: it runs a warm-up and %d passes within it", len(claimOrder))
	}
	return nil
}

// apiClaim is the part of a claim's answer the scenario checks.
type apiClaim struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Execution *struct {
		Status        string `json:"status"`
		ApprovalToken string `json:"approval_token"`
	} `json:"execution"`
}

// checkClaim checks the answer to the claim of request id: that request,
// its execution claimed, with a token exactly when tokens are on.
func checkClaim(id string, c apiClaim, tokens bool) error {
	if c.ID != id || c.State != "approved" || c.Execution == nil || c.Execution.Status != "claimed" {
		return fmt.Errorf("claimed %s, but the answer is %s %s with execution %+v, want it approved and claimed", id, c.ID, c.State, c.Execution)
	}
	tok := c.Execution.ApprovalToken
	switch {
	case tokens && tok == "":
		return fmt.Errorf("claimed %s: %w", id, errNoToken)
	case tokens && strings.Count(tok, ".") != 2:
		return fmt.Errorf("claimed %s, but its approval token %.40q… is not a compact JWS: %w", id, tok, errNoToken)
	case !tokens && tok != "":
		return fmt.Errorf("claimed %s: %w", id, errUnexpectedToken)
	}
	return nil
}

// claimOp is client i's operation in one pass: create, approve, claim,
// on an instance of the client's own.
func claimOp(t *target, base, inst, run string, phase int, tokens bool) clientOp {
	return func(ctx context.Context, n int64) error {
		key := fmt.Sprintf("bench-%s-%d-%d", run, phase, n)
		r, err := t.create(ctx, base, inst, key, requestBody(n, "1h"))
		if err != nil {
			return err
		}
		if err := t.approveCreated(ctx, base, r); err != nil {
			return err
		}
		var c apiClaim
		if err := t.call(ctx, "POST", base, "/v1/approval-requests/"+r.ID+"/execution", t.agent, "", &c); err != nil {
			return fmt.Errorf("claim %s: %w", r.ID, err)
		}
		return checkClaim(r.ID, c, tokens)
	}
}

// runClaim runs the claim scenario: on the run's own servers, the passes
// of claimOrder, each a share of the duration and count bounds, with the
// servers' signing switched before each; on servers at --url, one run
// with tokens on.
func runClaim(ctx context.Context, cfg Config, t *target, rep *Report) error {
	run := randomHex(4)
	cr := &ClaimReport{Compared: len(cfg.URLs) == 0}
	pass := func(phase int, tokens bool, duration time.Duration, count int) (Result, error) {
		return runLoad(ctx, cfg.Clients, duration, count, 0, t.serverCPU(), func(ctx context.Context, i int) (clientOp, func(), error) {
			base := t.base(i)
			inst, err := t.newInstance(ctx, base, fmt.Sprintf("bench %s-%d client %d", run, phase, i))
			if err != nil {
				return nil, nil, err
			}
			return claimOp(t, base, inst, run, phase, tokens), nil, nil
		})
	}
	if !cr.Compared {
		cr.Note = "a server at --url always signs: tokens on only, no tokens_ratio (it needs the run's own servers)"
		fmt.Fprintf(cfg.Progress, "claim: %d clients against %s, tokens on (%s), up to %s or %d operations\n", cfg.Clients, t.describe(), cr.Note, cfg.Duration, cfg.Count)
		res, err := pass(0, true, cfg.Duration, cfg.Count)
		if err != nil {
			return err
		}
		cr.WithTokens, rep.Result, rep.Claim = res, res, cr
		return nil
	}
	results, err := runInterleaved(ctx, cfg, t, "claim", "tokens", claimOrder[:], t.setApprovalTokens, pass)
	if err != nil {
		return err
	}
	var on, off []Result
	for i, res := range results {
		tokens := claimOrder[i]
		cr.Passes = append(cr.Passes, ClaimPass{Tokens: tokens, Result: res})
		if tokens {
			on = append(on, res)
		} else {
			off = append(off, res)
		}
	}
	without := mergeResults(off)
	cr.WithTokens, cr.WithoutTokens = mergeResults(on), &without
	if without.OpsPerS > 0 {
		cr.TokensRatio = round(cr.WithTokens.OpsPerS/without.OpsPerS, 3)
	}
	cr.PassSpread = round(max(passSpread(on), passSpread(off)), 3)
	if cr.WithTokens.ServerCPUPerOpUS > 0 && without.ServerCPUPerOpUS > 0 {
		cr.TokenServerCPUUS = round(cr.WithTokens.ServerCPUPerOpUS-without.ServerCPUPerOpUS, 1)
	}
	rep.Result, rep.Claim = cr.WithTokens, cr
	return nil
}

// passSpread is (fastest − slowest) ÷ slowest of rs' ops/s.
func passSpread(rs []Result) float64 {
	if len(rs) < 2 {
		return 0
	}
	lo, hi := rs[0].OpsPerS, rs[0].OpsPerS
	for _, r := range rs[1:] {
		lo, hi = min(lo, r.OpsPerS), max(hi, r.OpsPerS)
	}
	if lo <= 0 {
		return 0
	}
	return (hi - lo) / lo
}

// noisy reports whether the passes of one state are further apart than
// the two states: the ratio is then within the machine's noise.
func (cr *ClaimReport) noisy() bool {
	return cr.Compared && cr.PassSpread > math.Abs(1-cr.TokensRatio)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// mergeResults sums passes of one state into one result: operations and
// errors added, ops/s over their time together, latencies from every
// operation, CPU per operation over all of them.
func mergeResults(rs []Result) Result {
	var (
		out               Result
		all               samples
		cpu, server, clnt float64
		elapsed           float64
		kinds             = map[string]int64{}
	)
	for _, r := range rs {
		out.Ops += r.Ops
		out.Errors += r.Errors
		for k, v := range r.ErrorKinds {
			kinds[k] += v
		}
		elapsed += r.ElapsedS
		all = append(all, r.lat...)
		cpu += r.CPUPerOpUS * float64(r.Ops)
		server += r.ServerCPUPerOpUS * float64(r.Ops)
		clnt += r.ClientCPUPerOpUS * float64(r.Ops)
	}
	out.ElapsedS = round(elapsed, 3)
	out.LatencyMS = all.latency()
	out.lat = all
	if len(kinds) > 0 {
		out.ErrorKinds = kinds
	}
	if elapsed > 0 {
		out.OpsPerS = round(float64(out.Ops)/elapsed, 1)
	}
	if out.Ops > 0 {
		ops := float64(out.Ops)
		out.CPUPerOpUS, out.ServerCPUPerOpUS, out.ClientCPUPerOpUS = round(cpu/ops, 1), round(server/ops, 1), round(clnt/ops, 1)
	}
	return out
}

// setApprovalTokens switches signing on or off in every server of the
// run: in its child processes, or in this one.
func (t *target) setApprovalTokens(on bool) error {
	if len(t.children) == 0 && len(t.servers) == 0 {
		return errors.New("approval tokens can be switched only in the run's own servers, not at --url")
	}
	for _, c := range t.children {
		if err := c.setApprovalTokens(on); err != nil {
			return err
		}
	}
	for _, s := range t.servers {
		s.svc.SetApprovalTokens(on)
	}
	return nil
}

// childTokens answers "tokens on" and "tokens off": the state the child's
// server signs in now, or why it could not switch.
type childTokens struct {
	Tokens bool   `json:"tokens"`
	Error  string `json:"error,omitempty"`
}

// setApprovalTokens tells an Airlock child to sign approval tokens or not,
// and checks that it did.
func (c *child) setApprovalTokens(on bool) error {
	var a childTokens
	if err := c.switchChild("tokens "+onOff(on), &a); err != nil {
		return err
	}
	if a.Error != "" || a.Tokens != on {
		return fmt.Errorf("the benchmark's server process %d did not switch approval tokens %s: %s (tokens %s)", c.pid, onOff(on), a.Error, onOff(a.Tokens))
	}
	return nil
}

// tokensCommand answers a child's "tokens on" or "tokens off" with
// switch, the server's SetApprovalTokens (nil where the child's server
// signs nothing).
func tokensCommand(line string, set func(on bool)) childTokens {
	on := line == "tokens on"
	if set == nil {
		return childTokens{Error: "this server signs no approval tokens"}
	}
	set(on)
	return childTokens{Tokens: on}
}

// writeRows adds the claim scenario's rows to the report's table, after
// the tokens-on row: the tokens-off one, then each pass.
func (cr *ClaimReport) writeRows(row func(name string, res Result)) {
	if cr.WithoutTokens == nil {
		return
	}
	row("claim, tokens off", *cr.WithoutTokens)
	for i, p := range cr.Passes {
		row(fmt.Sprintf("  pass %d, tokens %s", i+1, onOff(p.Tokens)), p.Result)
	}
}

// writeSummary says what the claim scenario's rows mean.
func (cr *ClaimReport) writeSummary(w io.Writer) {
	if !cr.Compared {
		fmt.Fprintf(w, "\nclaim: create → approve → claim, each claim checked for its approval token; %s\n", cr.Note)
		return
	}
	order := make([]bool, len(cr.Passes))
	for i, p := range cr.Passes {
		order[i] = p.Tokens
	}
	comparison{
		scenario: "claim", what: "create → approve → claim, each claim checked for its approval token (and for none while tokens are off)",
		ratioName: "tokens_ratio", ratioOf: "claims/s with tokens ÷ without", cost: "the token's cost",
		cpuOf: "server CPU per claim", on: "with tokens", off: "without",
		ratio: cr.TokensRatio, spread: cr.PassSpread, order: order,
		onCPU: cr.WithTokens.ServerCPUPerOpUS, offCPU: cr.WithoutTokens.ServerCPUPerOpUS, deltaCPU: cr.TokenServerCPUUS,
	}.write(w)
}
