package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
)

// Bounds and defaults of the webhook part of a lifecycle run.
const (
	// MaxWebhooks bounds --webhooks: receivers, one endpoint each.
	MaxWebhooks = 64
	// DefaultBacklog is the drain's backlog: deliveries queued to one
	// endpoint before the engine starts.
	DefaultBacklog = 100_000
	// MaxBacklog bounds --backlog.
	MaxBacklog = 1_000_000
	// drainBound bounds the drain, whatever the backlog.
	drainBound = 10 * time.Minute
	// settleBound is how long the lag phase waits, after its load, for
	// the last deliveries.
	settleBound = 30 * time.Second
)

// WebhookReport is what --webhooks measured (docs/performance.md).
type WebhookReport struct {
	// Endpoints is --webhooks: local receivers subscribed to every event.
	Endpoints int `json:"endpoints"`
	// Without, One and All are the lifecycle as fast as the clients go,
	// one after the other in this run: with no endpoint, with one, and
	// (when Endpoints > 1) with all of them. OneToWithout and AllToWithout
	// are their ops/s over Without's.
	Without      Result  `json:"without"`
	One          Result  `json:"one"`
	OneToWithout float64 `json:"one_to_without"`
	All          *Result `json:"all,omitempty"`
	AllToWithout float64 `json:"all_to_without,omitempty"`
	// Lag is the lifecycle paced at half of the fastest run with every
	// endpoint, and LagMS the time from each event's commit (its
	// "timestamp") to its receiver getting it, over every delivery of
	// events committed in that run. Undelivered counts the deliveries
	// still missing when the lag phase gave up waiting (settleBound).
	Lag         Result  `json:"lag"`
	LagMS       Latency `json:"lag_ms"`
	Delivered   int64   `json:"delivered"`
	Undelivered int64   `json:"undelivered,omitempty"`
	// Drain is the backlog drain.
	Drain *DrainReport `json:"drain,omitempty"`
}

// DrainReport is a backlog of deliveries to one endpoint drained by the
// delivery engine: queued first, then timed from the engine's start to
// the last one recorded as delivered.
type DrainReport struct {
	Deliveries int     `json:"deliveries"`
	ElapsedS   float64 `json:"elapsed_s"`
	PerS       float64 `json:"deliveries_per_s"`
	// Attempts counts what the receiver got: more than Deliveries only if
	// some were sent twice.
	Attempts int64 `json:"attempts"`
	// CPUPerDeliveryUS is this process's CPU time during the drain per
	// delivery, in microseconds: the engine's, SQLite's and the
	// receiver's (not PostgreSQL's). On a shared machine it says what the
	// drain would reach with a core of its own: 1e6 / it per core.
	CPUPerDeliveryUS float64 `json:"process_cpu_us_per_delivery,omitempty"`
}

// receivers are the run's local webhook receivers: one HTTP server,
// one path per endpoint. Each delivery's lag is recorded while recording
// is on, for events committed from since.
type receivers struct {
	srv *http.Server
	url string

	got atomic.Int64

	mu     sync.Mutex
	record bool
	since  time.Time
	lags   samples
}

func startReceivers() (*receivers, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc := &receivers{url: "http://" + ln.Addr().String()}
	rc.srv = &http.Server{Handler: http.HandlerFunc(rc.serve), ReadHeaderTimeout: 10 * time.Second}
	go rc.srv.Serve(ln)
	return rc, nil
}

func (rc *receivers) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	rc.got.Add(1)
	w.WriteHeader(http.StatusNoContent)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.record {
		return
	}
	if at, ok := bodyTimestamp(body); ok && !at.Before(rc.since) {
		rc.lags = append(rc.lags, now.Sub(at))
	}
}

// bodyTimestamp reads a webhook body's "timestamp": its event's commit.
func bodyTimestamp(body []byte) (time.Time, bool) {
	const key = `"timestamp":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return at, err == nil
}

func (rc *receivers) startRecording(since time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.record, rc.since, rc.lags = true, since, nil
}

func (rc *receivers) stopRecording() samples {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.record = false
	return rc.lags
}

func (rc *receivers) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc.srv.Shutdown(ctx)
}

// addEndpoints creates n webhook endpoints, subscribed to everything, on
// the in-process servers.
func (t *target) addEndpoints(ctx context.Context, rc *receivers, n int) error {
	for range n {
		var out struct {
			ID string `json:"id"`
		}
		path := fmt.Sprintf("/hook/%d", len(t.webhooks))
		if err := t.call(ctx, "POST", t.urls[0], "/v1/webhooks", t.admin, fmt.Sprintf(`{"url":%q,"description":"airlock bench"}`, rc.url+path), &out); err != nil {
			return fmt.Errorf("create a webhook endpoint: %w", err)
		}
		t.webhooks = append(t.webhooks, out.ID)
	}
	return nil
}

// runWebhooks runs the lifecycle without, with one and with every
// endpoint, then paced for the lag, then the backlog drain. load runs one
// lifecycle phase at rate (0: as fast as the clients go).
func runWebhooks(ctx context.Context, cfg Config, t *target, rep *Report, load func(rate float64) (Result, error)) error {
	wr := &WebhookReport{Endpoints: cfg.Webhooks}
	rc, err := startReceivers()
	if err != nil {
		return err
	}
	defer rc.close()
	fmt.Fprintf(cfg.Progress, "webhooks: lifecycle with no endpoint, %d clients, up to %s\n", cfg.Clients, cfg.Duration)
	if wr.Without, err = load(0); err != nil {
		return err
	}
	if err := t.addEndpoints(ctx, rc, 1); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Progress, "webhooks: lifecycle with one endpoint\n")
	if wr.One, err = load(0); err != nil {
		return err
	}
	fastest := wr.One
	if wr.Without.OpsPerS > 0 {
		wr.OneToWithout = round(wr.One.OpsPerS/wr.Without.OpsPerS, 3)
	}
	if cfg.Webhooks > 1 {
		if err := t.addEndpoints(ctx, rc, cfg.Webhooks-1); err != nil {
			return err
		}
		fmt.Fprintf(cfg.Progress, "webhooks: lifecycle with %d endpoints\n", cfg.Webhooks)
		all, err := load(0)
		if err != nil {
			return err
		}
		wr.All, fastest = &all, all
		if wr.Without.OpsPerS > 0 {
			wr.AllToWithout = round(all.OpsPerS/wr.Without.OpsPerS, 3)
		}
	}
	// Let the earlier phases' deliveries go out, so that the lag is this
	// phase's own.
	waitReceived(ctx, rc, func() bool { return backlogEmpty(ctx, t) }, settleBound)
	rate := max(1, float64(int(fastest.OpsPerS/2)))
	fmt.Fprintf(cfg.Progress, "webhooks: lifecycle paced at %g/s (half the fastest with %d endpoints), delivery lag from commit\n", rate, cfg.Webhooks)
	before := rc.got.Load()
	rc.startRecording(time.Now())
	if wr.Lag, err = load(rate); err != nil {
		return err
	}
	// Every successful lifecycle commits two events (created, approved),
	// each delivered to every endpoint.
	want := 2 * wr.Lag.Ops * int64(cfg.Webhooks)
	waitReceived(ctx, rc, func() bool { return rc.got.Load()-before >= want }, settleBound)
	lags := rc.stopRecording()
	wr.Delivered = int64(len(lags))
	wr.Undelivered = max(0, want-wr.Delivered)
	wr.LagMS = lags.latency()
	rep.Webhooks = wr
	if cfg.Backlog > 0 {
		fmt.Fprintf(cfg.Progress, "webhooks: draining a backlog of %d deliveries to one endpoint\n", cfg.Backlog)
		d, err := runDrain(ctx, cfg)
		if err != nil {
			return fmt.Errorf("backlog drain: %w", err)
		}
		wr.Drain = d
	}
	return nil
}

// waitReceived waits until done or bound passes, looking every 10 ms.
func waitReceived(ctx context.Context, _ *receivers, done func() bool, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for !done() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // polling what a server does on its own time
	}
}

// backlogEmpty reports whether the in-process store has nothing left to
// deliver.
func backlogEmpty(ctx context.Context, t *target) bool {
	if t.notifyStore == nil {
		return true
	}
	b, err := t.notifyStore.DeliveryBacklog(ctx)
	return err == nil && b.Pending == 0 && b.Unqueued == 0
}

// runDrain queues cfg.Backlog deliveries to one endpoint on a store of its
// own (of cfg.DB's kind), then starts a delivery engine and times it until
// the last is recorded as delivered.
func runDrain(ctx context.Context, cfg Config) (*DrainReport, error) {
	st, closeStore, err := openDrainStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	rc, err := startReceivers()
	if err != nil {
		return nil, err
	}
	defer rc.close()
	ep, err := st.CreateEndpoint(ctx, airlock.Endpoint{ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook,
		URL: rc.url + "/hook/drain", Secret: airlock.NewWebhookSecret(), CreatedBy: "airlock-bench"})
	if err != nil {
		return nil, err
	}
	// The backlog: deliveries as the fan-out queues them, 1,000 per write.
	payload := func(i int) []byte {
		return notify.Body(airlock.NotifyCreated, time.Now(), []byte(fmt.Sprintf(`{"id":"apr_bench%d","state":"pending"}`, i)))
	}
	cursor, err := st.FanOutCursor(ctx)
	if err != nil {
		return nil, err
	}
	for i := 0; i < cfg.Backlog; {
		var ds []airlock.Delivery
		for ; i < cfg.Backlog && len(ds) < 1000; i++ {
			ev := int64(i + 1)
			ds = append(ds, airlock.Delivery{ID: airlock.NewID(airlock.PrefixDelivery), EndpointID: ep.ID, EventID: ev,
				MessageID: airlock.MessageIDFor(airlock.Event{ID: ev}), Type: airlock.NotifyCreated, RequestID: fmt.Sprintf("apr_bench%d", i), Payload: payload(i)})
		}
		if _, err := st.QueueDeliveries(ctx, store.QueueParams{After: cursor, Upto: cursor, Deliveries: ds, Listed: []string{ep.ID}}); err != nil {
			return nil, err
		}
	}
	sender := notify.NewWebhookSender(notify.WebhookConfig{AllowPrivate: true})
	defer sender.Close()
	e := notify.New(notify.Config{Store: st, Render: rest.RequestJSON, Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointWebhook: sender},
		Logger: slog.New(slog.NewTextHandler(cfg.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	cpu0 := cpuTime()
	start := time.Now()
	go func() { defer close(done); e.Run(runCtx) }()
	defer func() { stop(); <-done }()
	deadline := start.Add(drainBound)
	for {
		if rc.got.Load() >= int64(cfg.Backlog) {
			b, err := st.DeliveryBacklog(ctx)
			if err == nil && b.Pending == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d deliveries received after %s", rc.got.Load(), cfg.Backlog, drainBound)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(5 * time.Millisecond) // polling the engine, which runs on its own
	}
	elapsed := time.Since(start)
	rep := &DrainReport{Deliveries: cfg.Backlog, ElapsedS: round(elapsed.Seconds(), 3),
		PerS: round(float64(cfg.Backlog)/elapsed.Seconds(), 1), Attempts: rc.got.Load()}
	if cpu1 := cpuTime(); cpu0 >= 0 && cpu1 >= cpu0 {
		rep.CPUPerDeliveryUS = round(float64((cpu1-cpu0).Microseconds())/float64(cfg.Backlog), 1)
	}
	return rep, nil
}

// drainStore is what the drain needs of a store.
type drainStore interface {
	notify.Store
	Close() error
}

// openDrainStore opens a fresh store of cfg.DB's kind for the drain: a
// temporary SQLite file, or a fresh PostgreSQL schema, removed after.
func openDrainStore(ctx context.Context, cfg Config) (drainStore, func(), error) {
	if isPostgres(cfg.DB) {
		schema := "airlock_bench_drain_" + randomHex(6)
		s, err := postgres.Open(ctx, cfg.DB, postgres.WithSchema(schema))
		if err != nil {
			return nil, nil, fmt.Errorf("open the PostgreSQL store (schema %s): %w", schema, err)
		}
		return s, func() { s.Close(); dropSchema(context.WithoutCancel(ctx), cfg.DB, schema, cfg.Progress) }, nil
	}
	path, remove, err := sqlitePath("", "drain.db")
	if err != nil {
		return nil, nil, err
	}
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		remove()
		return nil, nil, err
	}
	return s, func() { s.Close(); remove() }, nil
}

var errWebhooksRemote = errors.New("--webhooks needs in-process servers (no --url): their receivers are on this machine's loopback")
