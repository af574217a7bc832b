package replicas

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/webhooktest"
	"github.com/airlockhq/airlock/store/storetest"
)

// TestWebhooksAcrossReplicas is T24 on PostgreSQL: three replicas deliver
// the webhooks of 2,000 lifecycles (each created on one replica and
// decided on the next) to receivers that answer, fail once with 500, drop
// the connection once, answer slowly and hang; one replica is killed with
// SIGKILL mid-delivery and restarted. Every committed event reaches every
// answering receiver at least once, verified; a webhook-id always carries
// the same body; nothing arrives that the log does not hold (decisions
// refused and rolled back send nothing); the hung receiver delays no
// other, and its leases, like the killed replica's, are taken over.
func TestWebhooksAcrossReplicas(t *testing.T) {
	testkit.Long(t)
	t.Parallel()
	// CI runs 600 under the race detector; AIRLOCK_T24_LIFECYCLES=2000
	// is the long run (docs/reliability.md).
	lifecycles := 600
	if n, err := strconv.Atoi(os.Getenv("AIRLOCK_T24_LIFECYCLES")); err == nil && n > 0 {
		lifecycles = n
	}
	cl := startClusterWith(t, 3, []string{"--outbound-allow-private", "--webhook-timeout", "3s"}, "pool_max_conns", "4")
	base := cl.replicas[0].URL
	tokens := cl.c.call(t, "GET", base, "/v1/tokens", adminToken, "")
	var agentID string
	for _, it := range tokens.Body["items"].([]any) {
		if m := it.(map[string]any); m["role"] == "agent" {
			agentID = m["id"].(string)
		}
	}
	r := cl.c.call(t, "POST", base, "/v1/tokens", adminToken, fmt.Sprintf(`{"name":"self","role":"reviewer","principal":%q}`, agentID))
	if !r.want(t, 201, "mint the self reviewer") {
		t.FailNow()
	}
	self := r.Str("secret")

	var rcs []*webhooktest.Receiver
	hookIDs := map[*webhooktest.Receiver]string{}
	for name, b := range map[string]webhooktest.Behavior{
		"ok": webhooktest.OK, "fail500": webhooktest.Fail500First, "drop": webhooktest.DropFirst,
		"slow": webhooktest.Slow, "hang": webhooktest.Hang,
	} {
		rc := webhooktest.NewReceiver(name, b)
		t.Cleanup(rc.Close)
		r := cl.c.call(t, "POST", base, "/v1/webhooks", adminToken, fmt.Sprintf(`{"url":%q}`, rc.URL()))
		if !r.want(t, 201, "create webhook "+name) {
			t.FailNow()
		}
		rc.SetSecret(r.Str("secret"))
		hookIDs[rc] = r.Str("id")
		rcs = append(rcs, rc)
	}
	slices.SortFunc(rcs, func(a, b *webhooktest.Receiver) int { return strings.Compare(a.Name, b.Name) })
	inst := cl.instance(t, "webhooks")

	var (
		urlMu sync.Mutex
		urls  = []string{cl.replicas[0].URL, cl.replicas[1].URL, cl.replicas[2].URL}
	)
	at := func(i int) string {
		urlMu.Lock()
		defer urlMu.Unlock()
		return urls[i%3]
	}
	var (
		mu         sync.Mutex
		rolledBack []string
		done       atomic.Int64
	)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				r, err := cl.c.do(t.Context(), "POST", at(i), "/v1/instances/"+inst+"/approval-requests", cl.agent,
					fmt.Sprintf(`{"tool":"pay","arguments":{"n":%d},"timeout":"1h"}`, i), "Idempotency-Key", fmt.Sprint("hook-", i))
				if err != nil || r.Status != 201 {
					continue // the replica was killed
				}
				id := r.Str("id")
				if i%10 == 0 {
					r, err := cl.c.do(t.Context(), "POST", at(i+1), "/v1/approval-requests/"+id+"/decision", self, `{"status":"approved"}`)
					if err == nil && r.Status == 403 {
						mu.Lock()
						rolledBack = append(rolledBack, id)
						mu.Unlock()
					}
				} else {
					status := []string{"approved", "denied"}[i%2]
					cl.c.do(t.Context(), "POST", at(i+1), "/v1/approval-requests/"+id+"/decision", cl.reviewer, `{"status":"`+status+`"}`)
				}
				done.Add(1)
			}
		})
	}
	for i := range lifecycles {
		switch i {
		case lifecycles / 3:
			// Mid-load and mid-delivery: the slow and hung receivers hold
			// attempts of this replica's leases.
			cl.replicas[0].Kill()
		case 2 * lifecycles / 3:
			restarted := startReplica(t, cl.db, cl.flags...)
			cl.replicas[0] = restarted
			urlMu.Lock()
			urls[0] = restarted.URL
			urlMu.Unlock()
		}
		next <- i
	}
	close(next)
	wg.Wait()

	want := webhooktest.ExpectedFrom(storetest.AllEvents(t, cl.store(t)), 0)
	loaded := time.Now()
	webhooktest.CheckAll(t, rcs, want, 5*time.Minute, func(rc *webhooktest.Receiver, rep webhooktest.Report) string {
		return cl.outputs() + "\nthe missing ones' deliveries: " + deliveriesOf(t, cl, hookIDs[rc], rep.Missing)
	})
	webhooktest.CheckRolledBack(t, rcs, rolledBack)
	t.Logf("%d lifecycles on 3 replicas (one killed and restarted): %d committed webhook events, all delivered %s after the load; %d decisions rolled back; the hung receiver got %d attempts",
		done.Load(), len(want), time.Since(loaded).Round(time.Millisecond), len(rolledBack), rcs[slices.IndexFunc(rcs, func(r *webhooktest.Receiver) bool { return r.Behavior == webhooktest.Hang })].Attempts())
}

// deliveriesOf returns, for a failure message, the deliveries of webhook
// id whose webhook-id is one of msgs, with their attempts.
func deliveriesOf(t *testing.T, cl *cluster, id string, msgs []string) string {
	want := map[string]bool{}
	for _, m := range msgs {
		want[m] = true
	}
	var b strings.Builder
	for cursor := ""; ; {
		r := cl.c.call(t, "GET", cl.replicas[1].URL, "/v1/webhooks/"+id+"/deliveries?limit=500"+cursor, adminToken, "")
		items, _ := r.Body["items"].([]any)
		for _, it := range items {
			if m := it.(map[string]any); want[m["message_id"].(string)] {
				fmt.Fprintf(&b, "\n  %v", m)
			}
		}
		next := r.Str("next_cursor")
		if next == "" || len(items) == 0 {
			return b.String()
		}
		cursor = "&cursor=" + next
	}
}
