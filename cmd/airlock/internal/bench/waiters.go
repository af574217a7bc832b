package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// answer is what a long-poll waiter heard, and when.
type answer struct {
	state string
	at    time.Time
	err   error
}

// rawWaiters are long-polls made with as little client as possible — one
// goroutine, one connection and a 512-byte buffer each — so that, in
// process, the client's own memory is small and can be measured apart
// from the server's.
type rawWaiters struct {
	token string
	// hosts are the servers' host:port, waiter i long-polling hosts[i mod
	// len(hosts)], as clients take the replicas in turn.
	hosts []string
	// dial connects waiter i to its server: TCP, or an in-memory pipe.
	dial func(ctx context.Context, i int) (net.Conn, error)
	// transport is what dial uses, for the report.
	transport string
}

// waitersPerSource is how many waiters share one loopback source address.
// A TCP connection on 127.0.0.1 needs an ephemeral port of its own for
// each (source address, server) pair, and Linux has about 28,000 of them
// (net.ipv4.ip_local_port_range): past that, waiters take their source
// addresses in turn from 127.0.0.1, 127.0.0.2, …, all of them loopback.
const waitersPerSource = 20_000

// newRawWaiters returns waiters for n long-polls of t's servers, taken in
// turn. An in-process server holds both ends of every TCP connection, so
// the run raises its file descriptor limit to two per waiter where it may
// (raiseFDLimit), and past what it may, reaches the servers through
// in-memory pipes.
func newRawWaiters(t *target, n int) (*rawWaiters, error) {
	w := &rawWaiters{token: t.agent, transport: "tcp"}
	for _, s := range t.urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, err
		}
		w.hosts = append(w.hosts, u.Host)
	}
	w.dial = func(ctx context.Context, i int) (net.Conn, error) { return dialFrom(ctx, i, w.hosts[i%len(w.hosts)]) }
	need := n + 512
	if len(t.servers) > 0 {
		need = 2*n + 512
	}
	limit := raiseFDLimit(need)
	switch {
	case len(t.servers) > 0 && limit > 0 && need > limit:
		w.transport = "in-memory pipe"
		w.dial = func(ctx context.Context, i int) (net.Conn, error) {
			return t.servers[i%len(t.servers)].pipe.dial(ctx)
		}
	case len(t.servers) == 0 && limit > 0 && need > limit:
		return nil, fmt.Errorf("%d waiters need %d file descriptors and this process may open %d: raise `ulimit -n` or lower --clients", n, need, limit)
	}
	return w, nil
}

// dialFrom connects connection i to addr over TCP, from loopback source
// address 127.0.0.(1 + i/waitersPerSource) when addr is on 127.0.0.1.
func dialFrom(ctx context.Context, i int, addr string) (net.Conn, error) {
	var d net.Dialer
	if host, _, err := net.SplitHostPort(addr); err == nil && host == "127.0.0.1" {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i/waitersPerSource))}
	}
	return d.DialContext(ctx, "tcp", addr)
}

// poll long-polls request id for up to wait on conn, waiter i's, and
// returns the state in the answer. ready is called once the request is
// written.
func (w *rawWaiters) poll(conn net.Conn, i int, id string, wait time.Duration, ready func()) answer {
	defer conn.Close()
	req := fmt.Sprintf("GET /v1/approval-requests/%s?wait=%dms HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n",
		id, wait.Milliseconds(), w.hosts[i%len(w.hosts)], w.token)
	if _, err := io.WriteString(conn, req); err != nil {
		ready()
		return answer{err: err}
	}
	ready()
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
	at := time.Now()
	if err != nil {
		return answer{err: err, at: at}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err, at: at}
	}
	if resp.StatusCode != http.StatusOK {
		return answer{err: fmt.Errorf("long-poll: HTTP %d: %s", resp.StatusCode, b), at: at}
	}
	var r apiRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return answer{err: err, at: at}
	}
	return answer{state: r.State, at: at}
}

// idle opens a connection and blocks reading it without sending anything:
// a client exactly like poll's, minus the server's side. ready is called
// before the read blocks.
func idle(conn net.Conn, ready func()) {
	defer conn.Close()
	ready()
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
	if err == nil {
		resp.Body.Close()
	}
}

// liveBytes returns the process's live Go memory: heap after a GC, and
// goroutine stacks once they have shrunk. A GC cycle halves a goroutine's
// stack only when it uses less than a quarter of it, so a stack grown deep
// before its goroutine parked takes a cycle per halving: it collects until
// the stacks stop shrinking (a server gets there with its own cycles, which
// run at least every two minutes, and as its heap grows), at most 8 times.
func liveBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	for range 8 {
		stacks := m.StackInuse
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.StackInuse >= stacks {
			break
		}
	}
	return int64(m.HeapAlloc + m.StackInuse)
}

// clientCost measures what n idle clients cost this process: n goroutines
// blocked reading connections (TCP or pipe, as the waiters use) from a
// listener that never answers and holds the other ends without a
// goroutine. It is subtracted from the in-process waiters' growth, to leave
// the server's share. The other ends are the server's in the run (its
// accepted connections), so what they cost is not the clients': half of
// what n bare connections cost with both ends held (the two ends are alike)
// is taken back off.
func clientCost(ctx context.Context, w *rawWaiters, n int) (int64, error) {
	withClients, err := heldCost(ctx, w, n, true)
	if err != nil {
		return 0, err
	}
	bare, err := heldCost(ctx, w, n, false)
	if err != nil {
		return 0, err
	}
	return withClients - bare/2, nil
}

// heldCost measures n connections from a listener that holds the other
// ends without a goroutine: with clients, each connection has an idle
// client reading it; without, both ends are only held.
func heldCost(ctx context.Context, w *rawWaiters, n int, clients bool) (int64, error) {
	var (
		held    []net.Conn
		mu      sync.Mutex
		dial    func(ctx context.Context, i int) (net.Conn, error)
		cleanup func()
	)
	if w.transport == "tcp" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		accepted := make(chan struct{})
		go func() {
			defer close(accepted)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		dial = func(ctx context.Context, i int) (net.Conn, error) { return dialFrom(ctx, i, ln.Addr().String()) }
		cleanup = func() { ln.Close(); <-accepted }
	} else {
		dial = func(context.Context, int) (net.Conn, error) {
			c, s := net.Pipe()
			mu.Lock()
			held = append(held, s)
			mu.Unlock()
			return c, nil
		}
		cleanup = func() {}
	}
	own := make([]net.Conn, 0, n) // the client ends, when no client holds them
	before := liveBytes()
	var wg, ready sync.WaitGroup
	var failed error
	for i := range n {
		conn, err := dial(ctx, i)
		if err != nil {
			failed = err
			break
		}
		if !clients {
			own = append(own, conn)
			continue
		}
		ready.Add(1)
		wg.Go(func() { idle(conn, ready.Done) })
	}
	ready.Wait()
	if w.transport == "tcp" && failed == nil {
		// Count the other ends only once the listener has them all.
		for {
			mu.Lock()
			got := len(held)
			mu.Unlock()
			if got >= n {
				break
			}
			select {
			case <-ctx.Done():
				failed = ctx.Err()
			case <-time.After(50 * time.Microsecond):
				continue
			}
			break
		}
	}
	after := liveBytes()
	cleanup()
	mu.Lock()
	for _, c := range held {
		c.Close()
	}
	mu.Unlock()
	for _, c := range own {
		c.Close()
	}
	wg.Wait()
	if failed != nil {
		return 0, fmt.Errorf("measure the clients' own memory: %w", failed)
	}
	return after - before, nil
}

var metricRE = regexp.MustCompile(`(?m)^([a-z_]+) ([0-9.eE+-]+)$`)

// metrics reads a server's unlabelled Prometheus gauges and counters.
func (t *target) metrics(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range metricRE.FindAllStringSubmatch(string(b), -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err == nil {
			out[m[1]] = v
		}
	}
	return out, nil
}

// waiters returns how many long-polls wait on every server of t.
func (t *target) waiters(ctx context.Context) (int, error) {
	if len(t.servers) > 0 {
		n := 0
		for _, s := range t.servers {
			n += s.svc.Waiters()
		}
		return n, nil
	}
	n := 0
	for _, u := range t.urls {
		m, err := t.metrics(ctx, u)
		if err != nil {
			return 0, err
		}
		v, ok := m["airlock_long_polls_waiting"]
		if !ok {
			return 0, fmt.Errorf("%s/metrics has no airlock_long_polls_waiting: is it an airlock serve?", u)
		}
		n += int(v)
	}
	return n, nil
}

// pending returns how many requests are pending in t's store.
func (t *target) pending(ctx context.Context) (int, error) {
	if len(t.servers) > 0 {
		return t.servers[0].svc.PendingCount(ctx)
	}
	m, err := t.metrics(ctx, t.urls[0])
	if err != nil {
		return 0, err
	}
	v, ok := m["airlock_requests_pending"]
	if !ok {
		return 0, fmt.Errorf("%s/metrics has no airlock_requests_pending: is it an airlock serve?", t.urls[0])
	}
	return int(v), nil
}

// awaitWaiters polls until n long-polls wait, or until ctx ends. Only the
// server knows when a long-poll has reached it.
func (t *target) awaitWaiters(ctx context.Context, n int) error {
	pause := 50 * time.Microsecond
	if len(t.servers) == 0 {
		pause = 2 * time.Millisecond // each look is a /metrics scrape
	}
	for {
		got, err := t.waiters(ctx)
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d long-polls reached the server: %w", got, n, ctx.Err())
		case <-time.After(pause):
		}
	}
}

// createMany creates n requests on instance with workers clients; body
// gives each its request body (or an error to stop). It returns them in
// creation order.
func (t *target) createMany(ctx context.Context, instance string, n, workers int, body func(i int) (string, error)) ([]apiRequest, error) {
	out := make([]apiRequest, n)
	run := randomHex(4)
	var (
		next     = make(chan int)
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range next {
				b, err := body(i)
				if err == nil {
					out[i], err = t.create(ctx, t.urls[0], instance, fmt.Sprintf("bench-%s-%d", run, i), b)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, ctx.Err()
}

// setupBudget bounds the setting up of n requests (creating them, starting
// waiters): generous, but bounded.
func setupBudget(n int) time.Duration {
	return time.Minute + time.Duration(n)*5*time.Millisecond
}
