package rest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLifecycleHTTP measures whole lifecycles over real HTTP against a
// SQLite file: an agent creates a request, a reviewer approves it, the agent
// reads it back. Eight clients run at once. The OpenAPI validator is off:
// it would measure kin-openapi, not the API.
func BenchmarkLifecycleHTTP(b *testing.B) {
	bn := setup(b, func(o *options) { o.validate = false })
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
	var worker, seq atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		inst := bn.instance(b, bn.agentA)
		w := worker.Add(1)
		for pb.Next() {
			n := seq.Add(1)
			r := bn.create(b, bn.agentA, inst, fmt.Sprintf("w%d-%d", w, n), `{"tool":"issue_refund","arguments":{"amount":4900,"n":`+fmt.Sprint(n)+`}}`)
			if r.status != http.StatusCreated {
				b.Fatalf("create: %d %s", r.status, r.body)
			}
			id := r.obj(b)["id"].(string)
			if r := bn.do(b, reqDecide(id, bn.reviewer, "approved")); r.status != http.StatusOK {
				b.Fatalf("decide: %d %s", r.status, r.body)
			}
			if r := bn.do(b, req{method: "GET", path: "/v1/approval-requests/" + id, token: bn.agentA}); r.status != http.StatusOK {
				b.Fatalf("read: %d %s", r.status, r.body)
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lifecycles/s")
}

// BenchmarkHTTPFloor is BenchmarkLifecycleHTTP's three calls, the same
// bodies and headers through the same kind of client and server, answered
// by a handler that does no work but read the body and write a request-sized
// answer: the ceiling of any HTTP service doing a lifecycle in three calls
// on this machine. docs/performance.md sets the lifecycle against it.
func BenchmarkHTTPFloor(b *testing.B) {
	answer := []byte(`{"id":"apr_` + strings.Repeat("x", 24) + `","state":"approved","tool":"issue_refund","arguments":{"amount":4900},` +
		`"created_at":"2026-11-30T07:00:00.000000Z","deadline_at":"2026-11-30T07:05:00.000000Z","decision":{"status":"approved"}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(answer)
	}))
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	call := func(method, path, body string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer airlock_"+strings.Repeat("t", 43))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "key-1")
		}
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, res.Body); err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: %d", method, path, res.StatusCode)
		}
	}
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			call("POST", "/v1/instances/ins_1/approval-requests", `{"tool":"issue_refund","arguments":{"amount":4900,"n":1}}`)
			call("POST", "/v1/approval-requests/apr_1/decision", `{"status":"approved"}`)
			call("GET", "/v1/approval-requests/apr_1", "")
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lifecycles/s")
}

// BenchmarkBatchDecision100 measures one batch decision of 100 pending
// requests over real HTTP against a SQLite file: each id its own
// conditional write (docs/performance.md). The 100 requests are created
// outside the timer.
func BenchmarkBatchDecision100(b *testing.B) {
	bn := setup(b, func(o *options) { o.validate = false })
	inst := bn.instance(b, bn.agentA)
	var seq int
	for b.Loop() {
		b.StopTimer()
		ids := make([]string, 100)
		for i := range ids {
			seq++
			r := bn.create(b, bn.agentA, inst, fmt.Sprintf("k%d", seq), `{"tool":"issue_refund","arguments":{"amount":4900}}`)
			if r.status != http.StatusCreated {
				b.Fatalf("create: %d %s", r.status, r.body)
			}
			ids[i] = `"` + r.obj(b)["id"].(string) + `"`
		}
		b.StartTimer()
		r := bn.do(b, req{method: "POST", path: "/v1/approval-requests/decisions", token: bn.reviewer,
			body: `{"ids":[` + strings.Join(ids, ",") + `],"status":"approved"}`})
		if r.status != http.StatusOK || strings.Count(string(r.body), `"status":200`) != 100 {
			b.Fatalf("batch: %d %.300s", r.status, r.body)
		}
	}
}
