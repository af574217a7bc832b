package replicas

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGrantUsesAcrossReplicas is T28 across replicas: a grant of N uses
// and 16 concurrent matching creates spread over three `airlock serve`
// processes: exactly N are approved, each decided by the grant (and its
// approval event names it), the rest wait for a person. A revoked grant,
// and an expired one, then approve none of 16 more.
func TestGrantUsesAcrossReplicas(t *testing.T) {
	t.Parallel()
	const uses, creates = 5, 16
	cl := startCluster(t, 3)
	inst := cl.instance(t, "grants")
	call := `{"tool":"deploy","arguments":{"service":"web","version":"1.2.3"}}`
	var keys atomic.Int64
	create := func(on int) resp {
		return cl.c.call(t, "POST", cl.replicas[on%3].URL, "/v1/instances/"+inst+"/approval-requests", cl.agent, call,
			"Idempotency-Key", fmt.Sprintf("grant-%d", keys.Add(1)))
	}

	// The grant comes with an approval made on another replica.
	first := create(0)
	if !first.want(t, 201, "the first call") {
		t.FailNow()
	}
	d := cl.c.call(t, "POST", cl.replicas[1].URL, "/v1/approval-requests/"+first.Str("id")+"/decision", cl.reviewer,
		fmt.Sprintf(`{"status":"approved","grant":{"uses":%d,"expires_in":"1h","match":"same_arguments"}}`, uses))
	if !d.want(t, 200, "approve with a grant") {
		t.FailNow()
	}
	grant := d.Str("grant.id")

	// race creates 16 matching requests at once, over the replicas, and
	// returns how many a grant approved, by grant.
	race := func(what string) map[string]int {
		rs := make([]resp, creates)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range creates {
			wg.Go(func() { <-start; rs[i] = create(i) })
		}
		close(start)
		wg.Wait()
		by := map[string]int{}
		for _, r := range rs {
			if !r.want(t, 201, what) {
				continue
			}
			switch r.Str("state") {
			case "approved":
				by[r.Str("decision.decided_by")]++
			case "pending":
			default:
				t.Errorf("%s: a request is %s: %s", what, r.Str("state"), r.Raw)
			}
		}
		return by
	}

	if by := race("creates on a live grant"); len(by) != 1 || by["grant:"+grant] != uses {
		t.Fatalf("%d concurrent creates on a grant of %d uses over 3 replicas: approved %v, want exactly %d by grant:%s\n%s",
			creates, uses, by, uses, grant, cl.outputs())
	}
	g := cl.c.call(t, "GET", cl.replicas[2].URL, "/v1/grants/"+grant, cl.reviewer, "")
	if g.Str("state") != "used_up" || g.Body["uses_left"] != 0.0 {
		t.Fatalf("the grant after its uses: %s", g.Raw)
	}
	evs, err := cl.store(t).ListEvents(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, e := range evs {
		if e.Type == "request.approved" && e.Actor == "grant:"+grant {
			named++
		}
	}
	if named != uses {
		t.Fatalf("%d approval events name the grant, want %d", named, uses)
	}

	// A revoked grant approves nothing.
	made := cl.c.call(t, "POST", cl.replicas[2].URL, "/v1/grants", cl.reviewer,
		`{"tool":"deploy","arguments":{"service":"web","version":"1.2.3"},"instance_id":"`+inst+`","uses":100,"expires_in":"1h"}`)
	if !made.want(t, 201, "a second grant") {
		t.FailNow()
	}
	cl.c.call(t, "DELETE", cl.replicas[0].URL, "/v1/grants/"+made.Str("id"), cl.reviewer, "").want(t, 200, "revoke")
	if by := race("creates after the revocation"); len(by) != 0 {
		t.Fatalf("after the revocation: approved %v, want none", by)
	}

	// Nor does an expired one. The replicas judge time by the database's
	// clock, which a test cannot move: the grant lasts a second, and the
	// test reads it until a replica says it expired.
	short := cl.c.call(t, "POST", cl.replicas[1].URL, "/v1/grants", cl.reviewer,
		`{"tool":"deploy","arguments":{"service":"web","version":"1.2.3"},"instance_id":"`+inst+`","uses":100,"expires_in":"1s"}`)
	if !short.want(t, 201, "a short grant") {
		t.FailNow()
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		s := cl.c.call(t, "GET", cl.replicas[0].URL, "/v1/grants/"+short.Str("id"), cl.reviewer, "").Str("state")
		if s == "expired" {
			break
		}
		if time.Now().After(deadline) || !strings.Contains("live expired", s) {
			t.Fatalf("the short grant is %q", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if by := race("creates after the expiry"); len(by) != 0 {
		t.Fatalf("after the expiry: approved %v, want none", by)
	}
	t.Logf("T28: %d concurrent creates on a grant of %d uses over 3 replicas: %d approved, each by the grant; none after revocation or expiry",
		creates, uses, uses)
}
