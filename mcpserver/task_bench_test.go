package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
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
// latency's p50 and p99 as a client sees it.
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
	slices.Sort(latencies)
	if len(latencies) > 0 {
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	}
}
