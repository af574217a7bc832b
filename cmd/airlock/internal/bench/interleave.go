package bench

import (
	"context"
	"fmt"
	"time"
)

// Interleaved passes measure what one feature costs on the same warm
// servers: the claim scenario switches approval tokens, the audit scenario
// the audit log's sequencer. An unmeasured warm-up with the feature on
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
	n := len(order)
	warmDuration, warmCount := cfg.Duration/interleavedWarmup, cfg.Count/interleavedWarmup
	duration, counts := (cfg.Duration-warmDuration)/time.Duration(n), cfg.Count-warmCount
	if err := set(true); err != nil {
		return nil, err
	}
	if warmCount > 0 {
		fmt.Fprintf(cfg.Progress, "%s warm-up, %s on, not measured: %d clients against %s, up to %s or %d operations\n",
			scenario, feature, cfg.Clients, t.describe(), warmDuration, warmCount)
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
		fmt.Fprintf(cfg.Progress, "%s pass %d of %d, %s %s: %d clients against %s, up to %s or %d operations\n",
			scenario, i+1, n, feature, onOff(on), cfg.Clients, t.describe(), duration, count)
		res, err := pass(i, on, duration, count)
		if err != nil {
			return nil, fmt.Errorf("%s pass %d, %s %s: %w", scenario, i+1, feature, onOff(on), err)
		}
		results = append(results, res)
	}
	if err := set(true); err != nil {
		return nil, err
	}
	return results, nil
}
