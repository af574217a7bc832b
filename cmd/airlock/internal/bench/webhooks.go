package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
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
	// delivery, in microseconds: the engine's and SQLite's (not
	// PostgreSQL's, nor the receiver's, which runs in a process of its
	// own). On a shared machine it says what the drain would reach with a
	// core of its own: 1e6 / it per core.
	CPUPerDeliveryUS float64 `json:"process_cpu_us_per_delivery,omitempty"`
	// Bare is the floor a delivery's cost is held to: the same bodies,
	// signed as a delivery is and POSTed to the same receiver by as many
	// senders as the engine runs, each followed by one conditional row
	// update of its own commit on a store of the same kind (the raw
	// baseline's). CPURatio is CPUPerDeliveryUS over Bare's
	// (docs/performance.md: at most 1.5).
	Bare     *BareDeliveryReport `json:"bare,omitempty"`
	CPURatio float64             `json:"cpu_ratio,omitempty"`
}

// BareDeliveryReport is the bare signed POST and row update a delivery is
// measured against.
type BareDeliveryReport struct {
	Deliveries       int     `json:"deliveries"`
	PerS             float64 `json:"deliveries_per_s"`
	CPUPerDeliveryUS float64 `json:"process_cpu_us_per_delivery,omitempty"`
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
	rc, err := startReceivers(ctx, cfg.Progress)
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
	before := rc.received()
	if err := rc.startRecording(time.Now()); err != nil {
		return err
	}
	if wr.Lag, err = load(rate); err != nil {
		return err
	}
	// Every successful lifecycle commits two events (created, approved),
	// each delivered to every endpoint.
	want := 2 * wr.Lag.Ops * int64(cfg.Webhooks)
	waitReceived(ctx, rc, func() bool { return rc.received()-before >= want }, settleBound)
	lags, err := rc.stopRecording()
	if err != nil {
		return err
	}
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

// waitReceived waits until done or bound passes, looking every 10 ms,
// or until rc cannot be asked.
func waitReceived(ctx context.Context, rc *receivers, done func() bool, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for !done() && rc.failed() == nil && time.Now().Before(deadline) && ctx.Err() == nil {
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
	rc, err := startReceivers(ctx, cfg.Progress)
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
		// The store first: asking the receivers costs this process a
		// round trip of its own.
		if b, err := st.DeliveryBacklog(ctx); err == nil && b.Pending == 0 && rc.received() >= int64(cfg.Backlog) {
			break
		}
		if err := rc.failed(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d deliveries received after %s", rc.received(), cfg.Backlog, drainBound)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(5 * time.Millisecond) // polling the engine, which runs on its own
	}
	cpu1, elapsed := cpuTime(), time.Since(start)
	rep := &DrainReport{Deliveries: cfg.Backlog, ElapsedS: round(elapsed.Seconds(), 3),
		PerS: round(float64(cfg.Backlog)/elapsed.Seconds(), 1), Attempts: rc.received()}
	if cpu0 >= 0 && cpu1 >= cpu0 {
		rep.CPUPerDeliveryUS = round(float64((cpu1-cpu0).Microseconds())/float64(cfg.Backlog), 1)
	}
	stop()
	<-done
	n := min(cfg.Backlog, bareMax)
	fmt.Fprintf(cfg.Progress, "webhooks: %d bare signed POSTs, each with a row update, to compare\n", n)
	bare, err := runBareDeliveries(ctx, cfg, rc.url+"/hook/bare", ep.Secret, n, payload)
	if err != nil {
		return nil, fmt.Errorf("bare deliveries: %w", err)
	}
	rep.Bare = bare
	if bare.CPUPerDeliveryUS > 0 && rep.CPUPerDeliveryUS > 0 {
		rep.CPURatio = round(rep.CPUPerDeliveryUS/bare.CPUPerDeliveryUS, 2)
	}
	return rep, rc.failed()
}

// bareMax bounds the bare deliveries: enough for a steady CPU figure.
const bareMax = 20_000

// bareSenders is how many bare deliveries are in flight at once: as many
// as the delivery engine sends at once (notify's worker).
const bareSenders = 8

// runBareDeliveries is the floor of a delivery's cost: n bodies, each
// signed as notify signs a delivery, POSTed to url over kept-alive
// connections by bareSenders senders, and each followed by a conditional
// update of one row in a raw store of cfg.DB's kind, its own commit. The
// rows are inserted first, unmeasured.
func runBareDeliveries(ctx context.Context, cfg Config, url, secret string, n int, payload func(int) []byte) (*BareDeliveryReport, error) {
	rs, err := openRaw(ctx, cfg, "bare")
	if err != nil {
		return nil, err
	}
	defer rs.close()
	run := randomHex(4)
	id := func(i int) string { return fmt.Sprintf("bare_%s_%d", run, i) }
	bodies := make([][]byte, n)
	for i := range n {
		if err := rs.insert(ctx, id(i), id(i), rawArguments); err != nil {
			return nil, err
		}
		bodies[i] = payload(i)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: bareSenders}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		failed  error
	)
	send := func(i int) error {
		msgID := "msg_" + id(i)
		ts := time.Now().Unix()
		sig, err := notify.Sign(secret, msgID, ts, bodies[i])
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(bodies[i]))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(notify.HeaderID, msgID)
		req.Header.Set(notify.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(notify.HeaderSignature, sig)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("POST %s: %s", url, resp.Status)
		}
		return rs.approve(ctx, id(i))
	}
	cpu0, start := cpuTime(), time.Now()
	for range bareSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := send(i); err != nil {
					errOnce.Do(func() { failed = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	cpu1, elapsed := cpuTime(), time.Since(start)
	if failed != nil {
		return nil, failed
	}
	rep := &BareDeliveryReport{Deliveries: n, PerS: round(float64(n)/elapsed.Seconds(), 1)}
	if cpu0 >= 0 && cpu1 >= cpu0 {
		rep.CPUPerDeliveryUS = round(float64((cpu1-cpu0).Microseconds())/float64(n), 1)
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
