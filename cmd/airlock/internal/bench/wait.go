package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// waitSetupPerWaiter bounds the wait scenario's setup, per waiter, for
// each of its two steps.
const waitSetupPerWaiter = 20 * time.Millisecond

// waitPerInstance is the most waiters' requests one instance holds, and
// so one change cancels.
const waitPerInstance = 10_000

// runWait is the wait scenario. First, cfg.Clients long-polls wait, each
// on its own pending request, taking the replicas in turn: it measures the
// servers' memory per waiter and its CPU while they idle, then answers
// them all with one change a waitPerInstance of them (deleting the
// instance that holds their requests cancels them in one transaction)
// and times how long until the last one has heard. Then, for
// cfg.Count rounds, one waiter waits on one request, a reviewer decides
// it, and it measures how long after the decision the waiter hears.
func runWait(ctx context.Context, cfg Config, t *target, rep *Report) error {
	n := cfg.Clients
	w, err := newRawWaiters(t, n)
	if err != nil {
		return err
	}
	x := &WaitReport{Waiters: n, Transport: w.transport, FDLimit: raiseFDLimit(0)}
	rep.Wait = x
	base := t.urls[0]
	// Creating the requests and starting the long-polls are bounded
	// apart, each at waitSetupPerWaiter a waiter: on two loaded cores,
	// 100,000 creates over HTTP took 11 minutes.
	create, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(n)*waitSetupPerWaiter)
	defer cancel()
	fmt.Fprintf(cfg.Progress, "wait: creating %d pending requests for the waiters\n", n)
	// At most waitPerInstance requests an instance: deleting an instance
	// cancels its requests in one statement, and 100,000 in one ran into
	// PostgreSQL's statement timeout (10 s) on two loaded cores.
	var insts []string
	var reqs []apiRequest
	for from := 0; from < n; from += waitPerInstance {
		inst, err := t.newInstance(create, base, fmt.Sprintf("bench waiters %d", len(insts)))
		if err != nil {
			return err
		}
		part, err := t.createMany(create, inst, min(waitPerInstance, n-from), 16, func(i int) (string, error) { return requestBody(int64(from+i), "1h"), nil })
		if err != nil {
			return fmt.Errorf("create the waiters' requests: %w", err)
		}
		insts, reqs = append(insts, inst), append(reqs, part...)
	}
	inst := insts[0]
	setup, cancelSetup := context.WithTimeout(ctx, time.Minute+time.Duration(n)*waitSetupPerWaiter)
	defer cancelSetup()
	// A replica lets a token it has not accepted before through a few at
	// a time from one address (the authentication guard's budget), and
	// every waiter comes from this one: each replica sees the agent's
	// token once before the waiters come.
	for _, u := range t.urls {
		if err := t.call(setup, "GET", u, "/v1/instances/"+inst, t.agent, "", nil); err != nil {
			return fmt.Errorf("read the waiters' instance on %s: %w", u, err)
		}
	}

	var clientBytes int64
	inProcess := len(t.servers) > 0
	if inProcess {
		fmt.Fprintf(cfg.Progress, "wait: measuring what %d idle clients cost on their own\n", n)
		if clientBytes, err = clientCost(setup, w, n); err != nil {
			return err
		}
	}
	var before, rssBefore int64
	var beforeMetrics map[string]float64
	if inProcess {
		before, rssBefore = liveBytes(), rssBytes()
	} else if beforeMetrics, err = t.metrics(setup, base); err != nil {
		return err
	}

	fmt.Fprintf(cfg.Progress, "wait: starting %d long-polls (%s) across %d servers\n", n, w.transport, len(w.hosts))
	maxWait := inProcessMaxWait
	if !inProcess {
		maxWait = 60 * time.Second // the server's default bound; it may answer sooner
	}
	answers := make([]answer, n)
	conns := make([]net.Conn, 0, n)
	var wg, written sync.WaitGroup
	for i, r := range reqs {
		conn, err := w.dial(setup, i)
		if err != nil {
			// The waiters started wait up to maxWait: end them.
			for _, c := range conns {
				c.Close()
			}
			wg.Wait()
			return fmt.Errorf("connect waiter %d: %w", i, err)
		}
		conns = append(conns, conn)
		written.Add(1)
		wg.Go(func() {
			var once sync.Once
			done := func() { once.Do(written.Done) }
			answers[i] = w.poll(conn, i, r.ID, maxWait, done)
			done()
		})
	}
	written.Wait()
	if err := t.awaitWaiters(setup, n); err != nil {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
		return err
	}
	for _, srv := range t.servers {
		x.PerServer = append(x.PerServer, srv.svc.Waiters())
	}

	if inProcess {
		after := liveBytes()
		x.GrossBytesPerWaiter = round(float64(after-before)/float64(n), 0)
		x.ServerBytesPerWaiter = round(float64(after-before-clientBytes)/float64(n), 0)
		x.MemorySource = "in-process: live heap and goroutine stacks after GC (until the stacks stop shrinking), less the clients' own cost"
		if rssBefore > 0 {
			x.GrossRSSPerWaiter = round(float64(rssBytes()-rssBefore)/float64(n), 0)
		}
	} else if m, err := t.metrics(setup, base); err == nil {
		grow := (m["go_memstats_heap_alloc_bytes"] + m["go_memstats_stack_inuse_bytes"]) -
			(beforeMetrics["go_memstats_heap_alloc_bytes"] + beforeMetrics["go_memstats_stack_inuse_bytes"])
		x.ServerBytesPerWaiter = round(grow/float64(n), 0)
		x.GrossBytesPerWaiter = x.ServerBytesPerWaiter
		x.MemorySource = "server /metrics: heap alloc and stacks, without a forced GC (rough)"
	}

	window := min(2*time.Second, max(cfg.Duration/4, 200*time.Millisecond))
	x.IdleWindowS = window.Seconds()
	fmt.Fprintf(cfg.Progress, "wait: measuring CPU while %d waiters idle for %s\n", n, window)
	if inProcess {
		c0 := cpuTime()
		time.Sleep(window)
		if c0 >= 0 {
			x.IdleCPUPercent = round(100*float64(cpuTime()-c0)/float64(window), 3)
		}
	} else {
		m0, err := t.metrics(setup, base)
		if err != nil {
			return err
		}
		time.Sleep(window)
		m1, err := t.metrics(setup, base)
		if err != nil {
			return err
		}
		x.IdleCPUPercent = round(100*(m1["process_cpu_seconds_total"]-m0["process_cpu_seconds_total"])/window.Seconds(), 3)
	}

	fmt.Fprintf(cfg.Progress, "wait: %d changes (deleting an instance each) answer all %d waiters\n", len(insts), n)
	x.Changes = len(insts)
	start := time.Now()
	for i, in := range insts {
		if err := t.call(setup, "DELETE", t.base(i), "/v1/instances/"+in, t.agent, "", nil); err != nil {
			return fmt.Errorf("delete the waiters' instance: %w", err)
		}
	}
	x.BroadcastCallMS = ms(time.Since(start))
	heard := make(chan struct{})
	go func() { wg.Wait(); close(heard) }()
	select {
	case <-heard:
	case <-time.After(cfg.Duration + 30*time.Second):
		return fmt.Errorf("the waiters had not all heard %s after the broadcast", cfg.Duration+30*time.Second)
	}
	kinds := map[string]int64{}
	var last time.Time
	var woke samples
	for _, a := range answers {
		switch {
		case a.err != nil:
			kinds["waiter: "+kind(a.err)]++
		case a.state != "cancelled":
			kinds["waiter answered "+a.state]++
		default:
			x.Answered++
			woke = append(woke, a.at.Sub(start))
			if a.at.After(last) {
				last = a.at
			}
		}
	}
	if x.Answered > 0 {
		x.BroadcastMS = ms(last.Sub(start))
		x.WokenMS = woke.latency()
	}

	if err := decisionRounds(ctx, cfg, t, x, kinds); err != nil {
		return err
	}
	if len(kinds) > 0 {
		rep.ErrorKinds = kinds
		for _, v := range kinds {
			rep.Errors += v
		}
	}
	return nil
}

// decisionRounds runs the wait scenario's rounds: one waiter, one
// decision, one measurement each.
func decisionRounds(ctx context.Context, cfg Config, t *target, x *WaitReport, kinds map[string]int64) error {
	base := t.urls[0]
	inst, err := t.newInstance(ctx, base, "bench rounds")
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Progress, "wait: up to %d rounds of decision → waiter, for up to %s\n", cfg.Count, cfg.Duration)
	var decision, waiter, after samples
	end := time.Now().Add(cfg.Duration)
	for i := range cfg.Count {
		if time.Now().After(end) {
			break
		}
		r, err := t.create(ctx, base, inst, fmt.Sprintf("round-%s-%d", randomHex(4), i), requestBody(int64(i), "1h"))
		if err != nil {
			return err
		}
		got := make(chan answer, 1)
		go func() {
			req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/approval-requests/"+r.ID+"?wait=60s", nil)
			if err != nil {
				got <- answer{err: err}
				return
			}
			req.Header.Set("Authorization", "Bearer "+t.agent)
			resp, err := t.hc.Do(req)
			at := time.Now()
			if err != nil {
				got <- answer{err: err, at: at}
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				got <- answer{err: &httpError{status: resp.StatusCode}, at: at}
				return
			}
			got <- answer{state: "answered", at: at}
		}()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = t.awaitWaiters(wctx, 1)
		cancel()
		if err != nil {
			return err
		}
		start := time.Now()
		if _, err := t.decide(ctx, base, r.ID, "approved"); err != nil {
			kinds["decision: "+kind(err)]++
			<-got
			continue
		}
		decided := time.Now()
		var a answer
		select {
		case a = <-got:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("round %d: the waiter did not hear the decision within 30s", i)
		}
		if a.err != nil {
			kinds["waiter: "+kind(a.err)]++
			continue
		}
		decision = append(decision, decided.Sub(start))
		waiter = append(waiter, a.at.Sub(start))
		after = append(after, a.at.Sub(decided))
	}
	x.Rounds = len(decision)
	x.DecisionMS, x.WaiterMS = decision.latency(), waiter.latency()
	// after may be negative: sort and take percentiles all the same.
	x.WaiterAfterDecisionMS = after.latency()
	return nil
}
