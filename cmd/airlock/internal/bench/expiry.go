package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/airlockhq/airlock/store/sqlite"
)

// Expiry scenario parameters.
const (
	// expirySample is how many requests are created first to learn the
	// creation rate, from which the common deadline is planned.
	expirySample = 200
	// expiryWaiters is how many of the due requests have a long-poll
	// waiting, to see that expiry wakes waiters.
	expiryWaiters = 100
	// minLeft is the least window a request may be created with: the
	// server's default --min-timeout is 1s.
	minLeft = 1100 * time.Millisecond
	// expiryPerInstance is the most requests one instance holds: a real
	// backlog is spread over many agents, and one instance holding them
	// all would make its pending counter one hot row.
	expiryPerInstance = 1000
	// sweepHoldBound is how long a sweep may hold SQLite's writer (the
	// target in docs/performance.md, "Expiry of a large backlog"); the
	// report counts the write transactions over it.
	sweepHoldBound = 25 * time.Millisecond
	// sweepCallBound is how long a sweep on PostgreSQL may take (the same
	// section's target); the report counts the sweep calls over it.
	sweepCallBound = 60 * time.Millisecond
)

// runExpiry is the expiry scenario: cfg.Count requests are created with
// windows that end at one common instant, some with a long-poll waiting;
// it measures how long after that instant the last one was expired, the
// rate of expiry, the longest sweep transaction (in-process), and when the
// waiters heard.
func runExpiry(ctx context.Context, cfg Config, t *target, rep *Report) error {
	n := cfg.Count
	base := t.urls[0]
	setup, cancel := context.WithTimeout(ctx, setupBudget(n))
	defer cancel()
	workers := max(cfg.Clients, 1)

	// Learn the creation rate on a sample, then withdraw the sample.
	sampleInst, err := t.newInstance(setup, base, "bench expiry sample")
	if err != nil {
		return err
	}
	k := min(expirySample, n)
	s0 := time.Now()
	if _, err := t.createMany(setup, sampleInst, k, workers, func(i int) (string, error) { return requestBody(int64(i), "1h"), nil }); err != nil {
		return fmt.Errorf("create the sample: %w", err)
	}
	perReq := time.Since(s0) / time.Duration(k)
	if err := t.call(setup, "DELETE", base, "/v1/instances/"+sampleInst, t.agent, "", nil); err != nil {
		return err
	}
	deadline := time.Now().Add(max(3*time.Second, time.Duration(n)*perReq*3+5*time.Second))
	fmt.Fprintf(cfg.Progress, "expiry: creating %d requests due together at %s (%.0f creates/s measured)\n",
		n, deadline.Format("15:04:05.000"), float64(time.Second)/float64(perReq))

	// The requests, spread over instances of at most expiryPerInstance.
	reqs := make([]apiRequest, 0, n)
	for lo := 0; lo < n; lo += expiryPerInstance {
		hi := min(lo+expiryPerInstance, n)
		inst, err := t.newInstance(setup, base, fmt.Sprintf("bench expiry %d", lo/expiryPerInstance))
		if err != nil {
			return err
		}
		part, err := t.createMany(setup, inst, hi-lo, workers, func(i int) (string, error) {
			left := time.Until(deadline)
			if left < minLeft {
				return "", fmt.Errorf("creating %d requests is slower than planned: %d created with %s left before their common deadline; lower --count or raise --clients", n, lo+i, left.Round(time.Millisecond))
			}
			return requestBody(int64(lo+i), fmt.Sprintf("%dus", left.Microseconds())), nil
		})
		if err != nil {
			return err
		}
		reqs = append(reqs, part...)
	}
	first, last := reqs[0].DeadlineAt, reqs[0].DeadlineAt
	for _, r := range reqs {
		if r.DeadlineAt.Before(first) {
			first = r.DeadlineAt
		}
		if r.DeadlineAt.After(last) {
			last = r.DeadlineAt
		}
	}
	x := &ExpiryReport{Pending: n, DeadlineSpreadMS: ms(last.Sub(first))}
	rep.Expiry = x

	// Long-polls on a sample of the requests, spread over them. Their wait
	// outlasts the deadline, which may be minutes away: they go through a
	// client without t.hc's whole-call timeout (2 minutes), bounded
	// instead by a context that ends a minute after their wait would.
	nw := min(expiryWaiters, n)
	heard := make([]answer, nw)
	deadlines := make([]time.Time, nw)
	var wg sync.WaitGroup
	waitFor := time.Until(last) + 30*time.Second
	wait := fmt.Sprintf("%dms", waitFor.Milliseconds())
	poll := &http.Client{Transport: t.hc.Transport}
	pctx, pcancel := context.WithTimeout(ctx, waitFor+time.Minute)
	defer pcancel()
	for i := range nw {
		r := reqs[i*n/nw]
		deadlines[i] = r.DeadlineAt
		wg.Go(func() {
			req, err := http.NewRequestWithContext(pctx, "GET", base+"/v1/approval-requests/"+r.ID+"?wait="+wait, nil)
			if err != nil {
				heard[i] = answer{err: err}
				return
			}
			req.Header.Set("Authorization", "Bearer "+t.agent)
			resp, err := poll.Do(req)
			at := time.Now()
			if err != nil {
				heard[i] = answer{err: err, at: at}
				return
			}
			defer resp.Body.Close()
			var got apiRequest
			if resp.StatusCode != http.StatusOK {
				heard[i] = answer{err: &httpError{status: resp.StatusCode}, at: at}
				return
			}
			if err := decodeBody(resp, &got); err != nil {
				heard[i] = answer{err: err, at: at}
				return
			}
			heard[i] = answer{state: got.State, at: at}
		})
	}
	wctx, wcancel := context.WithDeadline(setup, first.Add(-100*time.Millisecond))
	err = t.awaitWaiters(wctx, nw)
	wcancel()
	if err != nil {
		fmt.Fprintf(cfg.Progress, "expiry: not every waiter was in place before the deadline (%v)\n", err)
	}

	// Wait for the deadline, then until every request has expired.
	// In-process, the sweeps say so (counting pending requests would
	// itself load the store); over --url, the server's pending gauge.
	fmt.Fprintf(cfg.Progress, "expiry: waiting for the deadline and for every request to expire (up to %s after it)\n", cfg.Duration)
	rowsBefore := t.sweeps.rows.Load()
	select {
	case <-time.After(time.Until(first)):
	case <-ctx.Done():
		return ctx.Err()
	}
	limit := last.Add(cfg.Duration)
	stopProfile, err := cfg.phaseProfile("")
	if err != nil {
		return err
	}
	defer stopProfile()
	var allExpired time.Time
	for {
		left := int64(n) - (t.sweeps.rows.Load() - rowsBefore)
		if len(t.servers) == 0 {
			p, err := t.pending(ctx)
			if err != nil {
				return err
			}
			left = int64(p)
		}
		if left <= 0 {
			allExpired = time.Now()
			stopProfile()
			break
		}
		if time.Now().After(limit) {
			return fmt.Errorf("%d of %d requests still pending %s after their deadline", left, n, cfg.Duration)
		}
		if len(t.servers) > 0 {
			time.Sleep(200 * time.Microsecond)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}

	if len(t.servers) > 0 {
		// The last sweep's commit is visible before its timing is noted.
		t.sweeps.settle(10 * time.Second)
		sweeps := t.sweeps.since(first.Add(-time.Second))
		var took samples
		lastEnd := first
		var longestSweep time.Duration
		for i, s := range sweeps {
			took = append(took, s.took)
			if s.took > sweepCallBound {
				x.SweepsOver60MS++
			}
			if s.took > longestSweep {
				longestSweep, x.LongestSweepAt = s.took, i+1
			}
			x.MaxSweepRows = max(x.MaxSweepRows, s.rows)
			if s.end.After(lastEnd) {
				lastEnd = s.end
			}
		}
		l := took.latency()
		x.Sweeps, x.MaxSweepMS, x.SweepP50MS, x.SweepP99MS = len(sweeps), l.Max, l.P50, l.P99
		allExpired = lastEnd
		x.Source = "in-process: the commit of the last sweep"
		var (
			held    samples
			longest sqlite.Batch
		)
		for i, b := range t.batches.between(first.Add(-time.Second), lastEnd) {
			held = append(held, b.Held)
			if b.Held > sweepHoldBound {
				x.HoldsOverBound++
			}
			if b.Held > longest.Held {
				longest, x.LongestHoldAt = b, i+1
			}
		}
		x.LongestHoldCommitMS = ms(longest.Commit)
		if len(held) > 0 {
			h := held.latency()
			x.Transactions, x.MaxHoldMS, x.HoldP50MS, x.HoldP99MS = len(held), h.Max, h.P50, h.P99
		}
	} else {
		x.Source = "server /metrics: airlock_requests_pending polled every 20 ms"
	}
	x.LastExpiredAfterDeadlineMS = ms(allExpired.Sub(last))
	if d := allExpired.Sub(first); d > 0 {
		x.ExpiredPerS = round(float64(n)/d.Seconds(), 0)
	}

	wg.Wait()
	kinds := map[string]int64{}
	var woken samples
	for i, a := range heard {
		switch {
		case a.err != nil:
			kinds["waiter: "+kind(a.err)]++
		case a.state != "expired":
			kinds["waiter answered "+a.state]++
		default:
			woken = append(woken, a.at.Sub(deadlines[i]))
		}
	}
	x.Waiters, x.WokenAfterDeadlineMS = len(woken), woken.latency()
	if len(kinds) > 0 {
		rep.ErrorKinds = kinds
		for _, v := range kinds {
			rep.Errors += v
		}
	}
	return nil
}
