//go:build !race

// The race detector multiplies a process's memory several times over, so
// the server's resident size is only meaningful without it: .ci/run runs
// this test in a build without -race.

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// TestBoundedMemory checks that memory is bounded by bytes, not by rows
// (docs/operations.md, "Memory"), on SQLite and on PostgreSQL: with 100
// requests of 1 MiB stored, 16 clients at once list them over REST
// (following every cursor), load the inbox's pending page and search the
// inbox's history (for a word no request holds, so every request's
// arguments are read). The server's resident size, read from /proc as the
// kernel counts it, may grow by at most 128 MiB over what it was before
// the reads, and must come back near it once they are over.
func TestBoundedMemory(t *testing.T) {
	testkit.Long(t)
	t.Parallel()
	for _, tc := range []struct {
		name string
		db   func(t *testing.T, dir string) string
	}{
		{"sqlite", func(t *testing.T, dir string) string { return filepath.Join(dir, "airlock.db") }},
		{"postgres", func(t *testing.T, _ string) string { return pgSchemaURL(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			boundedMemory(t, dir, tc.db(t, dir))
		})
	}
}

func boundedMemory(t *testing.T, dir, db string) {
	const (
		requests  = 100
		clients   = 16
		rounds    = 2
		reviewers = 4
		maxGrowth = 128 << 20
	)
	srv := startProcess(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--db", db,
		"--admin-token", testAdmin, "--rate-limit", "1000000", "--log-level", "error")
	c := newAPI(t, srv.URL)
	agent := c.mintToken(testAdmin, "big agent", "agent")
	inst := c.call("POST", "/v1/instances", agent, `{"name":"big"}`).want(t, 201, "instance").Str("id")
	// Each body is just under the 1 MiB limit; a pending half for the
	// inbox's pending page, a denied half for its history.
	decider := c.mintToken(testAdmin, "decider", "reviewer")
	blob := strings.Repeat("a", 1<<20-200)
	for i := range requests {
		body := fmt.Sprintf(`{"tool":"blob","arguments":{"n":%d,"blob":%q}}`, i, blob)
		id := c.call("POST", "/v1/instances/"+inst+"/approval-requests", agent, body, "Idempotency-Key", strconv.Itoa(i)).
			want(t, 201, "create").Str("id")
		if i%2 == 1 {
			c.call("POST", "/v1/approval-requests/"+id+"/decision", decider, `{"status":"denied"}`).
				want(t, 200, "deny")
		}
	}
	var tokens []string
	for i := range reviewers {
		tokens = append(tokens, c.mintToken(testAdmin, fmt.Sprintf("reader %d", i), "reviewer"))
	}
	browsers := make([]*inboxSession, reviewers)
	for i, tok := range tokens {
		browsers[i] = signIn(t, srv.URL, tok)
	}

	pid := srv.Cmd.Process.Pid
	base := residentBytes(t, pid)
	var peak atomic.Int64
	peak.Store(base)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			if n, err := readResident(pid); err == nil && n > peak.Load() {
				peak.Store(n)
			}
		}
	}()

	var (
		mu     sync.Mutex
		counts = map[string]int{} // "list 200", "history 429", …
		wg     sync.WaitGroup
	)
	count := func(what string, status int) {
		mu.Lock()
		counts[what+" "+strconv.Itoa(status)]++
		mu.Unlock()
	}
	start := time.Now()
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, b := tokens[w%reviewers], browsers[w%reviewers]
			for range rounds {
				switch w % 3 {
				case 0:
					listAll(t, c, tok, count)
				case 1:
					b.get(t, "pending", "/", count)
				case 2:
					b.get(t, "history", "/history?q=nowhere-to-be-found", count)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stopSampling)
	<-sampled

	// Idle: once the last heavy read ends, the server hands the memory
	// the reads used back to the system within releaseEvery (a second).
	// "Near its baseline" is within nearBaseline (docs/operations.md,
	// "Memory"): what a server keeps after such a burst is its live heap
	// (5 MiB on SQLite, 16-21 MiB on PostgreSQL, some of it there before),
	// SQLite's page cache of each read connection (2 MiB each, outside the
	// Go heap) or pgx's connection buffers, and the buffers of idle
	// keep-alive connections: 3-13 MiB measured. More than 24 MiB is a page
	// or a buffer held, or a heap not handed back (44 MiB was).
	// settleWithin allows for a loaded machine on which the release and
	// the kernel's accounting of it run late.
	const (
		nearBaseline = 24 << 20
		settleWithin = 30 * time.Second
	)
	before := goMemory(t, srv.URL)
	var after int64
	settle := time.Now()
	for {
		after = residentBytes(t, pid)
		if after-base < nearBaseline || time.Since(settle) > settleWithin {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling a process's size; nothing to wait on
	}
	settled := time.Since(settle).Round(time.Millisecond)
	t.Logf("%s: resident %d MiB before the reads, %d MiB at peak (+%d MiB), %d MiB %s after (+%d MiB; reads took %s); answers %v",
		t.Name(), base>>20, peak.Load()>>20, (peak.Load()-base)>>20, after>>20, settled, (after-base)>>20, took.Round(time.Millisecond), counts)
	t.Logf("%s: Go heap as the reads ended: %s; once settled: %s", t.Name(), before, goMemory(t, srv.URL))
	for what, n := range counts {
		if !strings.HasSuffix(what, " 200") && !strings.HasSuffix(what, " 429") {
			t.Errorf("%d answers %s; want only 200 and 429", n, what)
		}
	}
	for _, what := range []string{"list 200", "pending 200", "history 200"} {
		if counts[what] == 0 {
			t.Errorf("no %s: the bound refused every read of a kind", what)
		}
	}
	if g := peak.Load() - base; g > maxGrowth {
		t.Errorf("resident size grew by %d MiB under the reads, want at most %d MiB", g>>20, maxGrowth>>20)
	}
	if g := after - base; g >= nearBaseline {
		t.Errorf("resident size is %d MiB over its baseline %s after the reads, want it back within %d MiB", g>>20, settleWithin, nearBaseline>>20)
	}
}

// goMemory is the server's Go heap as its /metrics says: in use, idle
// (free, kept by the runtime) and released to the system, in MiB.
func goMemory(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes"} {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				out = append(out, fmt.Sprintf("%s %.1f MiB", strings.TrimSuffix(strings.TrimPrefix(name, "go_memstats_heap_"), "_bytes"), f/(1<<20)))
			}
		}
	}
	return strings.Join(out, ", ")
}

// listAll reads every page of GET /v1/approval-requests?limit=100,
// counting each answer; a 429 is retried after its Retry-After, as the Go
// client does. It checks that no page holds more than 5 requests of 1 MiB
// (the first five reach the page's 4 MiB).
func listAll(t *testing.T, c *api, token string, count func(what string, status int)) {
	cursor := ""
	for {
		path := "/v1/approval-requests?limit=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := c.try("GET", path, token, "")
		if err != nil {
			t.Errorf("list: %v", err)
			return
		}
		count("list", r.Status)
		switch {
		case r.Status == http.StatusTooManyRequests:
			time.Sleep(retryAfter(t, r.Header)) // what the protocol asks of a client
			continue
		case r.Status != http.StatusOK:
			return
		}
		if items, _ := r.Body["items"].([]any); len(items) > 5 {
			t.Errorf("a page of %d requests of 1 MiB; want at most 5", len(items))
		}
		if cursor = r.Str("next_cursor"); cursor == "" {
			return
		}
	}
}

// retryAfter reads a 429's Retry-After, which must be there.
func retryAfter(t *testing.T, h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || s < 1 {
		t.Errorf("429 with Retry-After %q, want whole seconds", h.Get("Retry-After"))
		return time.Second
	}
	return time.Duration(s) * time.Second
}

// get loads an inbox page, counting each answer as what; a 429 is loaded
// again after its Retry-After.
func (s *inboxSession) get(t *testing.T, what, path string, count func(what string, status int)) {
	for {
		res, err := s.hc.Get(s.url + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		count(what, res.StatusCode)
		if res.StatusCode != http.StatusTooManyRequests {
			return
		}
		time.Sleep(retryAfter(t, res.Header))
	}
}

// residentBytes is a process's resident set size (VmRSS).
func residentBytes(t *testing.T, pid int) int64 {
	t.Helper()
	n, err := readResident(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readResident(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
