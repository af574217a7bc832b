package replicas

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/jackc/pgx/v5"
)

// heardWithin bounds how long a waiter may take to hear a decision made on
// another replica. It is far above the milliseconds it takes (logged), and
// far below the long-poll's 30 s wait, so a waiter that was not woken by
// the decision fails.
const heardWithin = 5 * time.Second

var waitingRE = regexp.MustCompile(`(?m)^airlock_long_polls_waiting (\d+)$`)

// awaitWaiters polls a replica's metrics until n long-polls wait on it:
// only the server knows when a long-poll has reached it. The poll has a
// deadline.
func (cl *cluster) awaitWaiters(t testing.TB, base string, n int) {
	t.Helper()
	want := fmt.Sprint(n)
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d long-polls to reach %s", n, base), func() bool {
		m := waitingRE.FindStringSubmatch(cl.c.call(t, "GET", base, "/metrics", "", "").Raw)
		return m != nil && m[1] == want
	})
}

// polled is what a long-poll got, and when.
type polled struct {
	r   resp
	err error
	at  time.Time
}

// longPoll starts a 30 s long-poll of id on base by the agent and returns
// where its answer will arrive, once the server has it waiting.
func (cl *cluster) longPoll(t *testing.T, base, id string) <-chan polled {
	t.Helper()
	return cl.longPollAs(t, base, id, cl.agent, 1)
}

// longPollAs is longPoll with token, returning once waiting long-polls
// wait on base.
func (cl *cluster) longPollAs(t *testing.T, base, id, token string, waiting int) <-chan polled {
	t.Helper()
	got := make(chan polled, 1)
	go func() {
		r, err := cl.c.do(context.Background(), "GET", base, "/v1/approval-requests/"+id+"?wait=30s", token, "")
		got <- polled{r, err, time.Now()}
	}()
	cl.awaitWaiters(t, base, waiting)
	return got
}

// TestLongPollAcrossReplicas checks that a long-poll waiting on one replica
// answers as soon as a reviewer decides on another, for every ordered pair
// of three replicas, and that an event stream on replica 0 carries the
// decisions made on the others. It logs the latency from the decision call
// to the waiter's answer.
func TestLongPollAcrossReplicas(t *testing.T) {
	t.Parallel()
	const rounds = 30
	cl := startCluster(t, 3, "pool_max_conns", "3")
	inst := cl.instance(t, "waiter")

	// The event stream on replica 0, reading until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	streamed := make(chan string, 4*rounds) // "type id"
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		readEvents(ctx, cl.replicas[0].URL, cl.reviewer, streamed)
	}()
	t.Cleanup(func() { cancel(); <-streamDone })

	var lat []time.Duration
	decidedElsewhere := map[string]string{} // request ID → event type expected on replica 0's stream
	for i := range rounds {
		waiter := cl.replicas[i%3]
		decider := cl.replicas[(i+1+(i/3)%2)%3] // each of the other two in turn
		status := []string{"approved", "denied"}[i%2]
		r := cl.c.call(t, "POST", waiter.URL, "/v1/instances/"+inst+"/approval-requests", cl.agent,
			fmt.Sprintf(`{"tool":"wait","arguments":{"i":%d},"timeout":"1h"}`, i), "Idempotency-Key", fmt.Sprint("wait-", i))
		if !r.want(t, 201, "create") {
			t.FailNow()
		}
		id := r.Str("id")
		got := cl.longPoll(t, waiter.URL, id)
		start := time.Now()
		cl.c.call(t, "POST", decider.URL, "/v1/approval-requests/"+id+"/decision", cl.reviewer, `{"status":"`+status+`"}`).want(t, 200, "decide")
		select {
		case p := <-got:
			if p.err != nil || p.r.Status != 200 || p.r.Str("state") != status {
				t.Fatalf("round %d: the long-poll on %s answered %v %d %s; want %s", i, waiter.URL, p.err, p.r.Status, p.r.Raw, status)
			}
			lat = append(lat, p.at.Sub(start))
		case <-time.After(heardWithin):
			t.Fatalf("round %d: a long-poll on %s did not hear, within %s, a decision made on %s:\n%s", i, waiter.URL, heardWithin, decider.URL, cl.outputs())
		}
		if decider != cl.replicas[0] {
			decidedElsewhere[id] = "request." + status
		}
	}

	deadline := time.After(heardWithin)
	for len(decidedElsewhere) > 0 {
		select {
		case ev := <-streamed:
			typ, id, _ := strings.Cut(ev, " ")
			if decidedElsewhere[id] == typ {
				delete(decidedElsewhere, id)
			}
		case <-deadline:
			t.Fatalf("the event stream on replica 0 lacks %d decisions made on other replicas: %v", len(decidedElsewhere), decidedElsewhere)
		}
	}
	slices.Sort(lat)
	t.Logf("long-poll across replicas, %d decisions: decision call → waiter's answer p50 %s, p90 %s, max %s",
		len(lat), lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])
}

// readEvents reads the event stream of base and sends "type request_id"
// for each event, until ctx ends.
func readEvents(ctx context.Context, base, token string, out chan<- string) {
	idRE := regexp.MustCompile(`"request_id":"([^"]+)"`)
	testkit.Events(ctx, base, token, func(typ, data string) bool {
		if m := idRE.FindStringSubmatch(data); m != nil {
			select {
			case out <- typ + " " + m[1]:
			case <-ctx.Done():
				return false
			}
		}
		return true
	})
}

// TestLongPollAfterDroppedListen checks recovery from a missed
// notification: replica A's listening connection is terminated by the
// database while a long-poll waits on A, and a decision is made on B at
// once, while A is not listening. A must notice, listen again, and have
// its waiter re-read: the long-poll answers with the decision.
func TestLongPollAfterDroppedListen(t *testing.T) {
	t.Parallel()
	schema := testkit.CreateSchema(t, "t_rep_")
	var b [4]byte
	rand.Read(b[:])
	appA := "airlock_a_" + hex.EncodeToString(b[:])
	// Each replica names itself to the database, so the test can find A's
	// listening connection.
	a := startReplica(t, testkit.SchemaURL(t, schema, "pool_max_conns", "3", "application_name", appA))
	bee := startReplica(t, testkit.SchemaURL(t, schema, "pool_max_conns", "3"))
	cl := &cluster{schema: schema, replicas: []*replica{a, bee}, c: newClient(t)}
	cl.agent = cl.c.mintToken(t, a.URL, "agent")
	cl.reviewer = cl.c.mintToken(t, a.URL, "reviewer")
	inst := cl.instance(t, "dropped")

	r := cl.c.call(t, "POST", a.URL, "/v1/instances/"+inst+"/approval-requests", cl.agent,
		`{"tool":"wait","arguments":{},"timeout":"1h"}`, "Idempotency-Key", "dropped-1")
	if !r.want(t, 201, "create") {
		t.FailNow()
	}
	id := r.Str("id")
	// A listens from its start; wait until its listening connection shows.
	listen := appA + " listen"
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("a database session named %q", listen), func() bool { return countBackends(t, listen) == 1 })
	got := cl.longPoll(t, a.URL, id)

	if err := testkit.ExecSQL(testkit.PostgresURL(t), fmt.Sprintf(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '%s'`, listen)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cl.c.call(t, "POST", bee.URL, "/v1/approval-requests/"+id+"/decision", cl.reviewer, `{"status":"approved"}`).want(t, 200, "decide on B")
	select {
	case p := <-got:
		if p.err != nil || p.r.Status != 200 || p.r.Str("state") != "approved" {
			t.Fatalf("the long-poll on A answered %v %d %s; want approved", p.err, p.r.Status, p.r.Raw)
		}
		t.Logf("with A's listening connection dropped, its long-poll heard the decision on B after %s", p.at.Sub(start))
	case <-time.After(heardWithin):
		t.Fatalf("the long-poll on A did not hear the decision on B within %s of its listening connection dropping:\n%s", heardWithin, cl.outputs())
	}
	if !strings.Contains(a.Out.String(), "change feed stopped; retrying") {
		t.Errorf("replica A did not report losing its listening connection; the test dropped nothing:\n%s", a.Out)
	}
}

// countBackends counts the database sessions named application.
func countBackends(t *testing.T, application string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, application).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
