package replicas

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store/storetest"
)

// TestKilledReplica is T08 for a replica: three `airlock serve` processes
// on one schema take a concurrent load of creates and decisions; one
// replica (each in turn) is killed with SIGKILL mid-load and restarted, 20
// times. Just before each kill, requests with a short window are created
// on the doomed replica: their deadlines pass while it is down, and the
// other replicas' schedulers must expire them within 2 s of the deadline.
// At the end, no acknowledged create or decision may be lost.
func TestKilledReplica(t *testing.T) {
	t.Parallel()
	restarts := 20
	if testkit.Short() {
		restarts = 5
	}
	const (
		workers  = 4
		perCycle = 12 // acknowledged operations before each kill
		// overdue requests are created on the doomed replica just before
		// the kill, with this window, so they fall due while it is down.
		overdue       = 2
		overdueWindow = 150 * time.Millisecond
		expiryBound   = 2 * time.Second
	)
	cl := startCluster(t, 3, "pool_max_conns", "3")
	loadInst := cl.instance(t, "load")
	overdueInst := cl.instance(t, "overdue")

	var (
		urlMu sync.Mutex
		urls  = []string{cl.replicas[0].URL, cl.replicas[1].URL, cl.replicas[2].URL}
	)
	pick := func(rng *rand.Rand) string {
		urlMu.Lock()
		defer urlMu.Unlock()
		return urls[rng.IntN(len(urls))]
	}
	var (
		load             = testkit.NewLoad(restarts * perCycle * 4)
		refused          atomic.Int64 // calls that reached no live replica
		overdueDeadlines = map[string]time.Time{}
	)
	for cycle := range restarts {
		victim := cycle % 3
		burst := testkit.StartBurst(workers, perCycle, uint64(cycle), func(rng *rand.Rand, w, n int) bool {
			on := pick(rng)
			call := func(method, path, token, body string, header ...string) (testkit.Reply, error) {
				r, err := cl.c.do(context.Background(), method, on, path, token, body, header...)
				return r.Reply, err
			}
			if !load.Step(t, call, rng, w%2 == 1, loadInst, cl.agent, cl.reviewer, fmt.Sprintf("c%d-w%d-%d", cycle, w, n), n) {
				refused.Add(1)
				return false
			}
			return true
		})
		select {
		case <-burst.Enough:
		case <-time.After(time.Minute):
			t.Fatalf("fewer than %d operations acknowledged in a minute:\n%s", perCycle, cl.outputs())
		}

		// Requests on the doomed replica that fall due while it is down.
		doomed := cl.replicas[victim]
		var ids []string
		var latest time.Time
		for k := range overdue {
			r := cl.c.call(t, "POST", doomed.URL, "/v1/instances/"+overdueInst+"/approval-requests", cl.agent,
				fmt.Sprintf(`{"tool":"overdue","arguments":{},"timeout":"%s"}`, overdueWindow),
				"Idempotency-Key", fmt.Sprintf("overdue-%d-%d", cycle, k))
			if !r.want(t, 201, "create an overdue request") {
				t.FailNow()
			}
			ids = append(ids, r.Str("id"))
			latest = r.time("deadline_at")
		}
		doomed.Kill()
		if time.Now().After(latest) {
			t.Logf("cycle %d: killed after the overdue requests' deadline; their check proves less this time", cycle)
		}

		// The survivors, still under load, expire them.
		survivor := cl.replicas[(victim+1)%3].URL
		maps.Copy(overdueDeadlines, checkExpiredWithin(t, cl, survivor, overdueInst, ids, expiryBound))
		burst.Stop()

		restarted := startReplica(t, cl.db)
		cl.replicas[victim] = restarted
		urlMu.Lock()
		urls[victim] = restarted.URL
		urlMu.Unlock()
	}

	// Every acknowledged create exists; every acknowledged decision holds.
	states := testkit.RequestStates(func(cursor string) map[string]any {
		r := cl.c.call(t, "GET", cl.replicas[0].URL, "/v1/approval-requests?limit=200&instance_id="+loadInst+cursor, cl.reviewer, "")
		if !r.want(t, 200, "list") {
			t.FailNow()
		}
		return r.Body
	})
	lost := load.Lost(t, states)
	// How long after its deadline each overdue request was expired: its
	// audit event's time, read by the database's clock like the deadline.
	var lags []time.Duration
	expiries := map[string]int{}
	for _, e := range storetest.AllEvents(t, cl.store(t)) {
		d, ok := overdueDeadlines[e.RequestID]
		if !ok || e.Type != airlock.EventRequestExpired {
			continue
		}
		expiries[e.RequestID]++
		lags = append(lags, e.At.Sub(d))
		if e.At.Sub(d) > expiryBound {
			t.Errorf("overdue request %s expired %s after its deadline, want ≤ %s", e.RequestID, e.At.Sub(d), expiryBound)
		}
	}
	for id := range overdueDeadlines {
		if expiries[id] != 1 {
			t.Errorf("overdue request %s has %d expiry events, want 1", id, expiries[id])
		}
	}
	slices.Sort(lags)
	t.Logf("T08: %d kill -9 restarts of a replica: %d creates and %d decisions acknowledged, %d lost, %d calls refused by a dead replica; "+
		"%d requests stored; %d overdue requests expired by the survivors, lag after the deadline p50 %s, max %s",
		restarts, load.Creates.Load(), load.Decisions.Load(), lost, refused.Load(), len(states), len(lags), lags[len(lags)/2], lags[len(lags)-1])
}

// checkExpiredWithin checks that the requests ids of instance inst are
// expired by a scheduler within bound of their deadlines, reading through
// the replica at base, and returns their deadlines. It polls the list of pending requests, with a deadline: a GET
// of the request itself would expire it on the spot and prove nothing
// about the schedulers.
func checkExpiredWithin(t *testing.T, cl *cluster, base, inst string, ids []string, bound time.Duration) map[string]time.Time {
	t.Helper()
	var limit time.Time
	for {
		r := cl.c.call(t, "GET", base, "/v1/approval-requests?state=pending&instance_id="+inst, cl.reviewer, "")
		if !r.want(t, 200, "list pending") {
			t.FailNow()
		}
		if !slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(r.Raw, id) }) {
			break
		}
		if limit.IsZero() {
			// Learn the deadlines from the list itself.
			items, _ := r.Body["items"].([]any)
			for _, it := range items {
				m := it.(map[string]any)
				if d, err := time.Parse(time.RFC3339Nano, m["deadline_at"].(string)); err == nil && slices.Contains(ids, m["id"].(string)) && d.After(limit) {
					limit = d
				}
			}
			limit = limit.Add(bound)
		}
		if time.Now().After(limit) {
			t.Fatalf("overdue requests still pending %s after their deadline, with two replicas' schedulers running: %s\n%s", bound, r.Raw, cl.outputs())
		}
		time.Sleep(5 * time.Millisecond)
	}
	deadlines := map[string]time.Time{}
	for _, id := range ids {
		r := cl.c.call(t, "GET", base, "/v1/approval-requests/"+id, cl.reviewer, "")
		if r.Str("state") != "expired" || r.Str("decision.decided_by") != "system:expiry" {
			t.Errorf("overdue request %s: want expired by a scheduler; got %s", id, r.Raw)
		}
		deadlines[id] = r.time("deadline_at")
	}
	return deadlines
}
