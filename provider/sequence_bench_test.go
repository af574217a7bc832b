package provider

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/store"
)

// auditCalls counts the audit log's store calls a sequencer round makes,
// which are its statements: the fixed cost of a round apart from its
// events (docs/performance.md, "The audit log").
type auditCalls struct {
	store.Store
	n atomic.Int64
}

func (c *auditCalls) TreeSize(ctx context.Context) (int64, error) {
	c.n.Add(1)
	return c.Store.TreeSize(ctx)
}

func (c *auditCalls) UnsequencedEvents(ctx context.Context, after int64, limit int) (store.Unsequenced, error) {
	c.n.Add(1)
	return c.Store.UnsequencedEvents(ctx, after, limit)
}

func (c *auditCalls) AppendLeaves(ctx context.Context, p store.AppendLeavesParams) error {
	c.n.Add(1)
	return c.Store.AppendLeaves(ctx, p)
}

func (c *auditCalls) ReadAuditHashes(ctx context.Context, indexes []int64) ([]auditlog.Hash, error) {
	c.n.Add(1)
	return c.Store.ReadAuditHashes(ctx, indexes)
}

func (c *auditCalls) LatestCheckpoint(ctx context.Context) (store.AuditCheckpoint, error) {
	c.n.Add(1)
	return c.Store.LatestCheckpoint(ctx)
}

func (c *auditCalls) AcquireSequencer(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	c.n.Add(1)
	return c.Store.AcquireSequencer(ctx, holder, ttl)
}

// BenchmarkSequenceRound is one round of the sequencer as the loop runs it
// under load (SequenceAudit), appending the one event of a request created
// before it: a round's fixed cost with the least per-event work beside it.
// calls/round counts its store calls (each one statement or one write
// transaction). Its sub-benchmark create makes the requests without the
// rounds, so that callgrind's count of a whole run less create's is the
// rounds' instructions (docs/performance.md, "The audit log").
func BenchmarkSequenceRound(b *testing.B) {
	b.Run("round", func(b *testing.B) { benchmarkSequenceRound(b, true) })
	b.Run("create", func(b *testing.B) { benchmarkSequenceRound(b, false) })
}

func benchmarkSequenceRound(b *testing.B, round bool) {
	var calls *auditCalls
	bd := setup(b, options{wrap: func(s store.Store) store.Store {
		calls = &auditCalls{Store: s}
		return calls
	}})
	ctx := b.Context()
	if _, err := bd.svc.SequenceAudit(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	calls.n.Store(0)
	rounds := 0
	for b.Loop() {
		b.StopTimer()
		if _, _, err := bd.svc.CreateRequest(ctx, bd.agent, bd.inst.ID, newKey(), call("10m")); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if !round {
			continue
		}
		n, err := bd.svc.SequenceAudit(ctx)
		if err != nil || n != 1 {
			b.Fatalf("a round appended %d, %v; want the created request's event", n, err)
		}
		rounds++
	}
	if round {
		b.ReportMetric(float64(calls.n.Load())/float64(rounds), "calls/round")
	}
}
