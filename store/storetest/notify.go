package storetest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

const admin = "tok_admin"

// endpoint creates a webhook endpoint subscribed to events (all when none).
func (b *bundle) endpoint(t *testing.T, events ...airlock.NotifyType) airlock.Endpoint {
	t.Helper()
	e, err := b.store.CreateEndpoint(b.ctx, airlock.Endpoint{
		ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook, URL: "https://example.test/hook",
		Events: events, Description: "ops ⚙", Secret: airlock.NewWebhookSecret(), CreatedBy: admin,
	})
	wantOK(t, err)
	return e
}

// delivery is a delivery of event to e, as the fan-out builds it.
func delivery(e airlock.Endpoint, ev airlock.Event) airlock.Delivery {
	typ, _ := airlock.NotifyTypeOf(ev.Type)
	return airlock.Delivery{ID: airlock.NewID(airlock.PrefixDelivery), EndpointID: e.ID, EventID: ev.ID,
		MessageID: airlock.MessageIDFor(ev), Type: typ, RequestID: ev.RequestID, Payload: []byte(`{"n":` + fmt.Sprint(ev.ID) + `}`)}
}

// listed returns the IDs of the enabled endpoints, as the fan-out lists
// them before it reads the events.
func (b *bundle) listed(t *testing.T) []string {
	t.Helper()
	eps, err := b.store.ListEndpoints(b.ctx, "")
	wantOK(t, err)
	var ids []string
	for _, e := range eps {
		if e.DisabledAt == nil {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// unfanned returns the fan-out cursor and the events after it.
func (b *bundle) unfanned(t *testing.T) (int64, []airlock.Event) {
	t.Helper()
	after, err := b.store.FanOutCursor(b.ctx)
	wantOK(t, err)
	evs, err := b.store.ListEvents(b.ctx, after, 1000)
	wantOK(t, err)
	return after, evs
}

// deliveries builds the deliveries of evs to every endpoint in eps that
// wants them, as the fan-out does.
func deliveries(evs []airlock.Event, eps ...airlock.Endpoint) []airlock.Delivery {
	var ds []airlock.Delivery
	for _, ev := range evs {
		typ, ok := airlock.NotifyTypeOf(ev.Type)
		for _, e := range eps {
			if ok && e.Wants(typ) && ev.ID > e.AfterEvent {
				ds = append(ds, delivery(e, ev))
			}
		}
	}
	return ds
}

// endpointWith sets up a bundle with an endpoint subscribed to every event,
// then creates n requests after it, so that it wants their events.
func (s *suite) endpointWith(t *testing.T, n int) (*bundle, airlock.Endpoint) {
	t.Helper()
	b := s.setup(t)
	e := b.endpoint(t)
	for range n {
		b.create(t)
	}
	return b, e
}

// queueAll queues the deliveries of every event after the cursor to every
// endpoint in eps that wants it, as the fan-out does.
func (b *bundle) queueAll(t *testing.T, eps ...airlock.Endpoint) []airlock.Delivery {
	t.Helper()
	after, evs := b.unfanned(t)
	if len(evs) == 0 {
		return nil
	}
	ds := deliveries(evs, eps...)
	moved, err := b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: b.listed(t), After: after, Upto: evs[len(evs)-1].ID, Deliveries: ds})
	wantOK(t, err)
	if !moved {
		t.Fatalf("QueueDeliveries from the cursor's own position %d did not move it", after)
	}
	return ds
}

func (b *bundle) lease(t *testing.T, e airlock.Endpoint, holder string, n int) []airlock.Delivery {
	t.Helper()
	ds, err := b.store.LeaseDeliveries(b.ctx, store.LeaseParams{EndpointID: e.ID, Holder: holder, For: 30 * time.Second, Limit: n})
	wantOK(t, err)
	return ds
}

func (b *bundle) record(holder, id string, outcome airlock.DeliveryOutcome, retryIn time.Duration, status int) (airlock.Delivery, error) {
	return b.recordOne(store.AttemptParams{DeliveryID: id, Holder: holder, Outcome: outcome, RetryIn: retryIn,
		Attempt:      airlock.DeliveryAttempt{At: b.clock.Now().Truncate(time.Microsecond), Status: status, Latency: 3 * time.Millisecond, Error: errText(status)},
		DisableAfter: 24 * time.Hour})
}

// recordOne records one attempt: not_found when its delivery is gone or
// leased by another holder.
func (b *bundle) recordOne(p store.AttemptParams) (airlock.Delivery, error) {
	ds, err := b.store.RecordAttempts(b.ctx, []store.AttemptParams{p})
	if err != nil {
		return airlock.Delivery{}, err
	}
	if ds[0].ID == "" {
		return airlock.Delivery{}, airlock.NotFound("delivery", p.DeliveryID)
	}
	return ds[0], nil
}

func errText(status int) string {
	if status >= 200 && status < 300 {
		return ""
	}
	return fmt.Sprintf("HTTP %d", status)
}

func deliveryIDs(ds []airlock.Delivery) []string {
	return mapped(ds, func(d airlock.Delivery) string { return d.ID })
}

// testNotify checks the notification queue (docs/notifications.md):
// endpoints, the fan-out from the event log, leases and their takeover,
// attempts, disabling, and reminders once per request.
func (s *suite) testNotify(t *testing.T) {
	runAll(t, []test{
		{"endpoints: create, read, list, delete", s.endpointsRoundTrip},
		{"fan-out queues each event once, only for enabled subscribers after their creation", s.fanOutOnce},
		{"concurrent fan-outs from one cursor: exactly one queues", s.fanOutRace},
		{"a fan-out that did not list an endpoint queues nothing", s.fanOutMissedEndpoint},
		{"leases: one holder at a time, taken over when it lapses", s.leaseTakeover},
		{"concurrent leases never share a delivery", s.leaseRace},
		{"retries come due after their delay; a failing endpoint is disabled", s.retryAndDisable},
		{"enable: a disabled endpoint resumes with what its last failures failed", s.enableEndpoint},
		{"a first failure never disables, however short DisableAfter", s.firstFailureKeepsEnabled},
		{"a success clears the failing mark; give-up fails the delivery", s.successClearsFailing},
		{"the fan-out queues deliveries leased to their holder", s.fanOutLeased},
		{"the backlog counts unqueued events and pending deliveries", s.deliveryBacklog},
		{"a batch of attempts in one write, skipping a lost lease", s.attemptBatch},
		{"test deliveries and pages of deliveries", s.testDeliveries},
		{"reminders: once per pending request, when due", s.remindOnce},
		{"concurrent reminders: one event per request", s.remindRace},
	})
}

func (s *suite) endpointsRoundTrip(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	last := b.events(t)
	e := b.endpoint(t, airlock.NotifyCreated, airlock.NotifyApproved)
	if e.AfterEvent != last[len(last)-1].ID || e.Seq == 0 || !e.CreatedAt.Equal(epoch.Truncate(time.Microsecond)) ||
		e.DisabledAt != nil || e.FailingSince != nil {
		t.Fatalf("created %s; want AfterEvent %d, created at the store's now, enabled", show(e), last[len(last)-1].ID)
	}
	got, err := b.store.GetEndpoint(b.ctx, e.ID)
	wantOK(t, err)
	if show(got) != show(e) || !slices.Equal(got.Events, []airlock.NotifyType{airlock.NotifyCreated, airlock.NotifyApproved}) ||
		got.Secret != e.Secret {
		t.Fatalf("GetEndpoint = %s, want %s", show(got), show(e))
	}
	all := b.endpoint(t)
	if all.Events != nil {
		t.Fatalf("an endpoint created with no events reads back %v, want nil (all)", all.Events)
	}
	list, err := b.store.ListEndpoints(b.ctx, airlock.EndpointWebhook)
	wantOK(t, err)
	if len(list) != 2 || list[0].ID != e.ID || list[1].ID != all.ID {
		t.Fatalf("ListEndpoints = %s, want %s then %s", show(list), e.ID, all.ID)
	}
	if list, err = b.store.ListEndpoints(b.ctx, "slack"); err != nil || len(list) != 0 {
		t.Fatalf("ListEndpoints(slack) = %v, %v; want none", list, err)
	}
	_, err = b.approve(r.ID)
	wantOK(t, err)
	b.queueAll(t, e, all)
	wantOK(t, b.store.DeleteEndpoint(b.ctx, e.ID, admin))
	_, err = b.store.GetEndpoint(b.ctx, e.ID)
	wantErr(t, err, airlock.CodeNotFound, "")
	wantErr(t, b.store.DeleteEndpoint(b.ctx, e.ID, admin), airlock.CodeNotFound, "")
	if ds, _, err := b.store.ListDeliveries(b.ctx, e.ID, 0, 10); err != nil || len(ds) != 0 {
		t.Fatalf("deliveries of a deleted endpoint = %v, %v; want none", ds, err)
	}
	created, deleted := b.eventsOf(t, airlock.EventEndpointCreated), b.eventsOf(t, airlock.EventEndpointDeleted)
	if len(created) != 2 || len(deleted) != 1 || deleted[0].Subject != e.ID || deleted[0].Actor != admin {
		t.Fatalf("%d endpoint.created events and endpoint.deleted %+v; want 2, and one of %s by %s", len(created), deleted, e.ID, admin)
	}
}

func (s *suite) fanOutOnce(t *testing.T) {
	b := s.setup(t)
	before := b.create(t) // before any endpoint: never delivered
	created := b.endpoint(t, airlock.NotifyCreated)
	all := b.endpoint(t)
	r := b.create(t)
	_, err := b.deny(r.ID)
	wantOK(t, err)

	after, evs := b.unfanned(t)
	ds := deliveries(evs, created, all)
	if len(ds) != 3 {
		t.Fatalf("the test built %d deliveries, want 3 (created to both, denied to one)", len(ds))
	}
	for _, d := range ds {
		if d.RequestID == before.ID {
			t.Fatal("a request from before the endpoints was queued")
		}
	}
	upto := evs[len(evs)-1].ID
	// A replica that read the cursor at the same time loses.
	moved, err := b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: b.listed(t), After: after, Upto: upto, Deliveries: ds})
	wantOK(t, err)
	again, err := b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: b.listed(t), After: after, Upto: upto, Deliveries: ds})
	wantOK(t, err)
	if !moved || again {
		t.Fatalf("QueueDeliveries from %d = %v, then %v; want true, then false", after, moved, again)
	}
	if cur, err := b.store.FanOutCursor(b.ctx); err != nil || cur != upto {
		t.Fatalf("FanOutCursor = %d, %v; want %d", cur, err, upto)
	}
	// Queueing the same event for an endpoint twice keeps the first.
	dup := delivery(all, evs[len(evs)-1])
	dup.Payload = []byte(`"second"`)
	moved, err = b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: b.listed(t), After: upto, Upto: upto, Deliveries: []airlock.Delivery{dup}})
	wantOK(t, err)
	if !moved {
		t.Fatal("QueueDeliveries from the cursor's position did not move it")
	}
	got, more, err := b.store.ListDeliveries(b.ctx, all.ID, 0, 10)
	wantOK(t, err)
	if len(got) != 2 || more || got[0].Type != airlock.NotifyDenied || got[1].Type != airlock.NotifyCreated ||
		got[0].ID == dup.ID || got[0].Payload != nil || got[0].State != airlock.DeliveryPending ||
		got[0].EventID != evs[len(evs)-1].ID || got[0].MessageID != airlock.MessageIDFor(evs[len(evs)-1]) {
		t.Fatalf("ListDeliveries(all) = %s; want denied then created, pending, the first queued, without payload", show(got))
	}
	if got, _, _ := b.store.ListDeliveries(b.ctx, created.ID, 0, 10); len(got) != 1 || got[0].Type != airlock.NotifyCreated {
		t.Fatalf("ListDeliveries(created only) = %s", show(got))
	}
	// A delivery to an endpoint that is gone is not queued.
	wantOK(t, b.store.DeleteEndpoint(b.ctx, created.ID, admin))
	gone := delivery(created, evs[len(evs)-1])
	if _, err := b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: b.listed(t), After: upto, Upto: upto, Deliveries: []airlock.Delivery{gone}}); err != nil {
		t.Fatalf("QueueDeliveries to a deleted endpoint: %v, want it skipped", err)
	}
	_, err = b.store.AddDelivery(b.ctx, gone)
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) fanOutRace(t *testing.T) {
	b, e := s.endpointWith(t, 1)
	after, evs := b.unfanned(t)
	listed := b.listed(t)
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			moved, err := b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: listed, After: after, Upto: evs[len(evs)-1].ID,
				Deliveries: []airlock.Delivery{delivery(e, evs[len(evs)-1])}})
			if err != nil {
				t.Errorf("QueueDeliveries: %v", err)
			}
			if moved {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	ds, _, err := b.store.ListDeliveries(b.ctx, e.ID, 0, 10)
	wantOK(t, err)
	if won.Load() != 1 || len(ds) != 1 {
		t.Fatalf("%d of 8 fan-outs moved the cursor, %d deliveries; want 1 and 1", won.Load(), len(ds))
	}
}

func (s *suite) fanOutMissedEndpoint(t *testing.T) {
	b := s.setup(t)
	first := b.endpoint(t)
	listed := b.listed(t) // the fan-out reads the endpoints,
	late := b.endpoint(t) // one is created,
	b.create(t)           // and an event it wants is committed
	after, evs := b.unfanned(t)
	upto := evs[len(evs)-1].ID
	moved, err := b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: listed, After: after, Upto: upto,
		Deliveries: []airlock.Delivery{delivery(first, evs[len(evs)-1])}})
	wantOK(t, err)
	if cur, _ := b.store.FanOutCursor(b.ctx); moved || cur != after {
		t.Fatalf("QueueDeliveries without %s = %v, cursor %d; want false, cursor still %d", late.ID, moved, cur, after)
	}
	if ds, _, _ := b.store.ListDeliveries(b.ctx, first.ID, 0, 10); len(ds) != 0 {
		t.Fatalf("queued %s though the fan-out was refused", show(ds))
	}
	// Listed again, it queues; an endpoint created after the events
	// were read starts after them and does not hold it back.
	listed = b.listed(t)
	b.endpoint(t)
	moved, err = b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: listed, After: after, Upto: upto,
		Deliveries: []airlock.Delivery{delivery(first, evs[len(evs)-1]), delivery(late, evs[len(evs)-1])}})
	wantOK(t, err)
	if !moved {
		t.Fatal("QueueDeliveries with every endpoint listed did not move the cursor")
	}
	if ds, _, _ := b.store.ListDeliveries(b.ctx, late.ID, 0, 10); len(ds) != 1 {
		t.Fatalf("the late endpoint has %s; want its delivery", show(ds))
	}
}

func (s *suite) leaseTakeover(t *testing.T) {
	b, e := s.endpointWith(t, 3)
	queued := b.queueAll(t, e)
	first := b.lease(t, e, "rep_a", 2)
	if !slices.Equal(deliveryIDs(first), deliveryIDs(queued[:2])) || first[0].LeaseHolder != "rep_a" || first[0].LeaseUntil == nil ||
		string(first[0].Payload) != string(queued[0].Payload) {
		t.Fatalf("lease = %s, want the first two queued, leased to rep_a, with payloads", show(first))
	}
	second := b.lease(t, e, "rep_b", 5)
	if !slices.Equal(deliveryIDs(second), deliveryIDs(queued[2:])) {
		t.Fatalf("second lease = %v, want only the one not leased %v", deliveryIDs(second), deliveryIDs(queued[2:]))
	}
	if more := b.lease(t, e, "rep_c", 5); len(more) != 0 {
		t.Fatalf("a third lease took %v while all are leased", deliveryIDs(more))
	}
	// rep_a dies; its lease lapses and rep_c takes the deliveries over.
	b.clock.Advance(30*time.Second - time.Microsecond)
	if more := b.lease(t, e, "rep_c", 5); len(more) != 0 {
		t.Fatalf("a lease 1µs before the lapse took %v", deliveryIDs(more))
	}
	b.clock.Advance(time.Microsecond)
	over := b.lease(t, e, "rep_c", 5)
	if len(over) != 3 {
		t.Fatalf("after the leases lapsed rep_c took %v, want all 3", deliveryIDs(over))
	}
	// What the old holder reports is refused: the new holder sends again,
	// with the same message ID.
	_, err := b.record("rep_a", first[0].ID, airlock.OutcomeDelivered, 0, 204)
	wantErr(t, err, airlock.CodeNotFound, "")
	d, err := b.record("rep_c", first[0].ID, airlock.OutcomeDelivered, 0, 204)
	wantOK(t, err)
	if d.State != airlock.DeliveryDelivered || len(d.Attempts) != 1 || d.Attempts[0].Status != 204 || d.LeaseHolder != "" ||
		d.Attempts[0].Latency != 3*time.Millisecond || d.MessageID != first[0].MessageID {
		t.Fatalf("recorded %s; want delivered, one attempt of 204, lease released", show(d))
	}
	_, err = b.record("rep_c", first[0].ID, airlock.OutcomeDelivered, 0, 204)
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) leaseRace(t *testing.T) {
	b, e := s.endpointWith(t, 20)
	b.queueAll(t, e)
	var (
		mu   sync.Mutex
		seen = map[string]string{}
		wg   sync.WaitGroup
	)
	for i := range 8 {
		holder := fmt.Sprintf("rep_%d", i)
		wg.Go(func() {
			for {
				ds, err := b.store.LeaseDeliveries(b.ctx, store.LeaseParams{EndpointID: e.ID, Holder: holder, For: time.Minute, Limit: 2})
				if err != nil {
					t.Errorf("LeaseDeliveries: %v", err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, d := range ds {
					if prev, ok := seen[d.ID]; ok {
						t.Errorf("delivery %s leased by %s and %s", d.ID, prev, holder)
					}
					seen[d.ID] = holder
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 20 {
		t.Fatalf("%d deliveries leased, want 20", len(seen))
	}
}

func (s *suite) retryAndDisable(t *testing.T) {
	b, e := s.endpointWith(t, 2)
	queued := b.queueAll(t, e)
	ds := b.lease(t, e, "rep_a", 1)
	start := b.clock.Now().Truncate(time.Microsecond)
	d, err := b.record("rep_a", ds[0].ID, airlock.OutcomeRetry, 5*time.Second, 500)
	wantOK(t, err)
	if d.State != airlock.DeliveryPending || !d.NextAttemptAt.Equal(start.Add(5*time.Second)) || d.Attempts[0].Error != "HTTP 500" {
		t.Fatalf("after a failed attempt: %s; want pending, next at +5s", show(d))
	}
	got, err := b.store.GetEndpoint(b.ctx, e.ID)
	wantOK(t, err)
	if got.FailingSince == nil || !got.FailingSince.Equal(start) {
		t.Fatalf("FailingSince = %v, want %v", got.FailingSince, start)
	}
	// Only the other delivery is due now.
	if now := b.lease(t, e, "rep_a", 5); len(now) != 1 || now[0].ID != queued[1].ID {
		t.Fatalf("lease = %v, want only %s", deliveryIDs(now), queued[1].ID)
	}
	b.clock.Advance(5 * time.Second)
	retry := b.lease(t, e, "rep_b", 5)
	if len(retry) != 1 || retry[0].ID != ds[0].ID {
		t.Fatalf("lease at the retry's time = %v, want %s", deliveryIDs(retry), ds[0].ID)
	}
	// Failing again a day after the first failure disables the endpoint
	// and fails its pending deliveries.
	b.clock.Advance(24 * time.Hour)
	d, err = b.record("rep_b", ds[0].ID, airlock.OutcomeRetry, time.Hour, 0)
	wantOK(t, err)
	if len(d.Attempts) != 2 {
		t.Fatalf("attempts = %s, want 2", show(d.Attempts))
	}
	got, err = b.store.GetEndpoint(b.ctx, e.ID)
	wantOK(t, err)
	if got.DisabledAt == nil || got.DisabledReason == "" {
		t.Fatalf("after a day of failures: %s; want disabled with a reason", show(got))
	}
	list, _, err := b.store.ListDeliveries(b.ctx, e.ID, 0, 10)
	wantOK(t, err)
	for _, d := range list {
		if d.State != airlock.DeliveryFailed {
			t.Fatalf("delivery of a disabled endpoint is %s, want failed", d.State)
		}
	}
	b.create(t)
	if ds := b.queueAll(t, e); len(ds) != 1 {
		t.Fatalf("the test queued %d", len(ds))
	}
	if list, _, _ := b.store.ListDeliveries(b.ctx, e.ID, 0, 10); len(list) != 2 {
		t.Fatalf("a disabled endpoint got a new delivery: %s", show(list))
	}
	var disabled int
	for _, ev := range b.events(t) {
		if ev.Type == airlock.EventEndpointDisabled && ev.Subject == e.ID && ev.Actor == airlock.ActorNotify {
			disabled++
		}
	}
	if disabled != 1 {
		t.Fatalf("%d endpoint.disabled events, want 1", disabled)
	}
}

func (s *suite) firstFailureKeepsEnabled(t *testing.T) {
	b, e := s.endpointWith(t, 1)
	b.queueAll(t, e)
	ds := b.lease(t, e, "rep_a", 1)
	// Stores keep microseconds: a nanosecond must not round down to
	// nothing and disable an endpoint at the failure that starts its run.
	_, err := b.recordOne(store.AttemptParams{DeliveryID: ds[0].ID, Holder: "rep_a", Outcome: airlock.OutcomeRetry,
		Attempt:      airlock.DeliveryAttempt{At: b.clock.Now().Truncate(time.Microsecond), Status: 502, Error: errText(502)},
		DisableAfter: time.Nanosecond})
	wantOK(t, err)
	got, err := b.store.GetEndpoint(b.ctx, e.ID)
	wantOK(t, err)
	if got.DisabledAt != nil || got.FailingSince == nil {
		t.Fatalf("after one failure with DisableAfter 1ns: %s; want failing, not disabled", show(got))
	}
	if again := b.lease(t, e, "rep_a", 1); len(again) != 1 || again[0].ID != ds[0].ID {
		t.Fatalf("lease after the first failure = %v, want %s again", deliveryIDs(again), ds[0].ID)
	}
}

// disabledEndpoint sets up an endpoint disabled by a day of failures
// after an earlier run of failures ended, and an event queued while it was
// disabled. It returns the IDs of the delivery that failed for good in the
// earlier run, the one delivered, the one whose failures disabled the
// endpoint and the one queued during that run.
func (s *suite) disabledEndpoint(t *testing.T) (b *bundle, e airlock.Endpoint, earlier, delivered, third, fourth string) {
	t.Helper()
	b, e = s.endpointWith(t, 3)
	q := b.queueAll(t, e)
	if len(q) != 3 {
		t.Fatalf("the test queued %d", len(q))
	}
	// An earlier run of failures: one delivery failed for good, then a
	// success ended the run.
	ds := b.lease(t, e, "rep_a", 2)
	_, err := b.record("rep_a", ds[0].ID, airlock.OutcomeFailed, 0, 410)
	wantOK(t, err)
	_, err = b.record("rep_a", ds[1].ID, airlock.OutcomeDelivered, 0, 200)
	wantOK(t, err)
	earlier, delivered = ds[0].ID, ds[1].ID
	// The run that disables it: the third fails, a fourth is queued, and
	// a day later one of them fails again.
	b.clock.Advance(time.Hour)
	ds = b.lease(t, e, "rep_a", 5)
	if len(ds) != 1 {
		t.Fatalf("leased %v, want the third delivery", deliveryIDs(ds))
	}
	third = ds[0].ID
	_, err = b.record("rep_a", third, airlock.OutcomeRetry, 5*time.Second, 503)
	wantOK(t, err)
	b.create(t)
	fourth = b.queueAll(t, e)[0].ID
	b.clock.Advance(24 * time.Hour)
	if ds := b.lease(t, e, "rep_a", 1); len(ds) != 1 {
		t.Fatalf("leased %v, want one due", deliveryIDs(ds))
	} else {
		_, err = b.record("rep_a", ds[0].ID, airlock.OutcomeRetry, time.Hour, 0)
		wantOK(t, err)
	}
	got, err := b.store.GetEndpoint(b.ctx, e.ID)
	wantOK(t, err)
	if got.DisabledAt == nil {
		t.Fatalf("after a day of failures: %s; want disabled", show(got))
	}
	// An event while disabled is never queued for it.
	b.create(t)
	if ds := b.queueAll(t, e); len(ds) != 1 {
		t.Fatalf("the test queued %d", len(ds))
	}
	return b, e, earlier, delivered, third, fourth
}

func (s *suite) enableEndpoint(t *testing.T) {
	b, e, earlier, delivered, third, fourth := s.disabledEndpoint(t)
	b.clock.Advance(time.Minute)
	en, err := b.store.EnableEndpoint(b.ctx, e.ID, admin)
	wantOK(t, err)
	if en.DisabledAt != nil || en.DisabledReason != "" || en.FailingSince != nil || en.ID != e.ID {
		t.Fatalf("enabled: %s; want enabled, not failing", show(en))
	}
	list, _, err := b.store.ListDeliveries(b.ctx, e.ID, 0, 10)
	wantOK(t, err)
	want := map[string]airlock.DeliveryState{earlier: airlock.DeliveryFailed, delivered: airlock.DeliveryDelivered,
		third: airlock.DeliveryPending, fourth: airlock.DeliveryPending}
	if len(list) != len(want) {
		t.Fatalf("deliveries after enabling: %s; want the four queued before the disabling", show(list))
	}
	for _, d := range list {
		if d.State != want[d.ID] {
			t.Errorf("delivery %s is %s after enabling, want %s", d.ID, d.State, want[d.ID])
		}
		if d.ID == third && len(d.Attempts) == 0 {
			t.Errorf("requeued delivery lost its attempts: %s", show(d))
		}
	}
	due := b.lease(t, e, "rep_b", 10)
	if ids := deliveryIDs(due); len(ids) != 2 || !slices.Contains(ids, third) || !slices.Contains(ids, fourth) {
		t.Fatalf("due after enabling: %v, want %s and %s at once", ids, third, fourth)
	}
	// Enabling an enabled endpoint changes nothing and records nothing.
	again, err := b.store.EnableEndpoint(b.ctx, e.ID, admin)
	wantOK(t, err)
	if again.DisabledAt != nil {
		t.Fatalf("enabled twice: %s", show(again))
	}
	var enabled int
	for _, ev := range b.events(t) {
		if ev.Type == airlock.EventEndpointEnabled && ev.Subject == e.ID && ev.Actor == admin {
			enabled++
		}
	}
	if enabled != 1 {
		t.Fatalf("%d endpoint.enabled events, want 1", enabled)
	}
	_, err = b.store.EnableEndpoint(b.ctx, "whk_missing", admin)
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) successClearsFailing(t *testing.T) {
	b, e := s.endpointWith(t, 2)
	b.queueAll(t, e)
	ds := b.lease(t, e, "rep_a", 2)
	d, err := b.record("rep_a", ds[0].ID, airlock.OutcomeFailed, 0, 410)
	wantOK(t, err)
	if d.State != airlock.DeliveryFailed {
		t.Fatalf("given up: %s, want failed", d.State)
	}
	_, err = b.record("rep_a", ds[1].ID, airlock.OutcomeDelivered, 0, 200)
	wantOK(t, err)
	got, err := b.store.GetEndpoint(b.ctx, e.ID)
	wantOK(t, err)
	if got.FailingSince != nil || got.DisabledAt != nil {
		t.Fatalf("after a success: %s; want not failing", show(got))
	}
	_, err = b.recordOne(store.AttemptParams{DeliveryID: ds[0].ID, Holder: "rep_a", Outcome: "maybe"})
	wantErr(t, err, airlock.CodeInvalidRequest, "")
}

func (s *suite) fanOutLeased(t *testing.T) {
	b, e := s.endpointWith(t, 2)
	after, evs := b.unfanned(t)
	var ds []airlock.Delivery
	for _, ev := range evs {
		if _, ok := airlock.NotifyTypeOf(ev.Type); ok {
			ds = append(ds, delivery(e, ev))
		}
	}
	if len(ds) < 2 {
		t.Fatalf("the test built %d deliveries", len(ds))
	}
	ds[0].LeaseHolder = "rep_a" // handed to rep_a; the others wait for a lease
	moved, err := b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: b.listed(t), After: after, Upto: evs[len(evs)-1].ID, Deliveries: ds,
		LeaseFor: time.Minute})
	wantOK(t, err)
	if !moved {
		t.Fatal("the cursor did not move")
	}
	got := b.lease(t, e, "rep_b", 10)
	if ids := deliveryIDs(got); len(ids) != len(ds)-1 || slices.Contains(ids, ds[0].ID) {
		t.Fatalf("rep_b leased %v; want all but %s, queued leased to rep_a", ids, ds[0].ID)
	}
	// rep_a records it without leasing it; rep_b could not.
	_, err = b.record("rep_b", ds[0].ID, airlock.OutcomeDelivered, 0, 200)
	wantErr(t, err, airlock.CodeNotFound, "")
	d, err := b.record("rep_a", ds[0].ID, airlock.OutcomeDelivered, 0, 200)
	wantOK(t, err)
	if d.State != airlock.DeliveryDelivered {
		t.Fatalf("recorded by its holder: %s", show(d))
	}
	// Had rep_a died, its lease would lapse and another take it over.
	b.create(t)
	after, evs = b.unfanned(t)
	d = delivery(e, evs[len(evs)-1])
	d.LeaseHolder = "rep_a"
	_, err = b.store.QueueDeliveries(b.ctx, store.QueueParams{Listed: b.listed(t), After: after, Upto: evs[len(evs)-1].ID,
		Deliveries: []airlock.Delivery{d}, LeaseFor: time.Minute})
	wantOK(t, err)
	if got := b.lease(t, e, "rep_b", 10); len(got) != 0 {
		t.Fatalf("leased %v before rep_a's lease lapsed", deliveryIDs(got))
	}
	b.clock.Advance(time.Minute)
	if got := deliveryIDs(b.lease(t, e, "rep_b", 10)); !slices.Contains(got, d.ID) {
		t.Fatalf("after rep_a's lease lapsed rep_b leased %v, want %s among them", got, d.ID)
	}
}

func (s *suite) deliveryBacklog(t *testing.T) {
	b := s.setup(t)
	e := b.endpoint(t)
	b.queueAll(t, e) // the endpoint's own creation: nothing to deliver
	bl, err := b.store.DeliveryBacklog(b.ctx)
	wantOK(t, err)
	if bl != (store.Backlog{}) {
		t.Fatalf("backlog with nothing to do: %+v", bl)
	}
	b.create(t)
	b.create(t)
	_, evs := b.unfanned(t)
	bl, err = b.store.DeliveryBacklog(b.ctx)
	wantOK(t, err)
	if bl != (store.Backlog{Unqueued: int64(len(evs))}) {
		t.Fatalf("backlog after two creates: %+v; want %d unqueued", bl, len(evs))
	}
	ds := b.queueAll(t, e)
	bl, err = b.store.DeliveryBacklog(b.ctx)
	wantOK(t, err)
	if bl != (store.Backlog{Pending: int64(len(ds))}) || len(ds) < 2 {
		t.Fatalf("backlog after the fan-out of %d deliveries: %+v", len(ds), bl)
	}
	leased := b.lease(t, e, "rep_a", 2)
	_, err = b.record("rep_a", leased[0].ID, airlock.OutcomeDelivered, 0, 200)
	wantOK(t, err)
	_, err = b.record("rep_a", leased[1].ID, airlock.OutcomeRetry, time.Minute, 503)
	wantOK(t, err)
	bl, err = b.store.DeliveryBacklog(b.ctx)
	wantOK(t, err)
	if bl != (store.Backlog{Pending: int64(len(ds) - 1)}) {
		t.Fatalf("backlog after one delivered and one retrying of %d: %+v", len(ds), bl)
	}
}

func (s *suite) attemptBatch(t *testing.T) {
	b, e := s.endpointWith(t, 3)
	b.queueAll(t, e)
	ds := b.lease(t, e, "rep_a", 3)
	if len(ds) != 3 {
		t.Fatalf("leased %d, want 3", len(ds))
	}
	b.clock.Advance(time.Minute)
	if over := b.lease(t, e, "rep_b", 1); len(over) != 1 || over[0].ID != ds[0].ID {
		t.Fatalf("takeover = %v", deliveryIDs(over))
	}
	at := b.clock.Now().Truncate(time.Microsecond)
	got, err := b.store.RecordAttempts(b.ctx, []store.AttemptParams{
		{DeliveryID: ds[0].ID, Holder: "rep_a", Outcome: airlock.OutcomeDelivered, Attempt: airlock.DeliveryAttempt{At: at, Status: 200}},
		{DeliveryID: ds[1].ID, Holder: "rep_a", Outcome: airlock.OutcomeRetry, RetryIn: time.Second, Attempt: airlock.DeliveryAttempt{At: at, Error: "timed out"}},
		{DeliveryID: ds[2].ID, Holder: "rep_a", Outcome: airlock.OutcomeDelivered, Attempt: airlock.DeliveryAttempt{At: at, Status: 204}},
	})
	wantOK(t, err)
	if len(got) != 3 || got[0].ID != "" || got[1].ID != ds[1].ID || got[1].State != airlock.DeliveryPending ||
		!got[1].NextAttemptAt.Equal(at.Add(time.Second)) || got[2].State != airlock.DeliveryDelivered {
		t.Fatalf("RecordAttempts = %s; want the lost lease skipped, a retry, a delivery", show(got))
	}
	// The failure then the success, in order: not failing.
	ep, err := b.store.GetEndpoint(b.ctx, e.ID)
	wantOK(t, err)
	if ep.FailingSince != nil {
		t.Fatalf("endpoint after a failure then a success = %s", show(ep))
	}
	_, err = b.store.RecordAttempts(b.ctx, []store.AttemptParams{{DeliveryID: ds[1].ID, Holder: "rep_a", Outcome: "maybe"}})
	wantErr(t, err, airlock.CodeInvalidRequest, "")
}

func (s *suite) testDeliveries(t *testing.T) {
	b := s.setup(t)
	e := b.endpoint(t, airlock.NotifyApproved)
	var ids []string
	for range 5 {
		d, err := b.store.AddDelivery(b.ctx, airlock.Delivery{ID: airlock.NewID(airlock.PrefixDelivery), EndpointID: e.ID,
			MessageID: airlock.NewID(airlock.PrefixMessage), Type: airlock.NotifyTest, Payload: []byte(`{}`)})
		wantOK(t, err)
		if d.EventID != 0 || d.State != airlock.DeliveryPending || string(d.Payload) != `{}` {
			t.Fatalf("AddDelivery = %s", show(d))
		}
		ids = append(ids, d.ID)
	}
	slices.Reverse(ids)
	page, more, err := b.store.ListDeliveries(b.ctx, e.ID, 0, 2)
	wantOK(t, err)
	if !more || !slices.Equal(deliveryIDs(page), ids[:2]) {
		t.Fatalf("first page = %v (more %v), want %v and more", deliveryIDs(page), more, ids[:2])
	}
	page, more, err = b.store.ListDeliveries(b.ctx, e.ID, page[1].Seq, 10)
	wantOK(t, err)
	if more || !slices.Equal(deliveryIDs(page), ids[2:]) {
		t.Fatalf("second page = %v (more %v), want %v and no more", deliveryIDs(page), more, ids[2:])
	}
}

func (s *suite) remindOnce(t *testing.T) {
	b := s.setup(t)
	quarter := airlock.RemindBefore{Fraction: 0.25}
	r := b.create(t)       // window 10m: due 2m30s before its deadline
	decided := b.create(t) // decided before it is due: never reminded
	short := b.create(t, func(p *store.NewRequestParams) { p.Window = 2 * time.Minute })
	_, err := b.approve(decided.ID)
	wantOK(t, err)
	remind := func(r airlock.RemindBefore) []string {
		t.Helper()
		ids, err := b.store.RemindDue(b.ctx, r, 0)
		wantOK(t, err)
		slices.Sort(ids)
		return ids
	}
	if got := remind(quarter); len(got) != 0 {
		t.Fatalf("reminded %v at creation", got)
	}
	b.clock.Advance(90 * time.Second) // short's due at 1m30s
	if got := remind(quarter); !slices.Equal(got, []string{short.ID}) {
		t.Fatalf("reminded %v, want %s", got, short.ID)
	}
	b.clock.Advance(6*time.Minute - time.Microsecond)
	if got := remind(quarter); len(got) != 0 {
		t.Fatalf("reminded %v 1µs before due", got)
	}
	b.clock.Advance(time.Microsecond)
	if got := remind(quarter); !slices.Equal(got, []string{r.ID}) {
		t.Fatalf("reminded %v, want %s", got, r.ID)
	}
	if got := remind(airlock.RemindBefore{Before: 5 * time.Minute}); len(got) != 0 {
		t.Fatalf("reminded %v again", got)
	}
	if got := remind(airlock.RemindBefore{}); got != nil {
		t.Fatalf("no reminder asked, yet reminded %v", got)
	}
	var events []airlock.Event
	for _, ev := range b.events(t) {
		if ev.Type == airlock.EventRequestReminder {
			events = append(events, ev)
		}
	}
	if len(events) != 2 || events[0].RequestID != short.ID || events[1].RequestID != r.ID ||
		events[0].State != airlock.StatePending || events[0].InstanceID != b.inst.ID || events[0].Actor != airlock.ActorNotify {
		t.Fatalf("reminder events = %s", show(events))
	}
}

func (s *suite) remindRace(t *testing.T) {
	b := s.setup(t)
	for range 10 {
		b.create(t)
	}
	b.clock.Advance(9 * time.Minute)
	var wg sync.WaitGroup
	var total atomic.Int32
	for range 8 {
		wg.Go(func() {
			ids, err := b.store.RemindDue(b.ctx, airlock.RemindBefore{Before: 2 * time.Minute}, 0)
			if err != nil {
				t.Errorf("RemindDue: %v", err)
			}
			total.Add(int32(len(ids)))
		})
	}
	wg.Wait()
	var n int
	for _, ev := range b.events(t) {
		if ev.Type == airlock.EventRequestReminder {
			n++
		}
	}
	if total.Load() != 10 || n != 10 {
		t.Fatalf("%d reminded, %d reminder events; want 10 and 10", total.Load(), n)
	}
}
