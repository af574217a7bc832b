package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"go.opentelemetry.io/otel/trace"
)

// testEvents checks the audit log: one event per change, with its actor,
// in commit order, resumable by ID (docs/protocol.md S5).
func (s *suite) testEvents(t *testing.T) {
	runAll(t, []test{
		{"one event per change, in order", s.eventPerChange},
		{"every event has a random UID of its own", s.eventUIDs},
		{"events keep the trace context of their write", s.eventTraces},
	})
}

// eventTraces: an event keeps the W3C trace context of the write that
// appended it (the span in its context), through every way a store
// appends events (one at a time, a bulk expiry), and CreatedEvent finds a
// request's creation with its trace context, however many events came
// since; an untraced write keeps none.
func (s *suite) eventTraces(t *testing.T) {
	b := s.setup(t)
	traced := func(tid, sid string) (context.Context, airlock.Event) {
		t.Helper()
		tr, err := trace.TraceIDFromHex(tid)
		wantOK(t, err)
		sp, err := trace.SpanIDFromHex(sid)
		wantOK(t, err)
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tr, SpanID: sp, TraceFlags: trace.FlagsSampled, Remote: true})
		return trace.ContextWithSpanContext(b.ctx, sc), airlock.Event{TraceID: tid, SpanID: sid}
	}
	createCtx, createdIn := traced("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
	r, created, err := b.store.CreateRequest(createCtx, b.params())
	if err != nil || !created {
		t.Fatalf("CreateRequest = %v, %v", created, err)
	}
	other := b.create(t) // untraced
	decideCtx, decidedIn := traced("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
	_, err = b.store.Decide(decideCtx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Note: "go ahead", Validity: validity, Actor: reviewer})
	wantOK(t, err)
	b.clock.Advance(2 * window)
	expireCtx, expiredIn := traced("5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8")
	_, err = b.store.ExpireRequests(expireCtx, []string{other.ID})
	wantOK(t, err)

	for _, c := range []struct {
		request string
		typ     airlock.EventType
		want    airlock.Event
	}{
		{r.ID, airlock.EventRequestCreated, createdIn},
		{r.ID, airlock.EventRequestApproved, decidedIn},
		{other.ID, airlock.EventRequestCreated, airlock.Event{}},
		{other.ID, airlock.EventRequestExpired, expiredIn},
	} {
		var found bool
		for _, e := range b.events(t) {
			if e.RequestID == c.request && e.Type == c.typ {
				found = true
				if e.TraceID != c.want.TraceID || e.SpanID != c.want.SpanID {
					t.Errorf("%s of %s keeps trace %q span %q, want %q %q", c.typ, c.request, e.TraceID, e.SpanID, c.want.TraceID, c.want.SpanID)
				}
			}
		}
		if !found {
			t.Errorf("no %s event of %s", c.typ, c.request)
		}
	}
	e, err := b.store.CreatedEvent(b.ctx, r.ID)
	wantOK(t, err)
	if e.Type != airlock.EventRequestCreated || e.RequestID != r.ID || e.TraceID != createdIn.TraceID || e.SpanID != createdIn.SpanID {
		t.Errorf("CreatedEvent(%s) = %+v, want its request.created in trace %s span %s", r.ID, e, createdIn.TraceID, createdIn.SpanID)
	}
	_, err = b.store.CreatedEvent(b.ctx, "req_nosuchrequest")
	wantErr(t, err, airlock.CodeNotFound, "")
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
