package rest

import (
	"fmt"
	"net/http"
	"runtime"
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
