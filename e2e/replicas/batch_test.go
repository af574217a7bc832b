package replicas

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
)

// TestBatchesAcrossReplicas (T38 across replicas): three reviewers send
// batches over the same requests at once, each to another replica (two
// approve, one denies) while the agent cancels some: every request has one
// outcome; a request needing one decision is decided by exactly one of
// them, as its result says; a request needing two approvals is approved
// only with both approving reviewers' votes, each counted once, and a
// denial that lands first decides it.
func TestBatchesAcrossReplicas(t *testing.T) {
	t.Parallel()
	rounds := 10
	if testkit.Short() {
		rounds = 4
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(quorumPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := startClusterWith(t, 3, []string{"--policy", path}, "pool_max_conns", "4")
	base := cl.replicas[0].URL
	mint := func(name, role, principal string) string {
		r := cl.c.call(t, "POST", base, "/v1/tokens", adminToken, fmt.Sprintf(`{"name":%q,"role":%q,"principal":%q}`, name, role, principal))
		if !r.want(t, 201, "mint "+name) {
			t.FailNow()
		}
		return r.Str("secret")
	}
	agent := mint("agent", "agent", "p0")
	reviewers := []struct{ token, principal, status string }{
		{mint("Reviewer 1", "reviewer", "p1"), "p1", "approved"},
		{mint("Reviewer 2", "reviewer", "p2"), "p2", "denied"},
		{mint("Reviewer 3", "reviewer", "p3"), "p3", "approved"},
	}
	r := cl.c.call(t, "POST", base, "/v1/instances", agent, `{"name":"batches"}`)
	if !r.want(t, 201, "register an instance") {
		t.FailNow()
	}
	createPath := "/v1/instances/" + r.Str("id") + "/approval-requests"
	tally := map[string]int{}
	for round := range rounds {
		const n = 40
		ids := make([]string, n)
		tools := make([]string, n)
		for i := range ids {
			tools[i] = "plain"
			if i%2 == 1 {
				tools[i] = "two" // 2 of the payments group
			}
			cr := cl.c.call(t, "POST", cl.replicas[i%3].URL, createPath, agent,
				fmt.Sprintf(`{"tool":%q,"arguments":{"round":%d,"i":%d},"timeout":"1m"}`, tools[i], round, i), "Idempotency-Key", fmt.Sprintf("b-%d-%d", round, i))
			if !cr.want(t, 201, "create") {
				t.FailNow()
			}
			ids[i] = cr.Str("id")
		}
		quoted, _ := json.Marshal(ids)
		results := make([]map[string]batchItem, len(reviewers))
		cancelled := make([]bool, n)
		var wg sync.WaitGroup
		for k, rv := range reviewers {
			wg.Go(func() {
				br, err := cl.c.do(t.Context(), "POST", cl.replicas[(k+round)%3].URL, "/v1/approval-requests/decisions", rv.token,
					fmt.Sprintf(`{"ids":%s,"status":%q}`, quoted, rv.status))
				if err != nil || br.Status != 200 {
					t.Errorf("round %d: %s's batch: %v %d %s", round, rv.principal, err, br.Status, br.Raw)
					return
				}
				var out struct {
					Results []batchItem `json:"results"`
				}
				if err := json.Unmarshal([]byte(br.Raw), &out); err != nil || len(out.Results) != n {
					t.Errorf("round %d: %s's batch answered %d results (%v)", round, rv.principal, len(out.Results), err)
					return
				}
				results[k] = map[string]batchItem{}
				for i, res := range out.Results {
					if res.ID != ids[i] {
						t.Errorf("round %d: result %d is for %s, want %s", round, i, res.ID, ids[i])
					}
					results[k][res.ID] = res
				}
			})
		}
		for i := 0; i < n; i += 5 {
			wg.Go(func() {
				cr, err := cl.c.do(t.Context(), "POST", cl.replicas[(i+round)%3].URL, "/v1/approval-requests/"+ids[i]+"/cancel", agent, "")
				cancelled[i] = err == nil && cr.Status == 200
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		for i, id := range ids {
			final := cl.c.call(t, "GET", cl.replicas[i%3].URL, "/v1/approval-requests/"+id, agent, "")
			state := final.Str("state")
			ok := func(k int) bool { return results[k][id].Status == 200 }
			approvers := 0
			for _, k := range []int{0, 2} {
				if ok(k) {
					approvers++
				}
			}
			switch {
			case tools[i] == "plain":
				winners := approvers
				if ok(1) {
					winners++
				}
				if cancelled[i] {
					winners++
				}
				want := map[bool]string{true: "cancelled"}[cancelled[i]]
				switch {
				case ok(1):
					want = "denied"
				case approvers > 0:
					want = "approved"
				}
				if winners != 1 || state != want {
					t.Errorf("round %d, %s: %d winners (p1 %v, p2 %v, p3 %v, cancel %v), state %s", round, id, winners, ok(0), ok(1), ok(2), cancelled[i], state)
				}
			default:
				var votes []string
				if vs, _ := final.Body["decision"].(map[string]any); vs != nil {
					for _, v := range asSlice(vs["votes"]) {
						votes = append(votes, v.(map[string]any)["principal"].(string))
					}
				} else {
					for _, v := range asSlice(final.Body["votes"]) {
						votes = append(votes, v.(map[string]any)["principal"].(string))
					}
				}
				seen := map[string]bool{}
				for _, p := range votes {
					if seen[p] {
						t.Errorf("round %d, %s: %s counted twice: %v", round, id, p, votes)
					}
					seen[p] = true
				}
				switch state {
				case "approved":
					if approvers != 2 || ok(1) || cancelled[i] || !seen["p1"] || !seen["p3"] {
						t.Errorf("round %d, %s: approved with votes %v (p1 %v, p2 %v, p3 %v, cancel %v)", round, id, votes, ok(0), ok(1), ok(2), cancelled[i])
					}
				case "denied":
					if !ok(1) || cancelled[i] {
						t.Errorf("round %d, %s: denied, but p2's denial answered %d", round, id, results[1][id].Status)
					}
				case "cancelled":
					if !cancelled[i] || ok(1) {
						t.Errorf("round %d, %s: cancelled, but the cancel did not win", round, id)
					}
				default:
					t.Errorf("round %d, %s: %s after every batch", round, id, state)
				}
			}
			tally[tools[i]+" "+state]++
		}
	}
	var parts []string
	for k, v := range tally {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	t.Logf("outcomes: %s", strings.Join(parts, ", "))
}

// batchItem is one result of a batch decision's answer.
type batchItem struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
