package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestExpireDueShared runs many ExpireDue calls at once, as long-polls
// reaching one deadline together do: they share passes, none fails, every
// due request expires exactly once, and each call returns only once
// nothing is left due.
func TestExpireDueShared(t *testing.T) {
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
			left, err := b.store.ListRequests(context.WithoutCancel(t.Context()), airlock.RequestFilter{State: airlock.StatePending})
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
