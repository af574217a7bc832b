package replicas

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/storetest"
)

// sequencesLine is what a replica logs when it takes the audit log's
// sequencer lease.
const sequencesLine = "audit log: this replica sequences"

// TestKilledSequencer is T35's crash: three `airlock serve` processes on one
// PostgreSQL schema take a load of creates and decisions while the replica
// that holds the audit log's sequencer lease is killed with SIGKILL,
// restarted, and the next holder killed, three times. Another replica takes
// the lease once it expires. At the end every committed event is in the
// tree exactly once, at gapless indexes, the tree verifies against a
// checkpoint signed after the last crash, and every checkpoint seen along
// the way is consistent with the one before it.
func TestKilledSequencer(t *testing.T) {
	t.Parallel()
	kills := 3
	if testkit.Short() {
		kills = 2
	}
	const workers, perCycle = 4, 20
	cl := startClusterWith(t, 3, []string{"--checkpoint-interval", "1s", "--log-level", "info"}, "pool_max_conns", "3")
	inst := cl.instance(t, "load")
	st := cl.store(t)

	var (
		urlMu sync.Mutex
		urls  = []string{cl.replicas[0].URL, cl.replicas[1].URL, cl.replicas[2].URL}
	)
	pick := func(rng *rand.Rand) string {
		urlMu.Lock()
		defer urlMu.Unlock()
		return urls[rng.IntN(len(urls))]
	}
	load := testkit.NewLoad(kills * perCycle * 4)
	checkpoints := &checkpointWatch{store: st}
	checkpoints.start(t)

	// taken counts each replica's "this replica sequences" lines: the
	// holder is the replica whose count grew last.
	taken := func(r *replica) int { return strings.Count(r.Out.String(), sequencesLine) }
	counts := make([]int, 3)
	holder := func(within time.Duration) int {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			for i, r := range cl.replicas {
				if n := taken(r); n > counts[i] {
					counts[i] = n
					return i
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no replica took the sequencer lease within %s:\n%s", within, cl.outputs())
		return -1
	}
	for cycle := range kills {
		burst := testkit.StartBurst(workers, perCycle, uint64(cycle), func(rng *rand.Rand, w, n int) bool {
			on := pick(rng)
			call := func(method, path, token, body string, header ...string) (testkit.Reply, error) {
				r, err := cl.c.do(context.Background(), method, on, path, token, body, header...)
				return r.Reply, err
			}
			return load.Step(t, call, rng, w%2 == 1, inst, cl.agent, cl.reviewer, fmt.Sprintf("s%d-w%d-%d", cycle, w, n), n)
		})
		// Under load, the lease's holder: the lease lasts three checkpoint
		// intervals, so after a crash another replica takes it within
		// about that.
		victim := holder(30 * time.Second)
		// It sequences, and signs a checkpoint, before it dies: the next
		// holder's checkpoints must be consistent with it.
		checkpoints.waitForNew(t, 30*time.Second, cl)
		select {
		case <-burst.Enough:
		case <-time.After(time.Minute):
			t.Fatalf("fewer than %d operations acknowledged in a minute:\n%s", perCycle, cl.outputs())
		}
		cl.replicas[victim].Kill()
		burst.Stop()
		restarted := startReplica(t, cl.db, cl.flags...)
		cl.replicas[victim], counts[victim] = restarted, 0
		urlMu.Lock()
		urls[victim] = restarted.URL
		urlMu.Unlock()
	}

	// Every committed event gets its leaf, and a checkpoint covers them
	// all, once a replica holds the lease again.
	var events []airlock.Event
	var size int64
	deadline := time.Now().Add(time.Minute)
	for {
		events = storetest.AllEvents(t, st)
		cp, err := st.LatestCheckpoint(t.Context())
		if err == nil {
			size = cp.Size
		}
		if size == int64(len(events)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the last crash the latest checkpoint covers %d of %d events:\n%s", size, len(events), cl.outputs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkpoints.stop(t)

	leaves := readLeaves(t, st)
	if len(leaves) != len(events) {
		t.Fatalf("%d leaves for %d committed events", len(leaves), len(events))
	}
	seen := map[int64]int64{}
	for i, l := range leaves {
		if l.Index != int64(i) {
			t.Fatalf("leaf %d is at index %d: a gap", i, l.Index)
		}
		if at, ok := seen[l.EventID]; ok {
			t.Fatalf("event %d is in the tree twice, at %d and %d", l.EventID, at, l.Index)
		}
		seen[l.EventID] = l.Index
	}
	for _, e := range events {
		if _, ok := seen[e.ID]; !ok {
			t.Fatalf("committed event %d (%s) is not in the tree", e.ID, e.Type)
		}
	}
	latest := openLatest(t, st)
	entries := make([]auditlog.Entry, len(leaves))
	for i, l := range leaves {
		entries[i] = auditlog.Entry{Index: l.Index, Leaf: l.Leaf}
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(entries), latest, nil); err != nil {
		t.Fatalf("the tree does not verify against the latest checkpoint: %v", err)
	}
	n := checkpoints.checkConsistent(t)
	t.Logf("T35: %d kill -9s of the sequencing replica; %d events, each in the tree once; %d checkpoints seen, each consistent with the one before; %d creates and %d decisions acknowledged",
		kills, len(events), n, load.Creates.Load(), load.Decisions.Load())
}

// checkpointWatch reads the latest checkpoint every 100 ms while the test
// runs, and keeps each new one.
type checkpointWatch struct {
	store *postgres.Store
	mu    sync.Mutex
	seen  []store.AuditCheckpoint
	done  chan struct{}
	wg    sync.WaitGroup
}

func (w *checkpointWatch) start(t *testing.T) {
	w.done = make(chan struct{})
	w.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			cp, err := w.store.LatestCheckpoint(context.Background())
			if err != nil {
				continue // none yet, or the database is busy: the next tick reads again
			}
			w.mu.Lock()
			if n := len(w.seen); n == 0 || w.seen[n-1].Size != cp.Size {
				w.seen = append(w.seen, cp)
			}
			w.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			close(w.done)
		}
		w.wg.Wait()
	})
}

// waitForNew waits until the watch sees a checkpoint it had not seen when
// called.
func (w *checkpointWatch) waitForNew(t *testing.T, within time.Duration, cl *cluster) {
	t.Helper()
	w.mu.Lock()
	had := len(w.seen)
	w.mu.Unlock()
	deadline := time.Now().Add(within)
	for {
		w.mu.Lock()
		n := len(w.seen)
		w.mu.Unlock()
		if n > had {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new checkpoint within %s under load:\n%s", within, cl.outputs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the watch, after one last read of the latest checkpoint.
func (w *checkpointWatch) stop(t *testing.T) {
	t.Helper()
	close(w.done)
	w.wg.Wait()
	cp, err := w.store.LatestCheckpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(w.seen); n == 0 || w.seen[n-1].Size != cp.Size {
		w.seen = append(w.seen, cp)
	}
}

// checkConsistent opens every checkpoint seen with the stored verifier key
// and checks each against the one before with a consistency proof from
// the stored tree, as an auditor keeping checkpoints would; it returns how
// many there were.
func (w *checkpointWatch) checkConsistent(t *testing.T) int {
	t.Helper()
	key, err := w.store.AuditKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var prev *auditlog.Checkpoint
	for _, s := range w.seen {
		cp, err := auditlog.OpenCheckpoint(s.Note, key.VKey)
		if err != nil {
			t.Fatalf("checkpoint of %d: %v", s.Size, err)
		}
		if prev != nil {
			if cp.Size < prev.Size {
				t.Fatalf("the checkpoint of %d came after the one of %d: the tree shrank", cp.Size, prev.Size)
			}
			proof, err := auditlog.ProveConsistency(prev.Size, cp.Size, store.HashReader(t.Context(), w.store))
			if err != nil {
				t.Fatal(err)
			}
			if err := auditlog.VerifyConsistency(*prev, cp, proof); err != nil {
				t.Fatalf("the checkpoint of %d is not consistent with the one of %d before it: %v", cp.Size, prev.Size, err)
			}
		}
		prev = &cp
	}
	if len(w.seen) < 2 {
		t.Fatalf("only %d checkpoints seen: the test checked no consistency", len(w.seen))
	}
	return len(w.seen)
}

// readLeaves returns every leaf of the tree, in index order.
func readLeaves(t *testing.T, st *postgres.Store) []store.AuditLeaf {
	t.Helper()
	var out []store.AuditLeaf
	for {
		page, err := st.AuditLeaves(t.Context(), int64(len(out)), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
	}
}

// openLatest opens the latest checkpoint with the stored verifier key.
func openLatest(t *testing.T, st *postgres.Store) auditlog.Checkpoint {
	t.Helper()
	stored, err := st.LatestCheckpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	key, err := st.AuditKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cp, err := auditlog.OpenCheckpoint(stored.Note, key.VKey)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}
