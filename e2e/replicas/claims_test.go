package replicas

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// TestClaimRaceAcrossReplicas is T06 across replicas: 1,000 approved
// requests, and 8 claimers spread over three `airlock serve` processes
// (3, 3 and 2) that each try to claim every one of them, in the same order
// so that they collide. Exactly 1,000 claims succeed, the other 7,000 are
// refused with already_executed, and the "tool" (a counter per request,
// run by whoever won the claim) runs 1,000 times, once per request.
func TestClaimRaceAcrossReplicas(t *testing.T) {
	t.Parallel()
	requests, claimers := 1000, 8
	if testkit.Short() {
		requests = 200
	}
	cl := startCluster(t, 3, "pool_max_conns", "3")
	inst := cl.instance(t, "claims")

	// Create and approve the requests, eight at a time, on rotating
	// replicas (approved on another replica than the one that created).
	ids := make([]string, requests)
	testkit.ForEach(requests, 8, func(_, i int) {
		on := cl.replicas[i%3]
		r := cl.c.call(t, "POST", on.URL, "/v1/instances/"+inst+"/approval-requests", cl.agent,
			fmt.Sprintf(`{"tool":"pay","arguments":{"n":%d}}`, i), "Idempotency-Key", "claim-"+strconv.Itoa(i))
		if !r.want(t, 201, "create") {
			return
		}
		ids[i] = r.Str("id")
		r = cl.c.call(t, "POST", cl.replicas[(i+1)%3].URL, "/v1/approval-requests/"+ids[i]+"/decision", cl.reviewer, `{"status":"approved"}`)
		r.want(t, 200, "approve")
	})
	if t.Failed() {
		t.FailNow()
	}

	ran := make([]atomic.Int32, requests) // how many times each request's tool ran
	var claimed, already, other atomic.Int64
	start := make(chan struct{})
	began := time.Now()
	var wg sync.WaitGroup
	for k := range claimers {
		on := cl.replicas[k%3]
		wg.Go(func() {
			<-start
			for i, id := range ids {
				r, err := cl.c.do(context.Background(), "POST", on.URL, "/v1/approval-requests/"+id+"/execution", cl.agent, "")
				switch {
				case err == nil && r.Status == 200 && r.Str("execution.status") == "claimed":
					claimed.Add(1)
					ran[i].Add(1) // the claim is the permission to run, once
				case err == nil && r.Status == 409 && r.Str("code") == "already_executed":
					already.Add(1)
				default:
					other.Add(1)
					t.Errorf("claim %s on %s: %v %d %s", id, on.URL, err, r.Status, r.Raw)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	took := time.Since(began)

	runs, twice, never := int64(0), 0, 0
	for i := range ran {
		n := ran[i].Load()
		runs += int64(n)
		switch {
		case n > 1:
			twice++
		case n == 0:
			never++
		}
	}
	if claimed.Load() != int64(requests) || already.Load() != int64(requests*(claimers-1)) || other.Load() != 0 ||
		runs != int64(requests) || twice != 0 || never != 0 {
		t.Fatalf("%d claims succeeded (want %d), %d already_executed (want %d), %d other answers (want 0); "+
			"the tool ran %d times (want %d): %d requests ran more than once, %d never",
			claimed.Load(), requests, already.Load(), requests*(claimers-1), other.Load(), runs, requests, twice, never)
	}
	t.Logf("T06: %d approved requests × %d claimers on 3 replicas: %d claims, %d already_executed, the tool ran %d times, in %s",
		requests, claimers, claimed.Load(), already.Load(), runs, took.Round(time.Millisecond))
}
