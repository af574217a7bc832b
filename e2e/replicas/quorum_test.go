package replicas

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/checker"
	"github.com/airlockhq/airlock/internal/testkit"
)

// quorumPolicy routes tool "two" to 2-of-{p0..p2} and tool "three" to
// 3-of-{p0..p4}. The agent's principal is p0, so p0's votes never count.
const quorumPolicy = `groups:
  payments: [p0, p1, p2, p3, p4]
rules:
  - {name: two, match: 'request.tool == "two"', action: ask, reviewers: payments, approvals: 2}
  - {name: three, match: 'request.tool == "three"', action: ask, reviewers: payments, approvals: 3}
`

// recordVote fills a vote's op from a REST reply, as recordHTTP does,
// with the approvals the request needs and its approving votes.
func recordVote(op *checker.Op, r resp, err error) {
	recordHTTP(op, r, err)
	if err != nil || r.Status/100 != 2 {
		return
	}
	op.Approvals, op.ApprovedVotes = approvalCounts(r)
}

// approvalCounts reads a request's approvals and approving votes.
func approvalCounts(r resp) (need, approved int) {
	if n, ok := r.Body["approvals"].(float64); ok {
		need = int(n)
	}
	votes, _ := r.Body["votes"].([]any)
	for _, v := range votes {
		if m, _ := v.(map[string]any); m["status"] == "approved" {
			approved++
		}
	}
	return need, approved
}

// TestQuorumAcrossReplicas is T29 across replicas: three `airlock serve`
// processes on one PostgreSQL schema with a policy whose groups and rules
// need 2-of-3 and 3-of-5 approvals. Every round creates a request, then
// fires at once, at the three replicas in turn, a vote of each member
// (the creator's principal among them, and one member voting twice), and
// in some rounds one member's denial instead of an approval. The history
// goes to the checker: exactly one terminal outcome, no principal counted
// twice, no vote of the creator's counted, an approval only with the
// quorum, and linearizable against the model that counts votes.
func TestQuorumAcrossReplicas(t *testing.T) {
	t.Parallel()
	rounds := 120
	if testkit.Short() {
		rounds = 40
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
	voters := make([]string, 5)
	for i := range voters {
		voters[i] = mint(fmt.Sprintf("Reviewer %d", i), "reviewer", fmt.Sprintf("p%d", i))
	}
	r := cl.c.call(t, "POST", base, "/v1/instances", agent, `{"name":"quorum"}`)
	if !r.want(t, 201, "register an instance") {
		t.FailNow()
	}
	createPath := "/v1/instances/" + r.Str("id") + "/approval-requests"

	var rec checker.Recorder
	rng := rand.New(rand.NewPCG(29, 29))
	outcomes := map[string]int{}
	for round := range rounds {
		tool, members := "two", 3
		if round%2 == 1 {
			tool, members = "three", 5
		}
		create := checker.Op{Client: 0, Kind: checker.Create, Call: time.Now(), Principal: "p0"}
		cr, err := cl.c.do(t.Context(), "POST", cl.replicas[round%3].URL, createPath, agent,
			fmt.Sprintf(`{"tool":%q,"arguments":{"round":%d},"timeout":"1m"}`, tool, round), "Idempotency-Key", fmt.Sprintf("q-%d", round))
		recordVote(&create, cr, err)
		rec.Add(create)
		if create.Code != "" || create.Approvals != map[string]int{"two": 2, "three": 3}[tool] {
			t.Fatalf("round %d: create %s: %s", round, create, cr.Raw)
		}
		id := create.RequestID
		denier := -1
		if rng.IntN(3) == 0 {
			denier = 1 + rng.IntN(members-1)
		}
		twice := 1 + rng.IntN(members-1)
		type call struct {
			voter int
			kind  checker.Kind
		}
		var calls []call
		for i := range members {
			k := checker.Approve
			if i == denier {
				k = checker.Deny
			}
			calls = append(calls, call{i, k})
		}
		calls = append(calls, call{twice, checker.Approve})
		rng.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
		var wg sync.WaitGroup
		for n, c := range calls {
			wg.Go(func() {
				status := "approved"
				if c.kind == checker.Deny {
					status = "denied"
				}
				op := checker.Op{Client: 1 + n, Kind: c.kind, RequestID: id, Principal: fmt.Sprintf("p%d", c.voter), Call: time.Now()}
				vr, err := cl.c.do(t.Context(), "POST", cl.replicas[n%3].URL, "/v1/approval-requests/"+id+"/decision", voters[c.voter],
					`{"status":"`+status+`"}`)
				recordVote(&op, vr, err)
				rec.Add(op)
			})
		}
		wg.Wait()
		final := cl.c.call(t, "GET", cl.replicas[(round+1)%3].URL, "/v1/approval-requests/"+id, voters[1], "")
		outcomes[tool+" "+final.Str("state")]++
		need, approved := approvalCounts(final)
		votes, _ := final.Body["votes"].([]any)
		seen := map[any]bool{}
		for _, v := range votes {
			p := v.(map[string]any)["principal"]
			if seen[p] || p == "p0" {
				t.Errorf("round %d: votes %v count %v twice or the creator's", round, votes, p)
			}
			seen[p] = true
		}
		if st := final.Str("state"); st == "approved" && approved != need || st != "approved" && st != "denied" {
			t.Errorf("round %d: %s with %d of %d approvals: %s", round, st, approved, need, final.Raw)
		}
	}
	rep := checker.Check(rec.Ops(), checker.Options{Complete: true})
	if err := rep.Err(); err != nil {
		t.Fatalf("%v\n%s", err, cl.outputs())
	}
	t.Logf("%d rounds, %d ops: outcomes %v", rounds, rep.Ops, outcomes)
	if outcomes["two approved"] == 0 || outcomes["three approved"] == 0 || outcomes["two denied"]+outcomes["three denied"] == 0 {
		t.Errorf("outcomes %v: every kind of round should have happened", outcomes)
	}
}
