package provider

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
)

// readCounting counts the store's request reads: the calls, and the IDs
// they read.
type readCounting struct {
	store.Store
	calls, ids atomic.Int64
}

func (s *readCounting) GetRequest(ctx context.Context, id string) (airlock.Request, error) {
	s.calls.Add(1)
	s.ids.Add(1)
	return s.Store.GetRequest(ctx, id)
}

func (s *readCounting) GetRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	s.calls.Add(1)
	s.ids.Add(int64(len(ids)))
	return s.Store.GetRequests(ctx, ids)
}

// waitAll starts a long-poll of c on each of ids, and returns what each
// answers, once all have.
func waitAll(t *testing.T, svc *Service, c airlock.Caller, ids []string) func() ([]airlock.Request, []error) {
	t.Helper()
	rs, errs := make([]airlock.Request, len(ids)), make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { rs[i], errs[i] = svc.Request(t.Context(), c, id, time.Hour) })
	}
	return func() ([]airlock.Request, []error) { wg.Wait(); return rs, errs }
}

// pendingRequests creates n pending requests on b's instance.
func (b *bundle) pendingRequests(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		r, _, err := b.svc.CreateRequest(t.Context(), b.agent, b.inst.ID, newKey(),
			airlock.CreateRequestInput{Tool: "shell.exec", Arguments: json.RawMessage(`{"cmd":"ls"}`), Timeout: "10m"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	return ids
}

// TestWokenWaitersReadTogether: one change that wakes n long-polls (a
// delete cancelling n requests) costs a few store reads, not one a
// waiter: the woken waiters' reads are combined (readbatch.go). Each
// waiter still gets its own request.
func TestWokenWaitersReadTogether(t *testing.T) {
	t.Parallel()
	const n = 200
	var counted *readCounting
	b := setup(t, options{wrap: func(s store.Store) store.Store { counted = &readCounting{Store: s}; return counted }})
	ids := b.pendingRequests(t, n)
	answers := waitAll(t, b.svc, b.agent, ids)
	// Each waiter reads its request twice before it parks: before and
	// after it subscribes.
	testkit.Eventually(t, 10*time.Second, "every waiter to park", func() bool {
		return b.svc.Waiters() == n && counted.ids.Load() >= 2*n
	})
	counted.calls.Store(0)
	if _, err := b.svc.DeleteInstance(t.Context(), b.agent, b.inst.ID); err != nil {
		t.Fatal(err)
	}
	rs, errs := answers()
	for i, r := range rs {
		if errs[i] != nil || r.ID != ids[i] || r.State != airlock.StateCancelled {
			t.Fatalf("waiter %d on %s: %s %s, %v; want its request, cancelled", i, ids[i], r.ID, r.State, errs[i])
		}
	}
	reads := counted.calls.Load()
	t.Logf("%d waiters woken by one delete: %d store reads", n, reads)
	if reads > n/10 {
		t.Fatalf("%d waiters woken by one delete made %d store reads; want at most %d", n, reads, n/10)
	}
}

// TestWokenWaiterRevoked: waiters of a token revoked behind the
// provider's back (no wake-up of their own), woken with others by one
// change, answer unauthorized; the others, in the same wake-up, get
// their requests.
func TestWokenWaiterRevoked(t *testing.T) {
	t.Parallel()
	const n = 50
	b := setup(t, options{})
	ids := b.pendingRequests(t, n)
	agents, reviewers := waitAll(t, b.svc, b.agent, ids), waitAll(t, b.svc, b.reviewer, ids)
	testkit.Eventually(t, 10*time.Second, "every waiter to park", func() bool { return b.svc.Waiters() == 2*n })
	if _, err := b.store.RevokeToken(t.Context(), b.reviewer.ID, b.admin.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.DeleteInstance(t.Context(), b.agent, b.inst.ID); err != nil {
		t.Fatal(err)
	}
	rs, errs := agents()
	for i, r := range rs {
		if errs[i] != nil || r.ID != ids[i] || r.State != airlock.StateCancelled {
			t.Fatalf("agent's waiter on %s: %s %s, %v; want its request, cancelled", ids[i], r.ID, r.State, errs[i])
		}
	}
	rs, errs = reviewers()
	for i, r := range rs {
		if airlock.ErrorCode(errs[i]) != airlock.CodeUnauthorized || r.ID != "" {
			t.Fatalf("revoked reviewer's waiter on %s: %q %s, %v; want unauthorized, no request", ids[i], r.ID, r.State, errs[i])
		}
	}
}
