package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testEvents checks the audit log: one event per change, with its actor,
// in commit order, resumable by ID (docs/protocol.md S5).
func (s *suite) testEvents(t *testing.T) {
	runAll(t, []test{
		{"one event per change, in order", s.eventPerChange},
		{"every event has a random UID of its own", s.eventUIDs},
	})
}

// eventUIDs: every way a store appends events (one change, a bulk
// cancellation, an expiry sweep, expiry by ID) draws each event a UID of
// its own, 32 hex digits, which webhook-ids are made of: a sequence
// number repeats after a restore from a backup, a UID does not.
func (s *suite) eventUIDs(t *testing.T) {
	b := s.setup(t)
	b.changeEverything(t)
	inst := b.instance(t, ownerB)
	var due []string
	for range 3 {
		due = append(due, b.create(t, func(p *store.NewRequestParams) {
			p.Request.InstanceID, p.Request.OwnerID, p.Actor = inst.ID, inst.OwnerID, inst.OwnerID
		}).ID)
	}
	b.clock.Advance(2 * window)
	rs, err := b.store.ExpireRequests(b.ctx, due)
	wantOK(t, err)
	if len(rs) != len(due) {
		t.Fatalf("ExpireRequests = %v, want %v", ids(rs), due)
	}
	evs := b.events(t)
	seen := map[string]int64{}
	for _, e := range evs {
		if len(e.UID) != 32 || strings.Trim(e.UID, "0123456789abcdef") != "" {
			t.Errorf("event %d (%s) has UID %q, want 32 hex digits", e.ID, e.Type, e.UID)
		}
		if other, ok := seen[e.UID]; ok {
			t.Errorf("events %d and %d share UID %q", other, e.ID, e.UID)
		}
		seen[e.UID] = e.ID
		if got := airlock.MessageIDFor(e); got != airlock.PrefixMessage+e.UID {
			t.Errorf("MessageIDFor(event %d) = %q, want msg_ and its UID", e.ID, got)
		}
	}
	if n := len(ofType(evs, airlock.EventRequestExpired)); n != 1+len(due) {
		t.Fatalf("%d expiry events, want %d", n, 1+len(due))
	}
}

// wantEvent is what the audit log must hold of one change.
type wantEvent struct {
	typ     airlock.EventType
	actor   string
	request string
	state   airlock.State
	at      time.Time
}

func (s *suite) eventPerChange(t *testing.T) {
	b := s.setup(t) // instance.created
	r, wants := b.changeEverything(t)

	// Refused changes append nothing.
	_, err := b.approve(r.ID)
	wantErr(t, err, airlock.CodeNotPending, airlock.StateApproved)

	evs := b.events(t)
	if len(evs) != len(wants) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(wants), evs)
	}
	for i, w := range wants {
		e := evs[i]
		if e.Type != w.typ || e.Actor != w.actor || e.RequestID != w.request || e.State != w.state || !e.At.Equal(w.at) {
			t.Errorf("event %d = %+v, want %+v", i, e, w)
		}
		if e.RequestID != "" && e.InstanceID != b.inst.ID {
			t.Errorf("event %d names instance %q, want %q", i, e.InstanceID, b.inst.ID)
		}
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Errorf("event IDs %d then %d, want increasing", evs[i-1].ID, e.ID)
		}
	}

	// Resume after an event, as SSE's Last-Event-ID does.
	page, err := b.store.ListEvents(b.ctx, evs[2].ID, 2)
	wantOK(t, err)
	if len(page) != 2 || page[0] != evs[3] || page[1] != evs[4] {
		t.Fatalf("ListEvents(after %d, 2) = %+v, want events 3 and 4", evs[2].ID, page)
	}
	page, err = b.store.ListEvents(b.ctx, evs[len(evs)-1].ID, 10)
	wantOK(t, err)
	if len(page) != 0 {
		t.Fatalf("ListEvents after the last = %+v, want none", page)
	}
}

// changeEverything makes every kind of change to requests of b's instance,
// a second apart, ending with the instance's deletion: it returns the
// first request (approved, claimed, reported) and the events the log must
// hold, from b's setup on.
func (b *bundle) changeEverything(t *testing.T) (airlock.Request, []wantEvent) {
	t.Helper()
	tick := func() time.Time { return b.clock.Advance(time.Second).Truncate(time.Microsecond) }
	wants := []wantEvent{{airlock.EventInstanceCreated, ownerA, "", "", epoch.Truncate(time.Microsecond)}}

	// created creates a request at the next tick, and change makes a
	// change to one then; each wants its event.
	created := func() airlock.Request {
		at := tick()
		r := b.create(t)
		wants = append(wants, wantEvent{airlock.EventRequestCreated, ownerA, r.ID, airlock.StatePending, at})
		return r
	}
	change := func(typ airlock.EventType, actor string, r airlock.Request, state airlock.State, do func(id string) (airlock.Request, error)) {
		t.Helper()
		at := tick()
		_, err := do(r.ID)
		wantOK(t, err)
		wants = append(wants, wantEvent{typ, actor, r.ID, state, at})
	}

	r := created()
	change(airlock.EventRequestApproved, reviewer, r, airlock.StateApproved, b.approve)
	change(airlock.EventExecutionClaimed, ownerA, r, airlock.StateApproved, b.claim)
	change(airlock.EventExecutionReported, ownerA, r, airlock.StateApproved, func(id string) (airlock.Request, error) {
		return b.store.ReportExecution(b.ctx, id, airlock.ReportInput{Status: airlock.ExecFailed}, ownerA)
	})
	change(airlock.EventRequestDenied, reviewer, created(), airlock.StateDenied, b.deny)
	change(airlock.EventRequestCancelled, ownerA, created(), airlock.StateCancelled, b.cancel)

	e := created()
	b.clock.Set(e.DeadlineAt)
	at := e.DeadlineAt
	_, err := b.store.ExpireDue(b.ctx, 10)
	wantOK(t, err)
	wants = append(wants, wantEvent{airlock.EventRequestExpired, airlock.ActorExpiry, e.ID, airlock.StateExpired, at})

	p := b.create(t, func(p *store.NewRequestParams) { p.Window = 2 * window })
	wants = append(wants, wantEvent{airlock.EventRequestCreated, ownerA, p.ID, airlock.StatePending, at})
	at = tick()
	_, err = b.store.DeleteInstance(b.ctx, b.inst.ID, "tok_admin")
	wantOK(t, err)
	return r, append(wants,
		wantEvent{airlock.EventRequestCancelled, "tok_admin", p.ID, airlock.StateCancelled, at},
		wantEvent{airlock.EventInstanceDeleted, "tok_admin", "", "", at})
}

// EventLister is the part of a store AllEvents reads.
type EventLister interface {
	ListEvents(ctx context.Context, after int64, limit int) ([]airlock.Event, error)
}

// AllEvents reads the whole audit log of s, however long, failing t when
// a page cannot be read. It runs in cleanups too: its reads outlive t's
// context.
func AllEvents(t testing.TB, s EventLister) []airlock.Event {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	var all []airlock.Event
	for {
		after := int64(0)
		if len(all) > 0 {
			after = all[len(all)-1].ID
		}
		page, err := s.ListEvents(ctx, after, 1000)
		if err != nil {
			t.Fatalf("ListEvents after %d: %v", after, err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
	}
}
