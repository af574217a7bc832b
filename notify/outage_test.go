package notify_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
)

// outageReceiver is a real HTTP receiver that, while down, drops every
// connection without an answer, as a receiver that is off would; once up,
// it verifies and accepts everything.
type outageReceiver struct {
	srv    *httptest.Server
	secret string
	down   atomic.Bool

	mu       sync.Mutex
	attempts int
	accepted map[string][][]byte // webhook-id → bodies accepted
	bad      []error
}

func newOutageReceiver(t *testing.T) *outageReceiver {
	rc := &outageReceiver{accepted: map[string][][]byte{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.attempts++
		rc.mu.Unlock()
		if rc.down.Load() {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err := notify.Verify(rc.secret, r.Header, body, time.Now(), notify.DefaultTolerance); err != nil {
			rc.bad = append(rc.bad, err)
		}
		id := r.Header.Get(notify.HeaderID)
		rc.accepted[id] = append(rc.accepted[id], body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *outageReceiver) attemptCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.attempts
}

// TestReceiverDownThenBack is part of the webhook fault tests
// (docs/reliability.md): a receiver that is down for hours — every
// attempt dropped, retries spaced by the real schedule, on a store clock
// the test moves — while events keep being committed, gets every event
// once it is back, each webhook-id with one body however often it comes.
func TestReceiverDownThenBack(t *testing.T) {
	t.Parallel()
	clock := storetest.NewFakeClock(time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC))
	b := setup(t, sqlite.WithClock(clock))
	st := b.store
	rc := newOutageReceiver(t)
	rc.down.Store(true)
	ep, err := st.CreateEndpoint(b.ctx, airlock.Endpoint{ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook,
		URL: rc.srv.URL + "/hook", Secret: airlock.NewWebhookSecret(), CreatedBy: "tok_admin"})
	if err != nil {
		t.Fatal(err)
	}
	rc.secret = ep.Secret
	b.run(t, notify.Config{Jitter: func(d time.Duration) time.Duration { return d }, Timeout: 5 * time.Second})

	// settled waits until every pending delivery has been attempted as
	// often as the store's clock allows: none due, none leased.
	settled := func(what string) []airlock.Delivery {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ds, _, err := st.ListDeliveries(b.ctx, ep.ID, 0, 500)
			if err != nil {
				t.Fatal(err)
			}
			cursor, err := st.FanOutCursor(b.ctx)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := st.ListEvents(b.ctx, cursor, 1)
			if err != nil {
				t.Fatal(err)
			}
			quiet := len(evs) == 0
			for _, d := range ds {
				if d.State == airlock.DeliveryPending && (!d.NextAttemptAt.After(clock.Now()) || d.LeaseUntil != nil) {
					quiet = false
				}
			}
			if quiet {
				return ds
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the engine never caught up with the store's clock at %s: %d deliveries", what, clock.Now(), len(ds))
			}
			time.Sleep(5 * time.Millisecond) // the engine works on its own time
		}
	}

	// Down for three hours of the store's clock: events come in at the
	// start and along the way, and every delivery is retried on the
	// schedule (5 s, 5 min, 30 min, 2 h), every attempt dropped.
	var reqs []airlock.Request
	for _, step := range []time.Duration{0, 6 * time.Second, 6 * time.Minute, 31 * time.Minute, 40 * time.Minute, 2 * time.Hour} {
		clock.Advance(step)
		r := b.request(t, 24*time.Hour)
		reqs = append(reqs, r)
		if len(reqs)%2 == 0 {
			if _, err := st.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateDenied, Actor: "tok_rev"}); err != nil {
				t.Fatal(err)
			}
		}
		settled("down")
	}
	ds := settled("down, at the end")
	if len(rc.accepted) != 0 {
		t.Fatalf("a receiver that is down accepted %d", len(rc.accepted))
	}
	retried := false
	for _, d := range ds {
		if d.State != airlock.DeliveryPending {
			t.Fatalf("while down: %s is %s, want pending (retrying)", d.ID, d.State)
		}
		retried = retried || len(d.Attempts) >= 3
	}
	if !retried || rc.attemptCount() < len(ds)*2 {
		t.Fatalf("%d attempts of %d deliveries over three hours down: the schedule was not followed", rc.attemptCount(), len(ds))
	}
	got, err := st.GetEndpoint(b.ctx, ep.ID)
	if err != nil || got.FailingSince == nil || got.DisabledAt != nil {
		t.Fatalf("endpoint while down: %+v, %v; want failing, not disabled", got, err)
	}

	// Back: the next retries, at most the schedule's longest step away,
	// deliver everything.
	rc.down.Store(false)
	clock.Advance(10 * time.Hour)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds = settled("back")
		pending := 0
		for _, d := range ds {
			if d.State != airlock.DeliveryDelivered {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries not delivered after the receiver came back", pending, len(ds))
		}
		clock.Advance(10 * time.Hour)
	}

	// Every event of the log the endpoint subscribes to was accepted; each
	// webhook-id carried one body, however often it came.
	evs, err := st.ListEvents(b.ctx, ep.AfterEvent, 1000)
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Fatalf("unverified webhooks: %v", rc.bad)
	}
	want := 0
	for _, ev := range evs {
		if _, ok := airlock.NotifyTypeOf(ev.Type); !ok {
			continue
		}
		want++
		bodies := rc.accepted[airlock.MessageIDFor(ev)]
		if len(bodies) == 0 {
			t.Errorf("event %d (%s of %s) never delivered", ev.ID, ev.Type, ev.RequestID)
		}
		for _, body := range bodies[1:] {
			if !bytes.Equal(body, bodies[0]) {
				t.Errorf("webhook-id %s came with two bodies:\n%s\n%s", airlock.MessageIDFor(ev), bodies[0], body)
			}
		}
	}
	if want != len(reqs)+len(reqs)/2 || len(rc.accepted) != want {
		t.Fatalf("accepted %d webhook-ids; the log has %d events to deliver (%d requests, half denied)", len(rc.accepted), want, len(reqs))
	}
	got, err = st.GetEndpoint(context.Background(), ep.ID)
	if err != nil || got.FailingSince != nil {
		t.Fatalf("endpoint after delivering: %+v, %v; want no longer failing", got, err)
	}
}
