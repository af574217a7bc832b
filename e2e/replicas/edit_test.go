package replicas

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// TestEditRacesAcrossReplicas is T37 across three real `airlock serve`
// processes on one PostgreSQL schema: every round creates a request with
// a 5..50 ms window, then fires an edit (an approval with changed
// arguments), a denial and a cancellation at the three replicas with
// jitter around the deadline. Each request ends one way: when the edit
// won, the original is denied naming its replacement, which is approved
// with the edited arguments and derived from it, a claim on the original
// is refused and the replacement's one claim succeeds; when anything else
// won (or the deadline), the edit was refused and the request names no
// replacement.
func TestEditRacesAcrossReplicas(t *testing.T) {
	t.Parallel()
	rounds := 300
	if testkit.Short() {
		rounds = 60
	}
	const workers = 8
	cl := startCluster(t, 3, "pool_max_conns", "3")
	inst := cl.instance(t, "edit-races")
	createPath := "/v1/instances/" + inst + "/approval-requests"
	var (
		mu   sync.Mutex
		wins = map[string]int{}
	)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := range next {
				rng := rand.New(rand.NewPCG(uint64(n), 0x7437))
				window := time.Duration(5+rng.IntN(46)) * time.Millisecond
				order := rng.Perm(3)
				ctx := context.Background()
				sent := time.Now()
				r, err := cl.c.do(ctx, "POST", cl.replicas[rng.IntN(3)].URL, createPath, cl.agent,
					fmt.Sprintf(`{"tool":"race","arguments":{"round":%d},"timeout":"%s"}`, n, window), "Idempotency-Key", "edit-"+strconv.Itoa(n))
				if err != nil || r.Status != 201 {
					t.Errorf("round %d: create: %v %d %s", n, err, r.Status, r.Raw)
					continue
				}
				id := r.Str("id")
				calls := []struct{ name, path, body, token string }{
					{"edit", "/decision", fmt.Sprintf(`{"status":"approved","arguments":{"round":%d,"edited":true}}`, n), cl.reviewer},
					{"deny", "/decision", `{"status":"denied"}`, cl.reviewer},
					{"cancel", "/cancel", "", cl.agent},
				}
				won := make([]bool, len(calls))
				var fired sync.WaitGroup
				for i, call := range calls {
					delay := jitter(rng, window)
					fired.Go(func() {
						time.Sleep(time.Until(sent.Add(delay)))
						r, err := cl.c.do(ctx, "POST", cl.replicas[order[i]].URL, "/v1/approval-requests/"+id+call.path, call.token, call.body)
						switch {
						case err != nil || (r.Status != 200 && r.Status != 409):
							t.Errorf("round %d: %s: %v %d %s", n, call.name, err, r.Status, r.Raw)
						case r.Status == 200:
							won[i] = true
						}
					})
				}
				fired.Wait()
				final, err := cl.c.do(ctx, "GET", cl.replicas[rng.IntN(3)].URL, "/v1/approval-requests/"+id+"?wait=10s", cl.agent, "")
				if err != nil || final.Status != 200 {
					t.Errorf("round %d: read: %v %d", n, err, final.Status)
					continue
				}
				winner := "deadline"
				for i, w := range won {
					if w {
						if winner != "deadline" {
							t.Errorf("round %d: both %s and %s won", n, winner, calls[i].name)
						}
						winner = calls[i].name
					}
				}
				mu.Lock()
				wins[winner]++
				mu.Unlock()
				replacedBy := final.Str("decision.replaced_by")
				if winner != "edit" {
					if replacedBy != "" {
						t.Errorf("round %d: %s won, but the request is replaced by %s", n, winner, replacedBy)
					}
					continue
				}
				if final.Str("state") != "denied" || replacedBy == "" {
					t.Errorf("round %d: the edit won, but the original is %s replaced by %q", n, final.Str("state"), replacedBy)
					continue
				}
				rep, err := cl.c.do(ctx, "GET", cl.replicas[rng.IntN(3)].URL, "/v1/approval-requests/"+replacedBy, cl.agent, "")
				if err != nil || rep.Str("state") != "approved" || rep.Str("derived_from") != id || !strings.Contains(string(rep.Raw), `"arguments":{"round":`+strconv.Itoa(n)+`,"edited":true}`) {
					t.Errorf("round %d: the replacement: %v %s", n, err, rep.Raw)
				}
				c, _ := cl.c.do(ctx, "POST", cl.replicas[rng.IntN(3)].URL, "/v1/approval-requests/"+id+"/execution", cl.agent, "")
				if c.Status != 409 || c.Str("code") != "not_approved" {
					t.Errorf("round %d: a claim on the edited original answered %d %s", n, c.Status, c.Raw)
				}
				c, _ = cl.c.do(ctx, "POST", cl.replicas[rng.IntN(3)].URL, "/v1/approval-requests/"+replacedBy+"/execution", cl.agent, "")
				if c.Status != 200 {
					t.Errorf("round %d: the replacement's claim answered %d %s", n, c.Status, c.Raw)
				}
			}
		})
	}
	for n := range rounds {
		next <- n
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.Fatalf("replicas' output:\n%s", cl.outputs())
	}
	if wins["edit"] == 0 {
		t.Errorf("no edit won a round (winners %v): the rounds do not exercise an edit", wins)
	}
	t.Logf("T37 across 3 replicas: %d rounds, winners %v", rounds, wins)
}
