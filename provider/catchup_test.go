package provider

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/store"
)

// syncBuffer is a bytes.Buffer the service's log and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuditCatchUp: a database from before the audit log — 10,000 events
// and no leaf — gets its whole
// history sequenced by the sequencer's first rounds: every event in the
// tree exactly once, at gapless indexes in event order, the tree verified
// against its checkpoint, and the "catching up" progress line in the log.
func TestAuditCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 events")
	}
	const requests = 5_000 // each a request.created and a request.expired
	path := filepath.Join(t.TempDir(), "airlock.db")
	var log syncBuffer
	b := setup(t, options{path: path, log: &log})
	ctx := t.Context()

	// The history: requests created through the store, as the server
	// would have (a create is one event), then expired by the sweep
	// (one write, many events).
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < requests; i += 16 {
				key := newKey()
				_, _, err := b.store.CreateRequest(ctx, store.NewRequestParams{
					Request: airlock.Request{ID: airlock.NewID(airlock.PrefixRequest), InstanceID: b.inst.ID, OwnerID: b.agent.ID,
						Kind: airlock.KindToolCall, Tool: "issue_refund", Arguments: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
						Timeout: "10m", AgentReasoning: "catching up", IdempotencyKey: key, Fingerprint: "fp_" + key},
					Window: 10 * time.Minute, Actor: b.agent.ID,
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b.clock.Advance(10 * time.Minute)
	if n, err := b.svc.ExpireDue(ctx); err != nil || n != requests {
		t.Fatalf("ExpireDue = %d, %v; want %d", n, err, requests)
	}
	events := b.events(t)
	if len(events) < 2*requests {
		t.Fatalf("%d events; want at least %d", len(events), 2*requests)
	}
	if n, err := b.store.TreeSize(ctx); err != nil || n != 0 {
		t.Fatalf("TreeSize of the old database = %d, %v; want no leaf", n, err)
	}
	t.Logf("%d events written in %v", len(events), time.Since(start))

	start = time.Now()
	n, err := b.svc.SequenceAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if n != len(events) {
		t.Fatalf("the first round sequenced %d of %d events", n, len(events))
	}
	t.Logf("caught up on %d events in %v (%.0f events/s)", n, took, float64(n)/took.Seconds())
	if !strings.Contains(log.String(), `msg="audit log: catching up" sequenced=1000`) {
		t.Fatalf("no catching-up line in the log:\n%s", log.String())
	}

	entries := storeEntries(t, b.store)
	if len(entries) != len(events) {
		t.Fatalf("%d leaves for %d events", len(entries), len(events))
	}
	leaves, err := b.store.AuditLeaves(ctx, 0, len(events))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]bool, len(events))
	for i, l := range leaves {
		if l.Index != int64(i) || l.EventID != events[i].ID || seen[l.EventID] {
			t.Fatalf("leaf %d is index %d of event %d; want index %d of event %d, once", i, l.Index, l.EventID, i, events[i].ID)
		}
		seen[l.EventID] = true
		leaf, err := auditlog.ParseLeaf(l.Leaf)
		if err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
		if e := events[i]; leaf.UID != e.UID || (e.UID == "" && leaf.EventID != e.ID) || leaf.Type != e.Type {
			t.Fatalf("leaf %d = %+v; want event %d (%s, uid %q)", i, leaf, e.ID, e.Type, e.UID)
		}
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(entries), latestCheckpoint(t, b), nil); err != nil {
		t.Fatalf("VerifyEntries after catching up: %v", err)
	}
	// A second round finds nothing left.
	if n, err := b.svc.SequenceAudit(ctx); err != nil || n != 0 {
		t.Fatalf("a round after catching up = %d, %v; want nothing", n, err)
	}
}
