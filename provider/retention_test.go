package provider

import (
	"bytes"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
)

// TestPurgePayloads: with RetainPayloads, the retention job purges the
// payloads of requests decided that long ago, not sooner and never a
// pending one; the purged request reads as purged to its reviewer, and the
// audit log, sequenced before and after, still verifies against a
// checkpoint with every leaf it had unchanged.
func TestPurgePayloads(t *testing.T) {
	const retain = 24 * time.Hour
	b := setup(t, options{retain: retain})
	ctx := t.Context()
	decided := b.create(t, "10m")
	if _, err := b.svc.Decide(ctx, b.reviewer, decided.ID, airlock.DecisionInput{Status: airlock.StateDenied, Note: "no"}); err != nil {
		t.Fatal(err)
	}
	pending := b.create(t, "168h")
	if _, err := b.svc.SequenceAudit(ctx); err != nil {
		t.Fatal(err)
	}
	before := storeEntries(t, b.store)

	b.clock.Advance(retain - time.Second)
	if n, err := b.svc.PurgePayloads(ctx); err != nil || n != 0 {
		t.Fatalf("PurgePayloads a second early = %d, %v; want none", n, err)
	}
	b.clock.Advance(time.Second)
	if n, err := b.svc.PurgePayloads(ctx); err != nil || n != 1 {
		t.Fatalf("PurgePayloads at the age = %d, %v; want the decided request", n, err)
	}
	got, err := b.svc.Request(ctx, b.reviewer, decided.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.PurgedAt == nil || !got.PurgedAt.Equal(b.clock.Now()) || got.Arguments != nil || got.AgentReasoning != "" || got.State != airlock.StateDenied || got.Tool != decided.Tool {
		t.Fatalf("the purged request reads %+v; want denied, its tool kept, payloads gone, purged now", got)
	}
	if p := b.stored(t, pending.ID); p.PurgedAt != nil || len(p.Arguments) == 0 {
		t.Fatalf("the pending request was purged: %+v", p)
	}

	b.clock.Advance(DefaultCheckpointInterval)
	if _, err := b.svc.SequenceAudit(ctx); err != nil {
		t.Fatal(err)
	}
	after := storeEntries(t, b.store)
	for i, e := range before {
		if !bytes.Equal(after[i].Leaf, e.Leaf) {
			t.Fatalf("leaf %d changed with the purge", i)
		}
	}
	if len(after) != len(before)+1 {
		t.Fatalf("%d leaves after the purge, %d before; want one more (request.purged)", len(after), len(before))
	}
	purged, err := auditlog.ParseLeaf(after[len(after)-1].Leaf)
	if err != nil || purged.Type != airlock.EventRequestPurged || purged.RequestID != decided.ID || purged.Actor != airlock.ActorRetention {
		t.Fatalf("the last leaf = %+v, %v; want request.purged of %s", purged, err, decided.ID)
	}
	if want, _ := auditlog.RequestPayloads(decided); *purged.Payloads != want {
		t.Fatalf("request.purged's leaf carries %+v; want the digests of the payloads it purged %+v", *purged.Payloads, want)
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(after), latestCheckpoint(t, b), nil); err != nil {
		t.Fatalf("VerifyEntries after the purge: %v", err)
	}
}

// TestPurgePayloadsOff: without RetainPayloads nothing is purged however
// old, and a retention shorter than MinRetainPayloads is refused.
func TestPurgePayloadsOff(t *testing.T) {
	b := setup(t, options{})
	r := b.approve(t, b.create(t, "10m").ID)
	b.clock.Advance(100 * 365 * 24 * time.Hour)
	if n, err := b.svc.PurgePayloads(t.Context()); err != nil || n != 0 {
		t.Fatalf("PurgePayloads with retention off = %d, %v", n, err)
	}
	if got := b.stored(t, r.ID); got.PurgedAt != nil {
		t.Fatalf("purged with retention off: %+v", got)
	}
	for _, d := range []time.Duration{-time.Hour, MinRetainPayloads - time.Microsecond} {
		if _, err := New(Config{Store: b.store, RetainPayloads: d}); err == nil {
			t.Fatalf("New with RetainPayloads %s succeeded", d)
		}
	}
	if _, err := New(Config{Store: b.store, RetainPayloads: MinRetainPayloads}); err != nil {
		t.Fatalf("New with RetainPayloads %s: %v", MinRetainPayloads, err)
	}
}
