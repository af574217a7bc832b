package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/storetest"
)

// benchStore opens a store with one instance, ins_1 of tok_a.
func benchStore(b *testing.B, opts ...Option) *Store {
	b.Helper()
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if _, err := s.CreateInstance(context.Background(), airlock.Instance{ID: "ins_1", OwnerID: "tok_a", Name: "bench"}, "tok_a"); err != nil {
		b.Fatal(err)
	}
	return s
}

func benchCreate(ctx context.Context, s *Store) (airlock.Request, error) {
	key := airlock.NewID("key_")
	r, _, err := s.CreateRequest(ctx, store.NewRequestParams{
		Request: airlock.Request{InstanceID: "ins_1", OwnerID: "tok_a", Tool: "payments.refund",
			Arguments:      json.RawMessage(`{"payment_id":"pay_1","amount":4900,"currency":"GBP"}`),
			IdempotencyKey: key, Fingerprint: key},
		Window: time.Hour, Actor: "tok_a",
	})
	return r, err
}

// reportCommits reports how many operations shared a commit.
func reportCommits(b *testing.B, s *Store, before WriteStats) {
	st := s.WriteStats()
	if c := st.Commits - before.Commits; c > 0 {
		b.ReportMetric(float64(st.Ops-before.Ops)/float64(c), "ops/commit")
	}
}

// BenchmarkCreate measures CreateRequest: one durable commit each when
// serial; shared commits (group commit) when 8 callers run at once.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		s := benchStore(b)
		before := s.WriteStats()
		for b.Loop() {
			if _, err := benchCreate(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
		reportCommits(b, s, before)
	})
	b.Run("8 callers", func(b *testing.B) {
		s := benchStore(b)
		before := s.WriteStats()
		b.SetParallelism(4) // × GOMAXPROCS 2 = 8 callers
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := benchCreate(ctx, s); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportCommits(b, s, before)
	})
}

// BenchmarkDecide measures Decide (approve) on pending requests made
// before the clock starts, serial and with 8 callers.
func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	for _, callers := range []int{1, 8} {
		name := "serial"
		if callers > 1 {
			name = "8 callers"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStore(b)
			ids := make([]string, b.N)
			for i := range ids {
				r, err := benchCreate(ctx, s)
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = r.ID
			}
			var next atomic.Int64
			decide := func() error {
				_, err := s.Decide(ctx, store.DecideParams{ID: ids[next.Add(1)-1], Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"})
				return err
			}
			before := s.WriteStats()
			b.ResetTimer()
			if callers == 1 {
				for range b.N {
					if err := decide(); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := decide(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.StopTimer()
			reportCommits(b, s, before)
		})
	}
}

// BenchmarkExpireDue measures one expiry sweep of 500 due requests (the
// provider's first sweep; later ones are sized by time): one transaction,
// which holds the writer for its whole length.
func BenchmarkExpireDue(b *testing.B) {
	const batch = 500
	ctx := context.Background()
	clock := storetest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := benchStore(b, WithClock(clock))
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		// 500 pending requests due one second from now, in one write.
		err := s.inTx(ctx, func(tx *txn, now time.Time) error {
			_, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < @batch)
INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, arguments, timeout, agent_reasoning, created_at, deadline_at, fingerprint)
SELECT 'apr_' || lower(hex(randomblob(12))), 'ins_1', 'tok_a', 'pending', 'tool_call', 'payments.refund',
	'{"payment_id":"pay_1","amount":4900}', '1s', '', @now, @deadline, 'f'
FROM n`, sql.Named("batch", batch), sql.Named("now", micros(now)), sql.Named("deadline", micros(now.Add(time.Second))))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		clock.Advance(2 * time.Second)
		b.StartTimer()
		rs, err := s.ExpireDue(ctx, batch)
		if err != nil || len(rs) != batch {
			b.Fatalf("ExpireDue expired %d (%v), want %d", len(rs), err, batch)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sweep")
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "expired/s")
}

// fillDue stores n pending requests due one second from now and up to
// 30 ms later, at random, spread over instances of at most perInstance requests
// (created as needed, ins_0, …), in writes of at most 10,000 rows. The
// jitter is what requests created one by one to fall due together get
// (airlock bench --scenario expiry): their deadlines do not follow their
// creation order.
func fillDue(b *testing.B, s *Store, n, perInstance int) {
	b.Helper()
	ctx := context.Background()
	for i := range (n + perInstance - 1) / perInstance {
		id := fmt.Sprintf("ins_%d", i)
		if _, err := s.GetInstance(ctx, id); err == nil {
			continue
		}
		if _, err := s.CreateInstance(ctx, airlock.Instance{ID: id, OwnerID: "tok_a", Name: id}, "tok_a"); err != nil {
			b.Fatal(err)
		}
	}
	for lo := 0; lo < n; lo += 10_000 {
		err := s.inTx(ctx, func(tx *txn, now time.Time) error {
			_, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT @lo UNION ALL SELECT i + 1 FROM n WHERE i < @hi - 1)
INSERT INTO requests (id, instance_id, owner_id, state, kind, tool, arguments, timeout, agent_reasoning, created_at, deadline_at, fingerprint)
SELECT 'apr_' || lower(hex(randomblob(12))), 'ins_' || (i / @per), 'tok_a', 'pending', 'tool_call', 'payments.refund',
	'{"payment_id":"pay_1","amount":4900}', '1s', '', @now, @deadline + abs(random()) % 30000, 'f'
FROM n`, sql.Named("lo", lo), sql.Named("hi", min(lo+10_000, n)), sql.Named("per", perInstance),
				sql.Named("now", micros(now)), sql.Named("deadline", micros(now.Add(time.Second))))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExpireBacklog measures sweeping a backlog of 20,000 requests
// due together, spread over instances of 1,000, in sweeps of a fixed size
// until none is left: how long one sweep holds the writer and how many
// requests expire per second.
func BenchmarkExpireBacklog(b *testing.B) {
	const backlog = 20_000
	for _, batch := range []int{500, 1000, 2000} {
		b.Run(fmt.Sprintf("batch %d", batch), func(b *testing.B) {
			clock := storetest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			var (
				held    []time.Duration
				holding atomic.Bool
			)
			s := benchStore(b, WithClock(clock), WithBatchObserver(func(t Batch) {
				if holding.Load() {
					held = append(held, t.Held)
				}
			}))
			var swept time.Duration
			for range b.N {
				fillDue(b, s, backlog, 1000)
				clock.Advance(2 * time.Second)
				holding.Store(true)
				swept += sweepBacklog(b, s, backlog, batch)
				holding.Store(false)
			}
			slices.Sort(held)
			b.ReportMetric(float64(backlog*b.N)/swept.Seconds(), "expired/s")
			b.ReportMetric(float64(held[len(held)/2].Microseconds())/1000, "p50-ms/sweep")
			b.ReportMetric(float64(held[len(held)-1].Microseconds())/1000, "max-ms/sweep")
			over := 0
			for _, h := range held {
				if h > 25*time.Millisecond {
					over++
				}
			}
			b.ReportMetric(float64(over)/float64(b.N), "sweeps>25ms")
		})
	}
}

// sweepBacklog expires backlog due requests in sweeps of batch rows and
// returns how long that took.
func sweepBacklog(b *testing.B, s *Store, backlog, batch int) time.Duration {
	b.Helper()
	start := time.Now()
	for n := 0; n < backlog; {
		rs, err := s.ExpireDue(context.Background(), batch)
		if err != nil || len(rs) == 0 {
			b.Fatalf("ExpireDue expired %d (%v) after %d of %d", len(rs), err, n, backlog)
		}
		n += len(rs)
	}
	return time.Since(start)
}

// BenchmarkNextDeadline measures NextDeadline when the earliest second of
// deadlines holds backlog pending requests: it reads that second's entries
// of the index (nextDeadlineSQL). The scheduler asks once per pass, and
// when a create brings the next deadline forward.
func BenchmarkNextDeadline(b *testing.B) {
	ctx := context.Background()
	for _, backlog := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("backlog %d", backlog), func(b *testing.B) {
			s := benchStore(b)
			fillDue(b, s, backlog, 1000)
			for b.Loop() {
				if _, ok, err := s.NextDeadline(ctx); err != nil || !ok {
					b.Fatalf("NextDeadline: ok %v, %v", ok, err)
				}
			}
		})
	}
}

// BenchmarkListFirstPage measures the reviewer's first page: 200 pending
// requests, newest first, every column of each (ListRequests).
func BenchmarkListFirstPage(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	for range 300 {
		if _, err := benchCreate(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		rs, more, err := s.ListRequests(ctx, store.RequestFilter{State: airlock.StatePending, Limit: 200})
		if err != nil || len(rs) != 200 || !more {
			b.Fatalf("ListRequests = %d requests (more %v), %v; want 200 and more", len(rs), more, err)
		}
	}
}

// BenchmarkPendingCounts measures the reads that count pending requests
// (migration 0034) over a backlog of 100,000 in instances of 1,000: an
// instance's count (GetInstance), which reads its 1,000 entries of
// requests_instance_pending, and the pending gauge's (CountPending),
// which reads every pending request's entry of an index of pending
// requests.
func BenchmarkPendingCounts(b *testing.B) {
	const backlog, perInstance = 100_000, 1_000
	ctx := context.Background()
	s := benchStore(b)
	fillDue(b, s, backlog, perInstance)
	b.Run("instance", func(b *testing.B) {
		for b.Loop() {
			in, err := s.GetInstance(ctx, "ins_7")
			if err != nil || in.PendingCount != perInstance {
				b.Fatalf("GetInstance: pending %d (%v), want %d", in.PendingCount, err, perInstance)
			}
		}
	})
	b.Run("gauge", func(b *testing.B) {
		for b.Loop() {
			n, err := s.CountPending(ctx)
			if err != nil || n != backlog {
				b.Fatalf("CountPending = %d (%v), want %d", n, err, backlog)
			}
		}
	})
}
