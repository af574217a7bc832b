package provider

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// TestExpireDueConcurrent runs many ExpireDue calls at once: they take
// turns, none fails, every due request expires exactly once, and each call
// returns only once nothing is left due.
func TestExpireDueConcurrent(t *testing.T) {
	t.Parallel()
	const due, callers = 60, 16
	b := setup(t, options{batch: 3})
	for range due {
		b.create(t, "1m")
	}
	b.clock.Advance(time.Hour)
	var wg sync.WaitGroup
	counts := make([]int, callers)
	for i := range callers {
		wg.Go(func() {
			n, err := b.svc.ExpireDue(t.Context())
			if err != nil {
				t.Errorf("ExpireDue: %v", err)
				return
			}
			counts[i] = n
			left, _, err := b.store.ListRequests(context.WithoutCancel(t.Context()), store.RequestFilter{State: airlock.StatePending})
			if err != nil || len(left) != 0 {
				t.Errorf("ExpireDue returned %d with %d still pending (%v)", n, len(left), err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if got, err := b.svc.ExpireDue(t.Context()); err != nil || got != 0 {
		t.Fatalf("ExpireDue after all = %d, %v; want 0", got, err)
	}
	for _, n := range counts {
		if n > due {
			t.Fatalf("a call reports %d expired, more than the %d due", n, due)
		}
	}
}

// gatedExpiries is a store whose ExpireRequests calls are counted and whose
// first one waits for release, so that a test can queue readers behind it.
type gatedExpiries struct {
	store.Store
	release chan struct{}
	entered chan struct{} // receives once, when the first call starts
	calls   atomic.Int64
	ids     atomic.Int64
}

func (g *gatedExpiries) ExpireRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	if g.calls.Add(1) == 1 {
		g.entered <- struct{}{}
		<-g.release
	}
	g.ids.Add(int64(len(ids)))
	return g.Store.ExpireRequests(ctx, ids)
}

// TestOverdueReadersShareRounds has many readers find their requests
// overdue at once, as long-polls on every request of a mass deadline do:
// each expires its own request, and those that queue while a round is
// being written share the next one, one store write for all of them.
func TestOverdueReadersShareRounds(t *testing.T) {
	t.Parallel()
	const n = 40
	b := setup(t, options{})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.create(t, "1m").ID
	}
	other := b.create(t, "1m") // due too, but nobody reads it
	b.clock.Advance(time.Hour)
	gate := &gatedExpiries{Store: b.store, release: make(chan struct{}), entered: make(chan struct{}, 1)}
	svc, err := New(Config{Store: gate, Clock: b.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	read := func(id string) {
		r, err := svc.Request(t.Context(), b.agent, id, 0)
		if err != nil || r.State != airlock.StateExpired {
			t.Errorf("read of overdue %s: %s, %v; want expired", id, r.State, err)
		}
	}
	wg.Go(func() { read(ids[0]) })
	<-gate.entered // the first round is being written
	for _, id := range ids[1:] {
		wg.Go(func() { read(id) })
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		svc.overdue.mu.Lock()
		queued := 0
		for _, r := range svc.overdue.queue {
			queued += len(r.ids)
		}
		svc.overdue.mu.Unlock()
		if queued == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d readers queued", queued, n-1)
		}
		time.Sleep(100 * time.Microsecond) // nothing to inject: poll the queue
	}
	close(gate.release)
	wg.Wait()
	if calls, got := gate.calls.Load(), gate.ids.Load(); calls != 2 || got != n {
		t.Fatalf("%d store writes for %d IDs, want 2 for %d: the first reader's, then one for the rest", calls, got, n)
	}
	if st := b.stored(t, other.ID).State; st != airlock.StatePending {
		t.Fatalf("the request nobody read is %s, want pending until a sweep", st)
	}
}
