package provider

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/storetest"
)

// storeEntries reads every leaf of the store as entries.
func storeEntries(t *testing.T, s store.AuditLog) []auditlog.Entry {
	t.Helper()
	var out []auditlog.Entry
	for {
		page, err := s.AuditLeaves(t.Context(), int64(len(out)), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		for _, l := range page {
			out = append(out, auditlog.Entry{Index: l.Index, Leaf: l.Leaf})
		}
	}
}

// latestCheckpoint opens the store's latest checkpoint with the stored
// verifier key, as an auditor holding only the public key would.
func latestCheckpoint(t *testing.T, b *bundle) auditlog.Checkpoint {
	t.Helper()
	stored, err := b.store.LatestCheckpoint(t.Context())
	if err != nil {
		t.Fatalf("LatestCheckpoint: %v", err)
	}
	key, err := b.store.AuditKey(t.Context())
	if err != nil {
		t.Fatalf("AuditKey: %v", err)
	}
	cp, err := auditlog.OpenCheckpoint(stored.Note, key.VKey)
	if err != nil {
		t.Fatalf("OpenCheckpoint: %v", err)
	}
	return cp
}

// TestAuditSequencer: a round of the sequencer puts every committed event
// in the tree and signs a checkpoint that opens with the stored verifier
// key and verifies the stored leaves; later growth is checkpointed once a
// checkpoint interval has passed, consistently with the one before, and no
// growth makes no checkpoint.
func TestAuditSequencer(t *testing.T) {
	b := setup(t, options{})
	ctx := t.Context()
	b.svc.SetIssuer("https://airlock.example.com/")
	r := b.create(t, "10m")
	b.approve(t, r.ID)

	n, err := b.svc.SequenceAudit(ctx)
	if err != nil {
		t.Fatalf("SequenceAudit: %v", err)
	}
	events := len(allEvents(t, b))
	if n != events {
		t.Fatalf("the first round appended %d events; the log has %d", n, events)
	}
	first := latestCheckpoint(t, b)
	if first.Size != int64(events) || first.Origin != "airlock.example.com/audit" {
		t.Fatalf("the first checkpoint = %+v; want size %d, origin airlock.example.com/audit", first, events)
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(storeEntries(t, b.store)), first, nil); err != nil {
		t.Fatalf("VerifyEntries over the stored leaves: %v", err)
	}

	// Growth within the interval: sequenced at once, checkpointed later.
	b.create(t, "10m")
	if n, err := b.svc.SequenceAudit(ctx); err != nil || n != 1 {
		t.Fatalf("SequenceAudit after a create = %d, %v; want its one event", n, err)
	}
	if got := latestCheckpoint(t, b); got.Size != first.Size {
		t.Fatalf("a checkpoint of size %d within the interval of the last", got.Size)
	}
	b.clock.Advance(DefaultCheckpointInterval)
	if n, err := b.svc.SequenceAudit(ctx); err != nil || n != 0 {
		t.Fatalf("SequenceAudit = %d, %v", n, err)
	}
	second := latestCheckpoint(t, b)
	if second.Size != first.Size+1 {
		t.Fatalf("the checkpoint an interval later has size %d; want %d", second.Size, first.Size+1)
	}
	proof, err := auditlog.ProveConsistency(first.Size, second.Size, store.HashReader(ctx, b.store))
	if err != nil {
		t.Fatal(err)
	}
	if err := auditlog.VerifyConsistency(first, second, proof); err != nil {
		t.Fatalf("the second checkpoint does not extend the first: %v", err)
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(storeEntries(t, b.store)), second, nil); err != nil {
		t.Fatalf("VerifyEntries: %v", err)
	}

	// No growth, no checkpoint; and the checkpoints made no events.
	b.clock.Advance(DefaultCheckpointInterval)
	if _, err := b.svc.SequenceAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := latestCheckpoint(t, b); got.Size != second.Size {
		t.Fatalf("a checkpoint of size %d without growth", got.Size)
	}
	if got := len(allEvents(t, b)); got != int(second.Size) {
		t.Fatalf("the log has %d events, the tree %d: checkpoints appended events", got, second.Size)
	}
}

// TestAuditSequencerLease: a second replica on the same database appends
// nothing while the first holds the lease, and takes over once the first
// has not renewed it for three checkpoint intervals.
func TestAuditSequencerLease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	a := setup(t, options{path: path})
	ctx := t.Context()
	if _, err := a.svc.SequenceAudit(ctx); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock(a.clock.Now())
	bsvc := setup(t, options{path: path, clock: clock}).svc
	a.create(t, "10m")
	if n, err := bsvc.SequenceAudit(ctx); err != nil || n != 0 {
		t.Fatalf("the second replica's round = %d, %v; want nothing while the first holds the lease", n, err)
	}
	clock.Advance(3 * DefaultCheckpointInterval)
	// The new request's event, and those of the second's setup (its tokens, its instance).
	unsequenced := len(allEvents(t, a)) - len(storeEntries(t, a.store))
	if n, err := bsvc.SequenceAudit(ctx); err != nil || n != unsequenced {
		t.Fatalf("the second replica's round after the lease expired = %d, %v; want the %d new events", n, err, unsequenced)
	}
	// The first, back, is refused once and then defers to the second.
	a.create(t, "10m")
	a.clock.Advance(DefaultCheckpointInterval / 4)
	if n, err := a.svc.SequenceAudit(ctx); err != nil || n != 0 {
		t.Fatalf("the first replica's round after losing the lease = %d, %v; want nothing", n, err)
	}
	if n, err := bsvc.SequenceAudit(ctx); err != nil || n != 1 {
		t.Fatalf("the second replica's next round = %d, %v; want the new event", n, err)
	}
	if got, events := len(storeEntries(t, a.store)), len(allEvents(t, a)); got != events {
		t.Fatalf("%d leaves for %d events", got, events)
	}
}

// allEvents reads the whole audit log of b's store.
func allEvents(t *testing.T, b *bundle) []airlock.Event {
	t.Helper()
	return storetest.AllEvents(t, b.store)
}

// TestAuditSequencerLoop: with Run, events get their leaves without
// anyone stepping the sequencer, woken by the changes rather than by its
// timer; it logs the lag from a create's answer to its leaf.
func TestAuditSequencerLoop(t *testing.T) {
	b := setup(t, options{realClock: true})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := b.svc.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	defer wg.Wait()
	defer cancel()
	var lags []time.Duration
	for range 20 {
		start := time.Now()
		b.create(t, "10m")
		events := int64(len(allEvents(t, b)))
		testkit.Eventually(t, 5*time.Second, "the new request's event in the tree", func() bool {
			n, err := b.store.TreeSize(ctx)
			return err == nil && n == events
		})
		lags = append(lags, time.Since(start))
	}
	slices.Sort(lags)
	// The timer ticks every 5 s: a lag of seconds would mean the changes
	// did not wake the sequencer.
	if worst := lags[len(lags)-1]; worst > 2*time.Second {
		t.Fatalf("lags %v; the worst is longer than the changes' wake-up allows", lags)
	}
	t.Logf("lag from a create's answer to its leaf: median %v, worst %v", lags[len(lags)/2], lags[len(lags)-1])
}
