package replicas

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkLongPollAcrossReplicas measures how long a decision made on one
// replica takes to answer a long-poll waiting on another: from the start
// of the decision call on B to the long-poll's answer on A, both real
// `airlock serve` processes on one database. It reports the median and
// the 99th percentile.
func BenchmarkLongPollAcrossReplicas(b *testing.B) {
	cl := startCluster(b, 2)
	waiter, decider := cl.replicas[0], cl.replicas[1]
	inst := cl.instance(b, "bench waiter")
	var lat []time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		r := cl.c.call(b, "POST", waiter.URL, "/v1/instances/"+inst+"/approval-requests", cl.agent,
			`{"tool":"wait","arguments":{},"timeout":"1h"}`, "Idempotency-Key", fmt.Sprint("bench-", n))
		if !r.want(b, 201, "create") {
			b.FailNow()
		}
		id := r.Str("id")
		got := make(chan polled, 1)
		go func() {
			r, err := cl.c.do(context.Background(), "GET", waiter.URL, "/v1/approval-requests/"+id+"?wait=30s", cl.agent, "")
			got <- polled{r, err, time.Now()}
		}()
		cl.awaitWaiters(b, waiter.URL, 1)
		b.StartTimer()
		start := time.Now()
		if r := cl.c.call(b, "POST", decider.URL, "/v1/approval-requests/"+id+"/decision", cl.reviewer, `{"status":"approved"}`); !r.want(b, 200, "decide") {
			b.FailNow()
		}
		p := <-got
		if p.err != nil || p.r.Str("state") != "approved" {
			b.Fatalf("the long-poll answered %v %s", p.err, p.r.Raw)
		}
		lat = append(lat, p.at.Sub(start))
	}
	slices.Sort(lat)
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchClients is how many clients run lifecycles at once, against Airlock
// and against the database directly.
const benchClients = 8

// BenchmarkLifecycle measures whole lifecycles over HTTP — an agent creates
// a request, a reviewer approves it, the agent reads it back — by 8
// clients at once against 1 and against 3 real replicas on one database
// (with 3, each step of a lifecycle goes to another replica). In the same
// run it does the same durable work with direct SQL from 8 connections
// (an insert with a unique key, a conditional update, a read; each its own
// committed transaction), half just before and half just after, and
// reports Airlock's throughput as a ratio to that (ratio_to_raw).
func BenchmarkLifecycle(b *testing.B) {
	clusters := map[int]*cluster{1: startCluster(b, 1), 3: startCluster(b, 3)}
	raw := newRawLifecycle(b)
	for _, n := range []int{1, 3} {
		cl := clusters[n]
		inst := cl.instance(b, fmt.Sprint("bench ", n))
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			var seq atomic.Int64
			// run runs lifecycles numbered from after+1 to upto, 8 at once.
			run := func(after, upto int, lifecycle func(i int64) error) time.Duration {
				seq.Store(int64(after))
				var wg sync.WaitGroup
				start := time.Now()
				for range benchClients {
					wg.Go(func() {
						for {
							i := seq.Add(1)
							if i > int64(upto) {
								return
							}
							if err := lifecycle(i); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				return time.Since(start)
			}

			// Half the direct SQL runs just before Airlock and half just
			// after, so that a change in the machine's load during the run
			// (it is shared) weighs on both sides of the ratio alike.
			prefix := fmt.Sprintf("%d-%d-", n, time.Now().UnixNano())
			rawLifecycle := func(i int64) error { return raw.lifecycle(b.Context(), prefix, i) }
			b.StopTimer()
			rawTook := run(0, b.N/2, rawLifecycle)
			b.StartTimer()
			took := run(0, b.N, func(i int64) error { return cl.httpLifecycle(b, inst, prefix, i) })
			b.StopTimer()
			rawTook += run(b.N/2, b.N, rawLifecycle)

			rate := float64(b.N) / took.Seconds()
			rawRate := float64(b.N) / rawTook.Seconds()
			b.ReportMetric(rate, "lifecycles/s")
			b.ReportMetric(rawRate, "raw-lifecycles/s")
			b.ReportMetric(rate/rawRate, "ratio_to_raw")
		})
	}
}

// httpLifecycle is one lifecycle over HTTP, its steps spread over the
// cluster's replicas.
func (cl *cluster) httpLifecycle(b *testing.B, inst, prefix string, i int64) error {
	on := func(step int64) string { return cl.replicas[(i+step)%int64(len(cl.replicas))].URL }
	ctx := context.Background()
	r, err := cl.c.do(ctx, "POST", on(0), "/v1/instances/"+inst+"/approval-requests", cl.agent,
		fmt.Sprintf(`{"tool":"issue_refund","arguments":{"amount":4900,"n":%d}}`, i), "Idempotency-Key", fmt.Sprint(prefix, i))
	if err != nil || r.Status != 201 {
		return fmt.Errorf("create: %v %d %s", err, r.Status, r.Raw)
	}
	id := r.Str("id")
	r, err = cl.c.do(ctx, "POST", on(1), "/v1/approval-requests/"+id+"/decision", cl.reviewer, `{"status":"approved"}`)
	if err != nil || r.Status != 200 {
		return fmt.Errorf("decide: %v %d %s", err, r.Status, r.Raw)
	}
	r, err = cl.c.do(ctx, "GET", on(2), "/v1/approval-requests/"+id, cl.agent, "")
	if err != nil || r.Status != 200 || r.Str("state") != "approved" {
		return fmt.Errorf("read: %v %d %s", err, r.Status, r.Raw)
	}
	return nil
}

// rawLifecycle is the floor Airlock's lifecycle is compared with: the
// same durable steps as plain SQL on a table of its own.
type rawLifecycle struct {
	pool *pgxpool.Pool
}

func newRawLifecycle(b *testing.B) *rawLifecycle {
	schema := testkit.CreateSchema(b, "t_rep_")
	cfg, err := pgxpool.ParseConfig(testkit.SchemaURL(b, schema))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = benchClients
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE raw_requests (
	id              text        PRIMARY KEY,
	owner_id        text        NOT NULL,
	idempotency_key text        NOT NULL,
	state           text        NOT NULL,
	tool            text        NOT NULL,
	arguments       jsonb       NOT NULL,
	created_at      timestamptz NOT NULL,
	deadline_at     timestamptz NOT NULL,
	decided_at      timestamptz,
	decided_by      text,
	expires_at      timestamptz,
	UNIQUE (owner_id, idempotency_key)
)`); err != nil {
		b.Fatal(err)
	}
	return &rawLifecycle{pool: pool}
}

// lifecycle creates, approves and reads one row: three statements, the
// first two committed on their own, as Airlock's create and decide are.
func (raw *rawLifecycle) lifecycle(ctx context.Context, prefix string, i int64) error {
	id := fmt.Sprint("raw_", prefix, i)
	if _, err := raw.pool.Exec(ctx, `INSERT INTO raw_requests (id, owner_id, idempotency_key, state, tool, arguments, created_at, deadline_at)
VALUES ($1, 'agent', $1, 'pending', 'issue_refund', $2, clock_timestamp(), clock_timestamp() + interval '15 minutes')
ON CONFLICT (owner_id, idempotency_key) DO NOTHING`, id, fmt.Sprintf(`{"amount":4900,"n":%d}`, i)); err != nil {
		return fmt.Errorf("raw insert: %w", err)
	}
	tag, err := raw.pool.Exec(ctx, `UPDATE raw_requests SET state = 'approved', decided_at = clock_timestamp(), decided_by = 'reviewer',
	expires_at = clock_timestamp() + interval '5 minutes'
WHERE id = $1 AND state = 'pending' AND deadline_at > clock_timestamp()`, id)
	if err != nil || tag.RowsAffected() != 1 {
		return fmt.Errorf("raw update: %v (%d rows)", err, tag.RowsAffected())
	}
	var state string
	if err := raw.pool.QueryRow(ctx, `SELECT state FROM raw_requests WHERE id = $1`, id).Scan(&state); err != nil || state != "approved" {
		return fmt.Errorf("raw read: %v (%q)", err, state)
	}
	return nil
}
