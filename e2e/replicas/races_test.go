package replicas

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/checker"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store/storetest"
)

// recordHTTP fills op's result from a REST reply: on success the request
// it returned, on a problem its code and the state it names. A transport
// error or an unreadable reply is recorded as an internal error, which
// the checker reports as unexpected.
func recordHTTP(op *checker.Op, r resp, err error) {
	op.Return = time.Now()
	switch {
	case err != nil:
		op.Code = airlock.CodeInternal
	case r.Status/100 == 2:
		if op.RequestID == "" {
			op.RequestID = r.Str("id")
		}
		op.State = airlock.State(r.Str("state"))
		op.DeadlineAt = r.time("deadline_at")
		op.DecidedAt = r.time("decision.decided_at")
		op.Claimed = r.has("execution")
	default:
		op.Code = airlock.Code(r.Str("code"))
		if op.Code == "" {
			op.Code = airlock.CodeInternal
		}
		op.State = airlock.State(r.Str("state"))
	}
}

// jitter returns when, after the create was sent, one of a round's three
// racing calls is fired: anywhere from at once (as soon as the create
// returns) to a little after the deadline.
func jitter(rng *rand.Rand, window time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(window + window/4 + 2*time.Millisecond)))
}

// TestRacesAcrossReplicas is T02: three real `airlock serve` processes on
// one PostgreSQL schema, each running its expiry scheduler. Every round
// creates a request with a 5..50 ms window on one replica, then fires an
// approval, a denial and a cancellation at the three replicas (one each,
// in a random order) with jitter around the deadline, and reads the
// outcome with a long-poll on a random replica. The whole history, with
// the expiries from the audit log, goes to the checker: every request has
// exactly one terminal outcome, no approval is recorded at or after a
// deadline, every loser names the state that won, and porcupine finds the
// history linearizable.
func TestRacesAcrossReplicas(t *testing.T) {
	t.Parallel()
	rounds := 2000
	if testkit.Short() {
		rounds = 300
	}
	const workers = 16
	cl := startCluster(t, 3, "pool_max_conns", "3")
	inst := cl.instance(t, "races")
	createPath := "/v1/instances/" + inst + "/approval-requests"

	var (
		mu  sync.Mutex
		ops []checker.Op
	)
	record := func(o ...checker.Op) {
		mu.Lock()
		ops = append(ops, o...)
		mu.Unlock()
	}
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := range next {
				rng := rand.New(rand.NewPCG(uint64(n), 0x7402))
				window := time.Duration(5+rng.IntN(46)) * time.Millisecond
				order := rng.Perm(3) // which replica gets the approval, the denial, the cancellation
				delays := [3]time.Duration{jitter(rng, window), jitter(rng, window), jitter(rng, window)}
				created := cl.replicas[rng.IntN(3)]
				reader := cl.replicas[rng.IntN(3)]
				client := w * 5

				op := checker.Op{Client: client, Kind: checker.Create, Call: time.Now()}
				r, err := cl.c.do(context.Background(), "POST", created.URL, createPath, cl.agent,
					fmt.Sprintf(`{"tool":"race","arguments":{"round":%d},"timeout":"%s"}`, n, window),
					"Idempotency-Key", "round-"+strconv.Itoa(n))
				recordHTTP(&op, r, err)
				record(op)
				if err != nil || r.Status != 201 {
					t.Errorf("round %d: create on %s: %v %d %s", n, created.URL, err, r.Status, r.Raw)
					continue
				}
				// The deadline is the database's time during the create; time the
				// racing calls from when the create was sent, so that they reach
				// the replicas around the deadline despite the HTTP latency.
				id, sent := op.RequestID, op.Call

				calls := [3]struct {
					kind       checker.Kind
					path, body string
					token      string
				}{
					{checker.Approve, "/decision", `{"status":"approved"}`, cl.reviewer},
					{checker.Deny, "/decision", `{"status":"denied"}`, cl.reviewer},
					{checker.Cancel, "/cancel", "", cl.agent},
				}
				var fired sync.WaitGroup
				for i, call := range calls {
					fired.Go(func() {
						time.Sleep(time.Until(sent.Add(delays[i])))
						rep := cl.replicas[order[i]]
						op := checker.Op{Client: client + 1 + i, Kind: call.kind, RequestID: id, Call: time.Now()}
						r, err := cl.c.do(context.Background(), "POST", rep.URL, "/v1/approval-requests/"+id+call.path, call.token, call.body)
						recordHTTP(&op, r, err)
						record(op)
						if err != nil || (r.Status != 200 && r.Status != 409) {
							t.Errorf("round %d: %s on %s: %v %d %s", n, call.kind, rep.URL, err, r.Status, r.Raw)
						}
					})
				}
				fired.Wait()

				op = checker.Op{Client: client + 4, Kind: checker.Read, RequestID: id, Call: time.Now()}
				r, err = cl.c.do(context.Background(), "GET", reader.URL, "/v1/approval-requests/"+id+"?wait=10s", cl.agent, "")
				recordHTTP(&op, r, err)
				record(op)
				if err != nil || r.Status != 200 || !op.State.Terminal() {
					t.Errorf("round %d: the long-poll on %s returned %v %d %s; want a terminal request", n, reader.URL, err, r.Status, r.Raw)
				}
			}
		})
	}
	for n := range rounds {
		next <- n
	}
	close(next)
	wg.Wait()
	raced := time.Since(start)
	end := time.Now()
	if t.Failed() {
		t.Fatalf("calls failed; replicas' output:\n%s", cl.outputs())
	}

	events := storetest.AllEvents(t, cl.store(t))
	history := append(ops, checker.ExpiryOps(events, end)...)
	rep := checker.Check(history, checker.Options{Complete: true})
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if rep.Requests != rounds {
		t.Fatalf("the history holds %d requests, want %d", rep.Requests, rounds)
	}
	for _, s := range []airlock.State{airlock.StateApproved, airlock.StateDenied, airlock.StateCancelled, airlock.StateExpired} {
		if rep.Outcomes[s] == 0 {
			t.Errorf("no round ended %s: the rounds do not exercise every outcome (outcomes %v)", s, rep.Outcomes)
		}
	}
	late := 0
	closest := time.Hour // the smallest margin by which an approval beat its deadline
	refusals := map[airlock.Code]int{}
	for _, o := range ops {
		if o.Kind == checker.Approve && o.Code == "" {
			margin := deadlineOf(ops, o.RequestID).Sub(o.DecidedAt)
			if margin <= 0 {
				late++
			}
			closest = min(closest, margin)
		}
		if o.Code != "" {
			refusals[o.Code]++
		}
	}
	var lat []time.Duration
	for _, o := range ops {
		if o.Kind != checker.Read {
			lat = append(lat, o.Return.Sub(o.Call))
		}
	}
	slices.Sort(lat)
	t.Logf("call latency p50 %s p90 %s", lat[len(lat)/2], lat[len(lat)*9/10])
	if late != 0 {
		t.Errorf("%d approvals recorded at or after their deadline", late)
	}
	t.Logf("T02: %d rounds on 3 replicas in %s (%d workers): %d ops + %d expiries checked; outcomes %v; refusals %v; "+
		"0 requests with ≠ 1 outcome, %d approvals at/after the deadline (the closest %s before it), linearizable; expiries by replica %v",
		rounds, raced.Round(time.Millisecond), workers, len(ops), len(history)-len(ops), rep.Outcomes, refusals, late, closest, cl.expiredByReplica(t))
}

// deadlineOf returns the deadline the create of id answered with.
func deadlineOf(ops []checker.Op, id string) time.Time {
	for _, o := range ops {
		if o.Kind == checker.Create && o.RequestID == id {
			return o.DeadlineAt
		}
	}
	return time.Time{}
}

var expiredMetricRE = regexp.MustCompile(`(?m)^airlock_requests_total\{state="expired"\} (\d+)$`)

// expiredByReplica returns how many requests each replica expired (its
// scheduler, or a read that found the deadline passed), from its metrics.
func (cl *cluster) expiredByReplica(t testing.TB) []int {
	var out []int
	for _, r := range cl.replicas {
		m := expiredMetricRE.FindStringSubmatch(cl.c.call(t, "GET", r.URL, "/metrics", "", "").Raw)
		n := -1
		if m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		out = append(out, n)
	}
	return out
}
