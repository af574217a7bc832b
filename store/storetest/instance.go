package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testInstances checks instances, and that deleting one cancels exactly its
// pending requests (docs/protocol.md L5).
func (s *suite) testInstances(t *testing.T) {
	runAll(t, []test{
		{"create, get and list", s.instancesRoundTrip},
		{"defaults and an unknown kind", s.instanceDefaults},
		{"pending count", s.pendingCount},
		{"delete cancels pending requests only", s.deleteCancelsPending},
		{"delete expires overdue requests rather than cancel them", s.deleteExpiresOverdue},
		{"delete with nothing pending", s.deleteNothingPending},
	})
}

func (s *suite) instancesRoundTrip(t *testing.T) {
	b := s.setup(t)
	meta := json.RawMessage(`{"host":"büro-1",  "pid": 42}`)
	b.clock.Advance(time.Second)
	in, err := b.store.CreateInstance(b.ctx, airlock.Instance{ID: "ins_meta", OwnerID: ownerA, Name: "worker ⚙", Metadata: meta, TokenAudience: "https://tools.example"}, ownerA)
	wantOK(t, err)
	if !in.CreatedAt.Equal(epoch.Add(time.Second).Truncate(time.Microsecond)) || string(in.Metadata) != string(meta) {
		t.Fatalf("instance = %s", show(in))
	}
	got, err := b.store.GetInstance(b.ctx, in.ID)
	wantOK(t, err)
	if got.ID != in.ID || got.OwnerID != ownerA || got.Name != "worker ⚙" || string(got.Metadata) != string(meta) ||
		!got.CreatedAt.Equal(in.CreatedAt) || got.PendingCount != 0 || got.TokenAudience != "https://tools.example" {
		t.Fatalf("GetInstance = %s, want %s", show(got), show(in))
	}
	// The audience outlives the instance: an approved request of a
	// deleted instance is still claimed, and its token names it.
	_, err = b.store.DeleteInstance(b.ctx, in.ID, ownerA)
	wantOK(t, err)
	aud, err := b.store.TokenAudience(b.ctx, in.ID)
	if err != nil || aud != "https://tools.example" {
		t.Fatalf("TokenAudience of the deleted instance = %q, %v", aud, err)
	}
	if aud, err := b.store.TokenAudience(b.ctx, b.inst.ID); err != nil || aud != "" {
		t.Fatalf("TokenAudience of an instance without one = %q, %v", aud, err)
	}
	_, err = b.store.TokenAudience(b.ctx, "ins_missing")
	wantErr(t, err, airlock.CodeNotFound, "")
	in, err = b.store.CreateInstance(b.ctx, airlock.Instance{ID: "ins_meta2", OwnerID: ownerA, Name: "worker ⚙", Metadata: meta}, ownerA)
	wantOK(t, err)
	other := b.instance(t, ownerB)

	mine, err := b.store.ListInstances(b.ctx, ownerA)
	wantOK(t, err)
	all, err := b.store.ListInstances(b.ctx, "")
	wantOK(t, err)
	if got, want := instanceIDs(mine), []string{in.ID, b.inst.ID}; !slices.Equal(got, want) {
		t.Fatalf("ListInstances(A) = %v, want %v (newest first)", got, want)
	}
	if got, want := instanceIDs(all), []string{other.ID, in.ID, b.inst.ID}; !slices.Equal(got, want) {
		t.Fatalf("ListInstances() = %v, want %v", got, want)
	}
	_, err = b.store.GetInstance(b.ctx, "ins_missing")
	wantErr(t, err, airlock.CodeNotFound, "")
}

// The store fills in an empty ID and kind, and refuses an unknown
// kind, as the domain says (Instance.WithDefaults, Validate).
func (s *suite) instanceDefaults(t *testing.T) {
	b := s.setup(t)
	adapter, err := b.store.CreateInstance(b.ctx, airlock.Instance{OwnerID: ownerA, Name: "no ID"}, ownerA)
	wantOK(t, err)
	session, err := b.store.CreateInstance(b.ctx, airlock.Instance{OwnerID: ownerA, Name: "no ID", Kind: airlock.InstanceSession}, ownerA)
	wantOK(t, err)
	if adapter.Kind != airlock.InstanceAdapter || !strings.HasPrefix(adapter.ID, airlock.PrefixInstance) ||
		session.Kind != airlock.InstanceSession || !strings.HasPrefix(session.ID, airlock.PrefixSession) {
		t.Fatalf("instances created without an ID = %s and %s, want an adapter %s… and a session %s…",
			show(adapter), show(session), airlock.PrefixInstance, airlock.PrefixSession)
	}
	_, err = b.store.CreateInstance(b.ctx, airlock.Instance{OwnerID: ownerA, Name: "robot", Kind: "robot"}, ownerA)
	wantInvalid(t, err, "kind", `instance kind must be adapter or session, not "robot"`)
	if all, err := b.store.ListInstances(b.ctx, ""); err != nil || len(all) != 3 {
		t.Fatalf("ListInstances = %d instances, %v; want 3, the refused one not stored", len(all), err)
	}
}

// pendingCount follows an instance's pending count, as read and as
// listed, through every way a request enters or leaves pending: created
// pending or decided at creation, approved, denied, cancelled, a decision
// refused, one refused for its deadline (which expires its request), and a
// sweep.
func (s *suite) pendingCount(t *testing.T) {
	b := s.setup(t)
	want := func(n int, after string) {
		t.Helper()
		in, err := b.store.GetInstance(b.ctx, b.inst.ID)
		wantOK(t, err)
		list, err := b.store.ListInstances(b.ctx, ownerA)
		wantOK(t, err)
		if in.PendingCount != n || list[0].PendingCount != n {
			t.Fatalf("after %s: PendingCount %d, listed %d; want %d", after, in.PendingCount, list[0].PendingCount, n)
		}
	}
	rs := make([]airlock.Request, 6)
	for i := range rs {
		rs[i] = b.create(t)
	}
	b.create(t, func(p *store.NewRequestParams) { p.Initial = &airlock.InitialDecision{Status: airlock.StateDenied} })
	want(6, "6 pending creates and one denied at creation")
	_, err := b.approve(rs[0].ID)
	wantOK(t, err)
	_, err = b.deny(rs[1].ID)
	wantOK(t, err)
	_, err = b.cancel(rs[2].ID)
	wantOK(t, err)
	_, err = b.deny(rs[2].ID)
	wantErr(t, err, airlock.CodeNotPending, airlock.StateCancelled)
	want(3, "an approval, a denial, a cancellation and a refused decision")

	short := func(p *store.NewRequestParams) { p.Window = time.Second }
	due, late := b.create(t, short), b.create(t, short)
	b.clock.Advance(2 * time.Second)
	_, err = b.approve(late.ID)
	wantErr(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)
	want(4, "a decision refused for its deadline, which expired its request")
	rs, err = b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	if len(rs) != 1 || rs[0].ID != due.ID {
		t.Fatalf("ExpireDue = %v, want %s", ids(rs), due.ID)
	}
	want(3, "a sweep")
}

func (s *suite) deleteCancelsPending(t *testing.T) {
	b := s.setup(t)
	p1, p2, p3 := b.create(t), b.create(t), b.create(t)
	approved := b.into(t, airlock.StateApproved)
	denied := b.into(t, airlock.StateDenied)
	other := b.instance(t, ownerA)
	elsewhere := b.create(t, func(p *store.NewRequestParams) { p.Request.InstanceID = other.ID })

	at := b.clock.Advance(time.Second).Truncate(time.Microsecond)
	cancelled, err := b.store.DeleteInstance(b.ctx, b.inst.ID, "tok_admin")
	wantOK(t, err)
	if want := []string{p1.ID, p2.ID, p3.ID}; !slices.Equal(cancelled, want) {
		t.Fatalf("DeleteInstance cancelled %v, want %v", cancelled, want)
	}
	for _, id := range cancelled {
		r := b.get(t, id) // requests of a deleted instance stay readable
		if d := r.Decision; r.State != airlock.StateCancelled || d.DecidedBy != "tok_admin" || !d.DecidedAt.Equal(at) {
			t.Fatalf("%s after delete = %s, want cancelled by tok_admin at %v", id, show(r), at)
		}
	}
	sameRequest(t, "approved request after delete", b.get(t, approved.ID), approved)
	sameRequest(t, "denied request after delete", b.get(t, denied.ID), denied)
	sameRequest(t, "another instance's request", b.get(t, elsewhere.ID), elsewhere)

	_, err = b.store.GetInstance(b.ctx, b.inst.ID)
	wantErr(t, err, airlock.CodeNotFound, "")
	list, err := b.store.ListInstances(b.ctx, "")
	wantOK(t, err)
	if got := instanceIDs(list); !slices.Equal(got, []string{other.ID}) {
		t.Fatalf("ListInstances after delete = %v, want only %s", got, other.ID)
	}
	_, err = b.store.DeleteInstance(b.ctx, b.inst.ID, "tok_admin")
	wantErr(t, err, airlock.CodeNotFound, "")
	_, _, err = b.store.CreateRequest(b.ctx, b.params())
	wantErr(t, err, airlock.CodeNotFound, "")
	// The approval made before the delete still permits its one run.
	_, err = b.claim(approved.ID)
	wantOK(t, err)

	var cancelEvents, deleteEvents int
	for _, e := range b.events(t) {
		switch {
		case e.Type == airlock.EventRequestCancelled && e.Actor == "tok_admin" && slices.Contains(cancelled, e.RequestID):
			cancelEvents++
		case e.Type == airlock.EventInstanceDeleted && e.InstanceID == b.inst.ID && e.Actor == "tok_admin":
			deleteEvents++
		}
	}
	if cancelEvents != 3 || deleteEvents != 1 {
		t.Fatalf("%d cancel and %d delete events, want 3 and 1", cancelEvents, deleteEvents)
	}
}

func (s *suite) deleteExpiresOverdue(t *testing.T) {
	b := s.setup(t)
	overdue := b.create(t)
	b.clock.Advance(time.Minute)
	live := b.create(t)
	b.clock.Set(overdue.DeadlineAt)
	cancelled, err := b.store.DeleteInstance(b.ctx, b.inst.ID, ownerA)
	wantOK(t, err)
	if !slices.Equal(cancelled, []string{live.ID}) {
		t.Fatalf("cancelled %v, want only %s", cancelled, live.ID)
	}
	if r := b.get(t, overdue.ID); r.State != airlock.StateExpired || r.Decision.DecidedBy != airlock.ActorExpiry {
		t.Fatalf("overdue request = %s, want expired by %s", show(r), airlock.ActorExpiry)
	}
}

func (s *suite) deleteNothingPending(t *testing.T) {
	b := s.setup(t)
	cancelled, err := b.store.DeleteInstance(b.ctx, b.inst.ID, ownerA)
	wantOK(t, err)
	if len(cancelled) != 0 {
		t.Fatalf("cancelled %v, want none", cancelled)
	}
}

func instanceIDs(ins []airlock.Instance) []string {
	return mapped(ins, func(in airlock.Instance) string { return in.ID })
}
