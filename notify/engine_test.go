package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// received is one webhook as a receiver got it.
type received struct {
	id, ts string
	body   []byte
	err    error // Verify's answer
}

// receiver is a real HTTP server that verifies every webhook with the
// endpoint's secret and hands it to the test.
type receiver struct {
	srv    *httptest.Server
	secret string
	got    chan received
	// answer picks the status of the n-th webhook (from 1); default 204.
	answer func(n int, w http.ResponseWriter, r *http.Request) int

	mu sync.Mutex
	n  int
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request) int) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan received, 1000), answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.n++
		n, secret := rc.n, rc.secret
		rc.mu.Unlock()
		rc.got <- received{id: r.Header.Get(notify.HeaderID), ts: r.Header.Get(notify.HeaderTimestamp), body: body,
			err: notify.Verify(secret, r.Header, body, time.Now(), notify.DefaultTolerance)}
		status := http.StatusNoContent
		if rc.answer != nil {
			status = rc.answer(n, w, r)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// next waits for the next webhook, failing after a generous bound (a
// hung engine, not a slow one).
func (rc *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook arrived")
		return received{}
	}
}

type bundle struct {
	ctx   context.Context
	store *sqlite.Store
	inst  airlock.Instance
}

// setup opens a fresh SQLite store, with opts, holding one instance.
func setup(t testing.TB, opts ...sqlite.Option) *bundle {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &bundle{ctx: t.Context(), store: st}
	b.inst, err = st.CreateInstance(b.ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_agent", Name: "x"}, "tok_agent")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run starts an engine over b's store until the test ends.
func (b *bundle) run(t *testing.T, cfg notify.Config) *notify.Engine {
	t.Helper()
	cfg.Store = b.store
	sender := notify.NewWebhookSender(notify.WebhookConfig{AllowPrivate: true, Timeout: cfg.Timeout})
	if cfg.Senders == nil {
		cfg.Senders = map[airlock.EndpointKind]notify.Sender{airlock.EndpointWebhook: sender}
	}
	cfg.Render = rest.RequestJSON
	if cfg.PollEvery == 0 {
		cfg.PollEvery = 10 * time.Millisecond
	}
	e := notify.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; sender.Close() })
	return e
}

func (b *bundle) endpoint(t *testing.T, rc *receiver, events ...airlock.NotifyType) airlock.Endpoint {
	t.Helper()
	e, err := b.store.CreateEndpoint(b.ctx, airlock.Endpoint{ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook,
		URL: rc.srv.URL + "/hook", Events: events, Secret: airlock.NewWebhookSecret(), CreatedBy: "tok_admin"})
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.secret = e.Secret
	rc.mu.Unlock()
	return e
}

func (b *bundle) request(t *testing.T, window time.Duration) airlock.Request {
	t.Helper()
	key := airlock.NewID("key_")
	r, _, err := b.store.CreateRequest(b.ctx, store.NewRequestParams{Request: airlock.Request{
		ID: airlock.NewID(airlock.PrefixRequest), InstanceID: b.inst.ID, OwnerID: b.inst.OwnerID, Kind: airlock.KindToolCall,
		Tool: "shell.exec", Arguments: json.RawMessage(`{"cmd":"ls"}`), Timeout: window.String(), IdempotencyKey: key, Fingerprint: key,
	}, Window: window, Actor: b.inst.OwnerID})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type body struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Tool  string `json:"tool"`
	} `json:"data"`
}

func decode(t *testing.T, raw []byte) body {
	t.Helper()
	var b body
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("body %s: %v", raw, err)
	}
	return b
}

// TestDeliversSignedEvents: each committed change reaches the receiver as
// a Standard Webhook it verifies, with the request as the API shows it.
func TestDeliversSignedEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	only := newReceiver(t, nil)
	b.endpoint(t, rc)
	b.endpoint(t, only, airlock.NotifyApproved)
	b.run(t, notify.Config{})
	r := b.request(t, time.Hour)
	if _, err := b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_rev"}); err != nil {
		t.Fatal(err)
	}
	first, second := rc.next(t), rc.next(t)
	for _, got := range []received{first, second} {
		if got.err != nil {
			t.Fatalf("the receiver could not verify a webhook: %v", got.err)
		}
		if !strings.HasPrefix(got.id, "msg_") {
			t.Fatalf("webhook-id %q", got.id)
		}
	}
	b1, b2 := decode(t, first.body), decode(t, second.body)
	if b1.Type == "approval_request.approved" {
		// Order between deliveries is not promised (docs/notifications.md):
		// an endpoint's due deliveries are sent several at a time.
		first, second, b1, b2 = second, first, b2, b1
	}
	if b1.Type != "approval_request.created" || b2.Type != "approval_request.approved" || b1.Data.ID != r.ID || b2.Data.State != "approved" ||
		b1.Data.Tool != "shell.exec" || b1.Timestamp == "" {
		t.Fatalf("bodies %s then %s", first.body, second.body)
	}
	got := only.next(t)
	if got.err != nil || decode(t, got.body).Type != "approval_request.approved" || got.id != second.id {
		t.Fatalf("the approved-only endpoint got %s (id %s, err %v); want the approval with the same webhook-id %s", got.body, got.id, got.err, second.id)
	}
	select {
	case extra := <-only.got:
		t.Fatalf("the approved-only endpoint also got %s", extra.body)
	default:
	}
}

// TestRetriesThenDelivers: failures are retried after the schedule's
// delays (with the injected jitter), with the same webhook-id, until the
// receiver accepts; every attempt is recorded.
func TestRetriesThenDelivers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, func(n int, _ http.ResponseWriter, _ *http.Request) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	e := b.endpoint(t, rc, airlock.NotifyCreated)
	var (
		mu     sync.Mutex
		delays []time.Duration
	)
	b.run(t, notify.Config{Schedule: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, time.Hour},
		Jitter: func(d time.Duration) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			delays = append(delays, d)
			return d
		}})
	b.request(t, time.Hour)
	ids := []string{rc.next(t).id, rc.next(t).id, rc.next(t).id}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("retries changed the webhook-id: %v", ids)
	}
	d := waitDelivery(t, b, e.ID, func(d airlock.Delivery) bool { return d.State == airlock.DeliveryDelivered })
	if len(d.Attempts) != 3 || d.Attempts[0].Status != 500 || d.Attempts[0].Error != "HTTP 500" || d.Attempts[2].Status != 200 {
		t.Fatalf("attempts = %+v", d.Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delays) != 2 || delays[0] != 10*time.Millisecond || delays[1] != 20*time.Millisecond {
		t.Fatalf("delays asked of the jitter = %v, want the schedule's first two", delays)
	}
}

// waitDelivery polls the store until ok holds for the endpoint's newest
// delivery.
func waitDelivery(t *testing.T, b *bundle, endpoint string, ok func(airlock.Delivery) bool) airlock.Delivery {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, _, err := b.store.ListDeliveries(b.ctx, endpoint, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 && ok(ds[0]) {
			return ds[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries of %s: %+v", endpoint, ds)
		}
		time.Sleep(5 * time.Millisecond) // polling a store, not standing in for an event
	}
}

// TestGivesUpAndDisables: a delivery whose retries run out fails, and an
// endpoint failing for longer than DisableAfter is disabled.
func TestGivesUpAndDisables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) int { return http.StatusGone })
	e := b.endpoint(t, rc, airlock.NotifyCreated)
	b.run(t, notify.Config{Schedule: []time.Duration{time.Millisecond}, Jitter: func(d time.Duration) time.Duration { return d },
		DisableAfter: time.Hour})
	b.request(t, time.Hour)
	rc.next(t)
	rc.next(t)
	d := waitDelivery(t, b, e.ID, func(d airlock.Delivery) bool { return d.State == airlock.DeliveryFailed })
	if len(d.Attempts) != 2 {
		t.Fatalf("attempts = %+v, want 2 (one retry)", d.Attempts)
	}
	got, err := b.store.GetEndpoint(b.ctx, e.ID)
	if err != nil || got.FailingSince == nil || got.DisabledAt != nil {
		t.Fatalf("endpoint = %+v, %v; want failing, not yet disabled", got, err)
	}

	b2 := setup(t)
	rc2 := newReceiver(t, func(int, http.ResponseWriter, *http.Request) int { return http.StatusBadGateway })
	e2 := b2.endpoint(t, rc2, airlock.NotifyCreated)
	b2.run(t, notify.Config{Schedule: []time.Duration{time.Millisecond, time.Millisecond}, Jitter: func(d time.Duration) time.Duration { return d },
		DisableAfter: time.Microsecond})
	b2.request(t, time.Hour)
	b2.request(t, time.Hour)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := b2.store.GetEndpoint(b2.ctx, e2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.DisabledAt != nil {
			if !strings.Contains(got.DisabledReason, "HTTP 502") {
				t.Fatalf("disabled reason %q", got.DisabledReason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint never disabled: %+v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDeadEndpointDelaysNoOther is part of T24: an endpoint that hangs
// holds only its own worker; another endpoint receives everything while
// the first is still hung.
func TestDeadEndpointDelaysNoOther(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	hung := newReceiver(t, func(int, http.ResponseWriter, *http.Request) int {
		<-release
		return http.StatusOK
	})
	// Closed before the receivers' servers (cleanups run last first).
	defer close(release)
	good := newReceiver(t, nil)
	b.endpoint(t, hung, airlock.NotifyCreated)
	b.endpoint(t, good, airlock.NotifyCreated)
	b.run(t, notify.Config{Timeout: time.Minute})
	const n = 20
	for range n {
		b.request(t, time.Hour)
	}
	seen := map[string]bool{}
	for range n {
		got := good.next(t)
		if got.err != nil {
			t.Fatal(got.err)
		}
		seen[got.id] = true
	}
	if len(seen) != n {
		t.Fatalf("the live endpoint got %d distinct webhooks, want %d", len(seen), n)
	}
	// The hung endpoint holds at most its PerEndpoint attempts.
	if got := len(hung.got); got > notify.DefaultPerEndpoint {
		t.Fatalf("the hung endpoint got %d attempts at once, want at most %d", got, notify.DefaultPerEndpoint)
	}
}

// TestTimeout: an attempt that gets no answer within the timeout fails as
// "timed out" and is retried.
func TestTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, _ http.ResponseWriter, r *http.Request) int {
		if n == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return http.StatusOK
	})
	defer close(release)
	e := b.endpoint(t, rc, airlock.NotifyCreated)
	// Long enough that the retry, answered at once, never times out on a
	// loaded machine.
	b.run(t, notify.Config{Timeout: time.Second, Schedule: []time.Duration{time.Millisecond}})
	b.request(t, time.Hour)
	d := waitDelivery(t, b, e.ID, func(d airlock.Delivery) bool { return d.State == airlock.DeliveryDelivered })
	if len(d.Attempts) != 2 || d.Attempts[0].Error != "timed out" || d.Attempts[0].Status != 0 {
		t.Fatalf("attempts = %+v; want a timeout, then a success", d.Attempts)
	}
}

// TestTestDelivery: a queued test goes out at once to an endpoint of any
// filter.
func TestTestDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	e := b.endpoint(t, rc, airlock.NotifyApproved)
	eng := b.run(t, notify.Config{PollEvery: time.Hour})
	if _, err := b.store.AddDelivery(b.ctx, airlock.Delivery{ID: airlock.NewID(airlock.PrefixDelivery), EndpointID: e.ID,
		MessageID: airlock.NewID(airlock.PrefixMessage), Type: airlock.NotifyTest, Payload: []byte(`{"type":"webhook.test"}`)}); err != nil {
		t.Fatal(err)
	}
	eng.Wake()
	if got := rc.next(t); got.err != nil || string(got.body) != `{"type":"webhook.test"}` {
		t.Fatalf("got %s, %v", got.body, got.err)
	}
}

// TestReminder: a pending request's reminder is recorded once when due
// and delivered as approval_request.reminder.
func TestReminder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.endpoint(t, rc, airlock.NotifyReminder)
	b.run(t, notify.Config{Remind: airlock.RemindBefore{Before: time.Hour}, RemindEvery: 10 * time.Millisecond})
	r := b.request(t, 30*time.Minute) // due at once
	got := rc.next(t)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if bd := decode(t, got.body); bd.Type != "approval_request.reminder" || bd.Data.ID != r.ID || bd.Data.State != "pending" {
		t.Fatalf("reminder = %s", got.body)
	}
	evs, err := b.store.ListEvents(b.ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, ev := range evs {
		if ev.Type == airlock.EventRequestReminder {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d reminder events, want 1", n)
	}
}

// TestShutdownLeavesNoGoroutine: Run returns once its context ends, with
// its workers stopped (goleak checks the rest).
func TestShutdownLeavesNoGoroutine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.endpoint(t, rc)
	sender := notify.NewWebhookSender(notify.WebhookConfig{AllowPrivate: true})
	defer sender.Close()
	e := notify.New(notify.Config{Store: b.store, Render: rest.RequestJSON, PollEvery: time.Millisecond,
		Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointWebhook: sender}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	b.request(t, time.Hour)
	rc.next(t)
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal(errors.New("Run did not return"))
	}
}

// TestSecretsNeverLogged: failing deliveries are logged with the
// endpoint's ID and the error, never its secret nor its URL's query.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) int { return http.StatusServiceUnavailable })
	e, err := b.store.CreateEndpoint(b.ctx, airlock.Endpoint{ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook,
		URL: rc.srv.URL + "/hook?token=query-secret-123", Events: []airlock.NotifyType{airlock.NotifyCreated},
		Secret: airlock.NewWebhookSecret(), CreatedBy: "tok_admin"})
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.secret = e.Secret
	rc.mu.Unlock()
	var logs testkit.Buffer
	b.run(t, notify.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Schedule: []time.Duration{time.Millisecond}})
	b.request(t, time.Hour)
	rc.next(t)
	rc.next(t)
	waitDelivery(t, b, e.ID, func(d airlock.Delivery) bool { return d.State == airlock.DeliveryFailed })
	out := logs.String()
	if !strings.Contains(out, e.ID) || !strings.Contains(out, "HTTP 503") {
		t.Fatalf("the failures were not logged:\n%s", out)
	}
	key := strings.TrimPrefix(e.Secret, airlock.WebhookSecretPrefix)
	if strings.Contains(out, key) || strings.Contains(out, "query-secret-123") {
		t.Fatalf("a secret reached the log:\n%s", out)
	}
}

// listHook calls after, once, right after the first ListEndpoints: what
// happens between the engine reading the endpoints and reading the events.
type listHook struct {
	notify.Store
	once  sync.Once
	after func()
}

func (h *listHook) ListEndpoints(ctx context.Context, kind airlock.EndpointKind) ([]airlock.Endpoint, error) {
	eps, err := h.Store.ListEndpoints(ctx, kind)
	h.once.Do(h.after)
	return eps, err
}

// TestEndpointCreatedDuringFanOut: an endpoint created after a pass read
// the endpoints, and before it read the events, still gets every event
// committed after its creation (the first request's, here).
func TestEndpointCreatedDuringFanOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, late := newReceiver(t, nil), newReceiver(t, nil)
	b.endpoint(t, first)
	var r airlock.Request
	hook := &listHook{Store: b.store, after: func() {
		b.endpoint(t, late)
		r = b.request(t, time.Hour)
	}}
	sender := notify.NewWebhookSender(notify.WebhookConfig{AllowPrivate: true})
	t.Cleanup(sender.Close)
	e := notify.New(notify.Config{Store: hook, Render: rest.RequestJSON, PollEvery: 10 * time.Millisecond,
		Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointWebhook: sender}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, rc := range []*receiver{first, late} {
		if got := decode(t, rc.next(t).body); got.Type != "approval_request.created" || got.Data.ID != r.ID {
			t.Fatalf("got %+v; want %s created", got, r.ID)
		}
	}
}

// leaseCounter counts a store's lease writes.
type leaseCounter struct {
	notify.Store
	leases atomic.Int64
}

func (s *leaseCounter) LeaseDeliveries(ctx context.Context, p store.LeaseParams) ([]airlock.Delivery, error) {
	s.leases.Add(1)
	return s.Store.LeaseDeliveries(ctx, p)
}

// A worker fed by its own fan-out makes no lease writes: each one is a
// write on the store's one writer, and would find nothing.
func TestHandedDeliveriesNeedNoLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.endpoint(t, rc)
	st := &leaseCounter{Store: b.store}
	var mu sync.Mutex
	changed := make(chan struct{})
	change := func() {
		mu.Lock()
		defer mu.Unlock()
		close(changed)
		changed = make(chan struct{})
	}
	sender := notify.NewWebhookSender(notify.WebhookConfig{AllowPrivate: true})
	t.Cleanup(sender.Close)
	// No poll within the test: every pass comes from a change.
	e := notify.New(notify.Config{Store: st, Render: rest.RequestJSON, PollEvery: time.Hour,
		Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointWebhook: sender},
		Changed: func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return changed }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The worker leases once at its start, which may come before or
	// after its first handed deliveries.
	for range 10 {
		r := b.request(t, time.Hour)
		change()
		if got := decode(t, rc.next(t).body); got.Data.ID != r.ID {
			t.Fatalf("delivered %s, want %s", got.Data.ID, r.ID)
		}
	}
	if n := st.leases.Load(); n > 1 {
		t.Fatalf("%d lease writes for 10 handed deliveries, want the worker's first alone", n)
	}
}
