package storetest

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testCountPending checks the pending gauge's count: every request that
// is pending, whatever its instance, and none that left pending by any
// route (a decision, a cancellation, expiry, a deleted instance, a
// decision at creation).
func (s *suite) testCountPending(t *testing.T) {
	b := s.setup(t)
	count := func(want int, after string) {
		t.Helper()
		n, err := b.store.CountPending(b.ctx)
		wantOK(t, err)
		if n != want {
			t.Fatalf("CountPending after %s = %d, want %d", after, n, want)
		}
	}
	count(0, "nothing")
	other := b.instance(t, ownerB)
	onOther := func(p *store.NewRequestParams) {
		p.Request.InstanceID, p.Request.OwnerID, p.Actor = other.ID, ownerB, ownerB
	}
	approved, denied, cancelled := b.create(t), b.create(t), b.create(t)
	b.create(t, func(p *store.NewRequestParams) { p.Window = time.Second })
	b.create(t, onOther)
	b.create(t, onOther)
	count(6, "six creations on two instances")
	b.create(t, func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateDenied, Note: "policy"}
	})
	count(6, "a request denied at creation")
	_, err := b.approve(approved.ID)
	wantOK(t, err)
	_, err = b.deny(denied.ID)
	wantOK(t, err)
	_, err = b.cancel(cancelled.ID)
	wantOK(t, err)
	count(3, "a decision each way and a cancellation")
	b.clock.Advance(2 * time.Second)
	rs, err := b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	if len(rs) != 1 {
		t.Fatalf("ExpireDue = %v, want the one request due", ids(rs))
	}
	count(2, "an expiry")
	_, err = b.store.DeleteInstance(b.ctx, other.ID, ownerB)
	wantOK(t, err)
	count(0, "deleting the instance that held the rest")
}
