package provider

import (
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/store"
)

// storedHashesMatch checks that every hash stored for the tree of s's
// leaves is the one a tree built afresh from the leaves has: the tree is
// byte for byte what sequencing without memory would have made.
func storedHashesMatch(t *testing.T, s store.AuditLog) {
	t.Helper()
	tree := &auditlog.MemoryTree{}
	for _, e := range storeEntries(t, s) {
		if err := tree.Append(e.Leaf); err != nil {
			t.Fatal(err)
		}
	}
	n := auditlog.StoredHashIndex(tree.Size())
	indexes := make([]int64, n)
	for i := range indexes {
		indexes[i] = int64(i)
	}
	want, err := tree.ReadHashes(indexes)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadAuditHashes(t.Context(), indexes)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stored hash %d of a tree of %d leaves is %x; built afresh it is %x", i, tree.Size(), got[i], want[i])
		}
	}
}

// TestAuditSequencerKeepsEdge: while a replica holds the lease, its rounds
// read neither the tree's size nor its hashes nor, within a checkpoint
// interval, the latest checkpoint, whatever the batches' sizes; and the
// tree they make is the one a tree built afresh from the leaves has.
func TestAuditSequencerKeepsEdge(t *testing.T) {
	var calls *auditCalls
	b := setup(t, options{wrap: func(s store.Store) store.Store {
		calls = &auditCalls{Store: s}
		return calls
	}})
	ctx := t.Context()
	if _, err := b.svc.SequenceAudit(ctx); err != nil {
		t.Fatal(err)
	}
	before := calls.n.Load()
	rounds := 0
	for batch := 1; batch <= 9; batch++ {
		for range batch {
			b.create(t, "10m")
		}
		if n, err := b.svc.SequenceAudit(ctx); err != nil || n != batch {
			t.Fatalf("a round after %d creates = %d, %v", batch, n, err)
		}
		rounds++
	}
	// Each round: the new events' read and the append, nothing else.
	if got := calls.n.Load() - before; got != int64(2*rounds) {
		t.Fatalf("%d rounds made %d audit store calls; want %d (the events' read and the append of each)", rounds, got, 2*rounds)
	}
	storedHashesMatch(t, b.store)
	b.clock.Advance(DefaultCheckpointInterval)
	if _, err := b.svc.SequenceAudit(ctx); err != nil {
		t.Fatal(err)
	}
	size, err := b.store.TreeSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp := latestCheckpoint(t, b); cp.Size != size {
		t.Fatalf("the checkpoint an interval later has size %d; the tree %d", cp.Size, size)
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(storeEntries(t, b.store)), latestCheckpoint(t, b), nil); err != nil {
		t.Fatalf("VerifyEntries: %v", err)
	}
}

// TestAuditSequencerEdgeAfterTakeover: a replica whose lease lapsed while
// another took it and appended re-reads the tree when it retakes the
// lease, rather than appending from the size it remembers: its first
// round back appends every new event, and the tree is the one built afresh
// from its leaves.
func TestAuditSequencerEdgeAfterTakeover(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	a := setup(t, options{path: path})
	ctx := t.Context()
	a.create(t, "10m")
	if _, err := a.svc.SequenceAudit(ctx); err != nil {
		t.Fatal(err)
	}
	// The second replica takes the lapsed lease and appends.
	clock := newFakeClock(a.clock.Now())
	bsvc := setup(t, options{path: path, clock: clock}).svc
	clock.Advance(3 * DefaultCheckpointInterval)
	a.create(t, "10m")
	if n, err := bsvc.SequenceAudit(ctx); err != nil || n == 0 {
		t.Fatalf("the second replica's round after the lease lapsed = %d, %v; want the new events", n, err)
	}
	// The first comes back once the second's lease lapsed in turn,
	// never having been refused: its memory of the tree is stale.
	a.clock.Advance(6 * DefaultCheckpointInterval)
	a.create(t, "10m")
	a.create(t, "10m")
	unsequenced := len(allEvents(t, a)) - len(storeEntries(t, a.store))
	if n, err := a.svc.SequenceAudit(ctx); err != nil || n != unsequenced {
		t.Fatalf("the first replica's round after retaking the lease = %d, %v; want the %d new events", n, err, unsequenced)
	}
	storedHashesMatch(t, a.store)
}
