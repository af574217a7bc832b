package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Interleaved passes measure what one feature costs on the same warm
// servers: the claim scenario switches approval tokens, the audit scenario
// the audit log's sequencer, the mcp scenario the MCP revision its clients
// speak (nothing switches on the server there). An unmeasured warm-up with the feature on
// comes first, so that connections, caches and the store's first pages are
// the same for every measured pass; then the passes of a balanced order
// (on, off, off, on), so that what drifts steadily over a run (the store
// grows, a neighbour's load rises or falls) weighs on both states alike.

// interleavedWarmup is the warm-up's share of the run's duration and count
// bounds; the measured passes share the rest equally.
const interleavedWarmup = 10

// runInterleaved runs the warm-up and then one pass for each state of
// order, switching every server of the run with set before each (and to
// on after the last, as the servers always are), and returns the passes'
// results in order. scenario and feature name them in the progress lines.
// The warm-up and the passes together run at most cfg.Duration and issue
// at most cfg.Count operations.
func runInterleaved(ctx context.Context, cfg Config, t *target, scenario, feature string, order []bool,
	set func(on bool) error, pass func(phase int, on bool, d time.Duration, count int) (Result, error)) ([]Result, error) {
	return runInterleavedNamed(ctx, cfg, t, scenario, func(on bool) string { return feature + " " + onOff(on) }, order, set, pass)
}

// runInterleavedNamed is runInterleaved with the states named by state
// ("tokens on", "at 2026-07-28") in the progress lines and errors.
func runInterleavedNamed(ctx context.Context, cfg Config, t *target, scenario string, state func(on bool) string, order []bool,
	set func(on bool) error, pass func(phase int, on bool, d time.Duration, count int) (Result, error)) ([]Result, error) {
	n := len(order)
	warmDuration, warmCount := cfg.Duration/interleavedWarmup, cfg.Count/interleavedWarmup
	duration, counts := (cfg.Duration-warmDuration)/time.Duration(n), cfg.Count-warmCount
	if err := set(true); err != nil {
		return nil, err
	}
	if warmCount > 0 {
		fmt.Fprintf(cfg.Progress, "%s warm-up, %s, not measured: %d clients against %s, up to %s or %d operations\n",
			scenario, state(true), cfg.Clients, t.describe(), warmDuration, warmCount)
		if _, err := pass(n, true, warmDuration, warmCount); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", scenario, err)
		}
	}
	var results []Result
	for i, on := range order {
		count := counts / n
		if i < counts%n {
			count++
		}
		if err := set(on); err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Progress, "%s pass %d of %d, %s: %d clients against %s, up to %s or %d operations\n",
			scenario, i+1, n, state(on), cfg.Clients, t.describe(), duration, count)
		res, err := pass(i, on, duration, count)
		if err != nil {
			return nil, fmt.Errorf("%s pass %d, %s: %w", scenario, i+1, state(on), err)
		}
		results = append(results, res)
	}
	if err := set(true); err != nil {
		return nil, err
	}
	return results, nil
}

// comparison is what the summary of an interleaved scenario says: its
// ratio between the states, the passes' order and spread, and the server's
// CPU per operation in each state.
type comparison struct {
	scenario, what string // "claim", "create → approve → claim, …"
	ratioName      string // "tokens_ratio"
	ratioOf        string // "claims/s with tokens ÷ without"
	cost           string // "the token's cost"
	cpuOf          string // "server CPU per claim"
	on, off        string // "with tokens", "without"
	ratio, spread  float64
	// target is the ratio's target (default 0.95); targetNote, when set,
	// says instead where the target is.
	target     float64
	targetNote string
	order      []bool
	// orderOf names the states in the passes' order (default on, off).
	orderOf       map[bool]string
	onCPU, offCPU float64
	deltaCPU      float64
	// cpuRatioName, when set, names onCPU ÷ offCPU, cpuRatio (what
	// cpuRatioOf says), whose target is ≤ cpuTarget.
	cpuRatioName, cpuRatioOf string
	cpuRatio, cpuTarget      float64
}

// write writes the summary.
func (c comparison) write(w io.Writer) {
	order := make([]string, len(c.order))
	for i, on := range c.order {
		order[i] = onOff(on)
		if c.orderOf != nil {
			order[i] = c.orderOf[on]
		}
	}
	fmt.Fprintf(w, "\n%s: %s\n", c.scenario, c.what)
	target := c.target
	if target == 0 {
		target = 0.95
	}
	targetNote := fmt.Sprintf("target ≥ %.2f", target)
	if c.targetNote != "" {
		targetNote = c.targetNote
	}
	fmt.Fprintf(w, "%s: %.3f (%s, passes %s on the same warm server; %s)\n",
		c.ratioName, c.ratio, c.ratioOf, strings.Join(order, ", "), targetNote)
	if c.spread > math.Abs(1-c.ratio) {
		fmt.Fprintf(w, "noisy: passes of one state differ by up to %.0f%%, the states by %.0f%%: the machine's noise is larger than %s; run again, or longer\n",
			100*c.spread, 100*math.Abs(1-c.ratio), c.cost)
	}
	if c.onCPU > 0 && c.offCPU > 0 {
		fmt.Fprintf(w, "%s: %.0f µs %s, %.0f µs %s (%+.0f µs)\n", c.cpuOf, c.onCPU, c.on, c.offCPU, c.off, c.deltaCPU)
	}
	switch {
	case c.cpuRatioName != "" && c.cpuRatio > 0:
		fmt.Fprintf(w, "%s: %.3f (%s; target ≤ %.2f)\n", c.cpuRatioName, c.cpuRatio, c.cpuRatioOf, c.cpuTarget)
	case c.cpuRatioName != "":
		fmt.Fprintf(w, "%s: not measured: it needs the server's CPU, which a run measures on its own servers or with --server-pid\n", c.cpuRatioName)
	}
}

// switchChild sends an Airlock child a switch command ("tokens on",
// "audit off", …) and decodes its one-line answer into answer.
func (c *child) switchChild(command string, answer any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.stdin, command+"\n"); err != nil {
		return fmt.Errorf("send %q to the benchmark's server process %d: %w", command, c.pid, err)
	}
	l, err := c.rd.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read the answer of the benchmark's server process %d to %q: %w", c.pid, command, err)
	}
	if err := json.Unmarshal(l, answer); err != nil {
		return fmt.Errorf("the benchmark's server process %d answered %q with %.200q: %w", c.pid, command, l, err)
	}
	return nil
}
