package postgres_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/testkit/callers"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/jackc/pgx/v5"
)

// TestMassCancelHeardByID deletes an instance of 10,000 pending requests
// on one replica: another replica hears each of their IDs from the
// notifications, never "re-read everything", which would wake every
// long-poll it holds, each then reading its request (docs/performance.md,
// "Scale": with 100,000 waiters, 100,000 reads for a delete of 10,000).
func TestMassCancelHeardByID(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	// A reads the audit log only once an hour: what it hears here, it
	// heard from notifications.
	a, b := open(t, schema, postgres.WithListenPollForTest(time.Hour)), open(t, schema)
	in := instance(t, b, "tok_a")
	rs := seed(t, b, in, 10_000)

	heard := make(chan []string, 1024)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan error, 1)
	go func() { listening <- a.Listen(ctx, func(ids []string) { heard <- ids }) }()
	defer func() {
		cancel()
		if err := <-listening; err != nil {
			t.Errorf("Listen after its context ended = %v, want nil", err)
		}
	}()
	select {
	case <-heard: // listening (changed(nil))
	case <-time.After(5 * time.Second):
		t.Fatal("Listen never said it was listening")
	}

	cancelled, err := b.DeleteInstance(t.Context(), in.ID, "tok_a")
	if err != nil || len(cancelled) != len(rs) {
		t.Fatalf("DeleteInstance cancelled %d, %v; want %d", len(cancelled), err, len(rs))
	}
	missing := map[string]bool{}
	for _, r := range rs {
		missing[r.ID] = true
	}
	timeout := time.After(10 * time.Second)
	for len(missing) > 0 {
		select {
		case ids := <-heard:
			if ids == nil {
				t.Fatalf("heard re-read-everything with %d of %d IDs still unheard, want each ID", len(missing), len(rs))
			}
			for _, id := range ids {
				delete(missing, id)
			}
		case <-timeout:
			t.Fatalf("%d of %d IDs not heard within 10s", len(missing), len(rs))
		}
	}
}

// BenchmarkDeleteInstance times a store's delete of an instance holding
// n pending requests, and counts its round trips and statements.
func BenchmarkDeleteInstance(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		b.Run(itoa(n), func(b *testing.B) {
			var c trips
			var stmts atomic.Int64
			s := open(b, testkit.SchemaName(b, "t_"), postgres.WithTracerForTest(&counting{&c, &stmts}))
			var took time.Duration
			for b.Loop() {
				b.StopTimer()
				in := instance(b, s, "tok_a")
				seed(b, s, in, n)
				c.since()
				stmts.Store(0)
				start := time.Now()
				b.StartTimer()
				cancelled, err := s.DeleteInstance(b.Context(), in.ID, "tok_a")
				took += time.Since(start)
				if err != nil || len(cancelled) != n {
					b.Fatalf("DeleteInstance cancelled %d, %v; want %d", len(cancelled), err, n)
				}
			}
			q, bt := c.since()
			b.ReportMetric(float64(q+bt)/float64(b.N), "roundtrips/op")
			b.ReportMetric(float64(stmts.Load())/float64(b.N), "statements/op")
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/delete")
		})
	}
}

// BenchmarkMassCancelWaiters is the wait scenario's change in small
// (docs/performance.md, "Scale"): two replicas hold long-polls, half each,
// on n requests of one instance and on idle requests of another; one
// replica deletes the first instance. It reports how long the delete call
// took, how long until every cancelled request's waiter had its answer,
// and how many statements the other replica's store ran meanwhile (its
// waiters' reads: one per waiter woken).
func BenchmarkMassCancelWaiters(b *testing.B) {
	const n, idle = 10_000, 30_000
	schema := testkit.SchemaName(b, "t_")
	var stmtsA, stmtsB atomic.Int64
	var ta, tb trips
	sa, sb := open(b, schema, postgres.WithMaxConns(8), postgres.WithTracerForTest(&counting{&ta, &stmtsA})), open(b, schema, postgres.WithMaxConns(8), postgres.WithTracerForTest(&counting{&tb, &stmtsB}))
	pa, err := provider.New(provider.Config{Store: sa})
	if err != nil {
		b.Fatal(err)
	}
	pb, err := provider.New(provider.Config{Store: sb})
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(b.Context())
	var running sync.WaitGroup
	for _, p := range []*provider.Service{pa, pb} {
		running.Go(func() { p.Run(ctx) })
	}
	defer func() { stop(); running.Wait() }()
	admin := callers.Admin(b, pa, "admin secret for the mass cancel benchmark")
	agent, _ := callers.Mint(b, pa, admin, airlock.NewTokenInput{Name: "agent", Role: airlock.RoleAgent, Principal: "agent"})
	newInstance := func(name string) airlock.Instance {
		in, err := pa.RegisterInstance(b.Context(), agent, airlock.InstanceInput{Name: name})
		if err != nil {
			b.Fatal(err)
		}
		return in
	}
	quiet := newInstance("idle")
	idleReqs := seed(b, sa, quiet, idle)
	for b.Loop() {
		b.StopTimer()
		doomed := newInstance("doomed")
		reqs := seed(b, sa, doomed, n)
		var answered sync.WaitGroup
		waitCtx, endWait := context.WithCancel(ctx)
		wait := func(p *provider.Service, id string, done func()) {
			r, err := p.Request(waitCtx, agent, id, time.Hour)
			if done != nil {
				if err != nil || r.State != airlock.StateCancelled {
					b.Errorf("waiter of %s: %s, %v; want cancelled", id, r.State, err)
				}
				done()
			}
		}
		var idleDone sync.WaitGroup
		for i, r := range idleReqs {
			idleDone.Go(func() { wait([]*provider.Service{pa, pb}[i%2], r.ID, nil) })
		}
		for i, r := range reqs {
			answered.Add(1)
			go wait([]*provider.Service{pa, pb}[i%2], r.ID, answered.Done)
		}
		// A benchmark's setup, not a test's synchronisation: poll until
		// every waiter is parked and their first reads are over (the
		// replicas' own loops go on with a few statements).
		for pa.Waiters()+pb.Waiters() < n+idle {
			time.Sleep(10 * time.Millisecond)
		}
		for last := int64(-1000); stmtsA.Load()+stmtsB.Load()-last > 100; {
			last = stmtsA.Load() + stmtsB.Load()
			time.Sleep(500 * time.Millisecond)
		}
		// Batched, those reads are few statements but not yet over:
		// wait too until the process is idle (under a tenth of a core),
		// or the delete races them for the CPU.
		for last := processCPU(b); ; {
			time.Sleep(500 * time.Millisecond)
			now := processCPU(b)
			if now-last < 50*time.Millisecond {
				break
			}
			last = now
		}
		stmtsB.Store(0)
		tb.since()
		b.StartTimer()
		start := time.Now()
		if _, err := pa.DeleteInstance(b.Context(), agent, doomed.ID); err != nil {
			b.Fatal(err)
		}
		call := time.Since(start)
		answered.Wait()
		all := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(call.Milliseconds()), "ms/delete-call")
		b.ReportMetric(float64(all.Milliseconds()), "ms/all-answered")
		b.ReportMetric(float64((all - call).Milliseconds()), "ms/answered-after-call")
		q, bt := tb.since()
		b.ReportMetric(float64(stmtsB.Load()), "other-replica-statements")
		b.ReportMetric(float64(q+bt), "other-replica-roundtrips")
		endWait()
		idleDone.Wait()
		b.StartTimer()
	}
}

// counting counts round trips (trips) and the statements in them.
type counting struct {
	*trips
	stmts *atomic.Int64
}

func (c *counting) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.stmts.Add(1)
	return c.trips.TraceQueryStart(ctx, conn, d)
}
func (c *counting) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.stmts.Add(1)
}

func itoa(n int) string { return strconv.Itoa(n) }

// processCPU returns the CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWokenWaitersReadTogether: one change that wakes many long-polls
// costs a few round trips, not one a waiter (provider/readbatch.go): the
// woken waiters' reads are combined, one statement for each token, with
// that token's check. The waiters of a token revoked behind the
// provider's back (no wake-up of their own, its check remembered), woken
// in the same batch, answer unauthorized; the others get their requests.
func TestWokenWaitersReadTogether(t *testing.T) {
	t.Parallel()
	const n = 200
	var c trips
	var stmts atomic.Int64
	s := open(t, testkit.SchemaName(t, "t_"), postgres.WithTracerForTest(&counting{&c, &stmts}))
	p, err := provider.New(provider.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	admin := callers.Admin(t, p, "admin secret for the woken waiters test")
	agent, _ := callers.Mint(t, p, admin, airlock.NewTokenInput{Name: "agent", Role: airlock.RoleAgent, Principal: "agent"})
	rev, _ := callers.Mint(t, p, admin, airlock.NewTokenInput{Name: "reviewer", Role: airlock.RoleReviewer, Principal: "rev"})
	in, err := p.RegisterInstance(ctx, agent, airlock.InstanceInput{Name: "doomed"})
	if err != nil {
		t.Fatal(err)
	}
	reqs := seed(t, s, in, n)
	type answer struct {
		r   airlock.Request
		err error
	}
	agents, revs := make([]answer, n), make([]answer, n)
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { agents[i].r, agents[i].err = p.Request(ctx, agent, r.ID, time.Hour) })
		wg.Go(func() { revs[i].r, revs[i].err = p.Request(ctx, rev, r.ID, time.Hour) })
	}
	testkit.Eventually(t, 20*time.Second, "every waiter to subscribe", func() bool { return p.Waiters() == 2*n })
	if _, err := s.RevokeToken(ctx, rev.ID, admin.ID); err != nil {
		t.Fatal(err)
	}
	c.since()
	if _, err := p.DeleteInstance(ctx, agent, in.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	q, b := c.since()
	for i, r := range reqs {
		if a := agents[i]; a.err != nil || a.r.ID != r.ID || a.r.State != airlock.StateCancelled {
			t.Fatalf("agent's waiter on %s: %s %s, %v; want its request, cancelled", r.ID, a.r.ID, a.r.State, a.err)
		}
		if a := revs[i]; airlock.ErrorCode(a.err) != airlock.CodeUnauthorized || a.r.ID != "" {
			t.Fatalf("revoked reviewer's waiter on %s: %q %s, %v; want unauthorized, no request", r.ID, a.r.ID, a.r.State, a.err)
		}
	}
	// The delete's own round trips, and the reads of the waiters that
	// had not read since subscribing, are among them.
	t.Logf("%d waiters woken by one delete: %d round trips", 2*n, q+b)
	if q+b > n/4 {
		t.Fatalf("%d waiters woken by one delete: %d round trips; want at most %d", 2*n, q+b, n/4)
	}
}
