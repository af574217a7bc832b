//go:build unix

package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchRPC is rpc for a benchmark: one 2026-07-28 request declaring the
// Tasks extension, its result or an error.
func benchRPC(hc *http.Client, url, secret, method, name, params string) (map[string]any, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{%s,%s}}`, method, params, metaTasks)
	req, err := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	for k, v := range modern(method, name) {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	text := string(data)
	if i := strings.LastIndex(text, "data: "); i >= 0 {
		text = strings.TrimSpace(text[i+len("data: "):])
	}
	var m struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal([]byte(text), &m); err != nil || m.Result == nil {
		return nil, fmt.Errorf("%s: %q %v", method, text, err)
	}
	return m.Result, nil
}

// BenchmarkTaskGet is tasks/get over HTTP on SQLite from 8 clients at
// once, each polling its own task on a pending request; it reports the
// latency's p50 and p99 as a client sees it, and the CPU per call.
func BenchmarkTaskGet(b *testing.B) {
	const clients = 8
	h := setupBench(b)
	secret := h.secrets[h.agent.ID]
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	tasks := make([]string, clients)
	for i := range tasks {
		args := fmt.Sprintf(`"name":"approval_request","arguments":{"kind":"agent_request","title":"bench","proposal":{"mode":"advisory"},"idempotencyKey":"bench-%d"}`, i)
		res, err := benchRPC(hc, h.url, secret, "tools/call", ToolApprovalRequest, args)
		if err != nil {
			b.Fatal(err)
		}
		id := res["structuredContent"].(map[string]any)["approvalId"].(string)
		res, err = benchRPC(hc, h.url, secret, "tools/call", ToolApprovalStatus, fmt.Sprintf(`"name":"approval_status","arguments":{"approvalId":%q,"waitSeconds":60}`, id))
		if err != nil || res["resultType"] != "task" {
			b.Fatalf("approval_status: %v %v", res, err)
		}
		tasks[i] = res["taskId"].(string)
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
	)
	// RunParallel runs GOMAXPROCS × parallelism goroutines: 8 clients.
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	cpu := processCPU()
	var next sync.Mutex
	n := 0
	b.RunParallel(func(pb *testing.PB) {
		next.Lock()
		task := tasks[n%clients]
		n++
		next.Unlock()
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			res, err := benchRPC(hc, h.url, secret, "tasks/get", task, fmt.Sprintf(`"taskId":%q`, task))
			if err != nil || res["status"] != "working" {
				b.Errorf("tasks/get: %v %v", res, err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	// The process's CPU per call, client included: on a shared machine
	// the latencies are the run queue's as much as the server's.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	slices.Sort(latencies)
	if len(latencies) > 0 {
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// openTasks is how many open tasks BenchmarkTaskMemory holds.
const openTasks = 10_000

// BenchmarkTaskMemory is what open tasks cost the server: 10,000 tasks on
// pending requests made over HTTP (approval_request, then approval_status
// with a wait, each answered with a task) from 8 clients, the heap in use
// and the process's resident memory after a GC less before, per task. A
// task is a row in the store and nothing in the process (docs/mcp.md,
// "Tasks"), so what grows is the store's own: SQLite's page cache, which
// modernc.org/sqlite keeps outside the Go heap and bounds, is in rss-B/task.
// Run it with -benchtime 1x: each run makes its 10,000.
func BenchmarkTaskMemory(b *testing.B) {
	const clients = 8
	h := setupBench(b)
	secret := h.secrets[h.agent.ID]
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var made atomic.Int64
	create := func(n int) {
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for {
					i := made.Add(1)
					if i > int64(n) {
						return
					}
					args := fmt.Sprintf(`"name":"approval_request","arguments":{"kind":"agent_request","title":"task %d","proposal":{"mode":"advisory"},"idempotencyKey":"task-%d"}`, i, i)
					res, err := benchRPC(hc, h.url, secret, "tools/call", ToolApprovalRequest, args)
					if err != nil {
						b.Error(err)
						return
					}
					id, _ := res["structuredContent"].(map[string]any)["approvalId"].(string)
					res, err = benchRPC(hc, h.url, secret, "tools/call", ToolApprovalStatus, fmt.Sprintf(`"name":"approval_status","arguments":{"approvalId":%q,"waitSeconds":60}`, id))
					if err != nil || res["resultType"] != "task" || res["status"] != "working" {
						b.Errorf("approval_status: %v %v", res, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	// A first round opens the clients' connections and fills what is
	// filled once (statements, caches): not the tasks' cost.
	create(8 * clients)
	for b.Loop() {
		made.Store(0)
		heap0, rss0, g0 := settled()
		create(openTasks)
		if b.Failed() {
			return
		}
		heap1, rss1, g1 := settled()
		b.ReportMetric(float64(heap1-heap0)/openTasks, "heap-B/task")
		b.ReportMetric(float64(rss1-rss0)/openTasks, "rss-B/task")
		b.ReportMetric(float64(g1-g0), "goroutines")
	}
}

// settled collects garbage and returns the heap in use, the resident set
// and the number of goroutines.
func settled() (heap, rss int64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse), residentBytes(), runtime.NumGoroutine()
}

// residentBytes is the process's resident set (Linux), or 0.
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(fields[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
