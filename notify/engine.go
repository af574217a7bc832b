package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// DefaultSchedule is how long after each failed attempt the next one is
// due: about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (each with
// jitter); after the eighth attempt fails the delivery has failed.
var DefaultSchedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// Defaults of Config.
const (
	DefaultDisableAfter = 5 * 24 * time.Hour
	DefaultPollEvery    = time.Second
	DefaultPerEndpoint  = 8
	DefaultLeaseBatch   = 32
	DefaultRemindEvery  = time.Second
	fanOutBatch         = 500
)

// Store is what the engine needs of a store.
type Store interface {
	store.Notify
	ListEvents(ctx context.Context, after int64, limit int) ([]airlock.Event, error)
	GetRequest(ctx context.Context, id string) (airlock.Request, error)
}

// Config configures an Engine.
type Config struct {
	Store Store
	// Senders attempt deliveries, by the kind of endpoint. Endpoints of a
	// kind without one wait.
	Senders map[airlock.EndpointKind]Sender
	// Render writes a request as the API shows it: a webhook's data.
	Render func(airlock.Request) []byte
	// Changed returns a channel closed at this process's next change, so
	// that new events go out at once; other processes' are seen within
	// PollEvery.
	Changed func() <-chan struct{}
	// PollEvery is how often, without a change, the engine looks for new
	// events and due retries (default DefaultPollEvery).
	PollEvery time.Duration
	// Timeout bounds one attempt (default DefaultTimeout); a lease lasts
	// a little longer than a batch of them.
	Timeout time.Duration
	// Schedule is the delay after each failed attempt (default
	// DefaultSchedule); Jitter spreads each delay (default ±20%).
	Schedule []time.Duration
	Jitter   func(time.Duration) time.Duration
	// DisableAfter disables an endpoint that has failed without a success
	// for this long (default DefaultDisableAfter).
	DisableAfter time.Duration
	// PerEndpoint is how many attempts to one endpoint run at once
	// (default DefaultPerEndpoint); endpoints never share them.
	PerEndpoint int
	// LeaseBatch is how many due deliveries a worker leases at once
	// (default DefaultLeaseBatch): a lease is a write, and the attempts'
	// records, made together, share commits.
	LeaseBatch int
	// Remind, when set, records reminders of pending requests as they fall
	// due (checked every RemindEvery, default DefaultRemindEvery).
	Remind      airlock.RemindBefore
	RemindEvery time.Duration
	// Holder names this process in leases (default a random name).
	Holder string
	Logger *slog.Logger
	// Metrics, when set, counts attempts, their latency and the delay
	// from commit to delivery (NewMetrics).
	Metrics *Metrics
	// Now times attempts (default time.Now).
	Now func() time.Time
}

// Engine fans events out into deliveries and works the queue.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	lease time.Duration

	mu      sync.Mutex
	workers map[string]*worker
	// kick makes Run pass at once: an endpoint was created (Wake).
	kick chan struct{}
}

// worker attempts the deliveries of one endpoint.
type worker struct {
	wake chan struct{}
	stop context.CancelFunc
	done chan struct{}

	// handed are deliveries this process's fan-out queued already leased
	// to it: the worker attempts them before leasing any.
	mu     sync.Mutex
	handed []airlock.Delivery

	// unleased is set when the queue may hold due deliveries not handed
	// to the worker: at its start, when the fan-out queued some without
	// handing them, at Wake and at each poll. Otherwise a lease would be
	// a write that finds nothing, and a busy writer's time is what limits
	// the whole server.
	unleased atomic.Bool
}

// take returns the deliveries handed to w, emptying its hand.
func (w *worker) take() []airlock.Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	ds := w.handed
	w.handed = nil
	return ds
}

// handing reports how many deliveries wait in w's hand.
func (w *worker) handing() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.handed)
}

// New returns an engine; Run starts it.
func New(cfg Config) *Engine {
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func(d time.Duration) time.Duration {
			return d - d/5 + time.Duration(rand.Int64N(int64(d/5)*2+1)) // ±20%
		}
	}
	if cfg.DisableAfter <= 0 {
		cfg.DisableAfter = DefaultDisableAfter
	}
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = DefaultPerEndpoint
	}
	if cfg.LeaseBatch <= 0 {
		cfg.LeaseBatch = DefaultLeaseBatch
	}
	cfg.LeaseBatch = max(cfg.LeaseBatch, cfg.PerEndpoint)
	if cfg.RemindEvery <= 0 {
		cfg.RemindEvery = DefaultRemindEvery
	}
	if cfg.Holder == "" {
		cfg.Holder = airlock.NewID("rep_")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Changed == nil {
		cfg.Changed = func() <-chan struct{} { return nil }
	}
	// A lease outlasts a batch of attempts (PerEndpoint at a time, each
	// bounded by Timeout) and the writes that record them.
	rounds := time.Duration((cfg.LeaseBatch + cfg.PerEndpoint - 1) / cfg.PerEndpoint)
	return &Engine{cfg: cfg, log: cfg.Logger, lease: (rounds+1)*cfg.Timeout + 5*time.Second, workers: map[string]*worker{},
		kick: make(chan struct{}, 1)}
}

// Run fans out and delivers until ctx ends.
func (e *Engine) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if !e.cfg.Remind.IsZero() {
		wg.Go(func() { e.remindLoop(ctx) })
	}
	defer wg.Wait()
	defer e.stopWorkers()
	t := time.NewTicker(e.cfg.PollEvery)
	defer t.Stop()
	for {
		changed := e.cfg.Changed()
		if !e.pass(ctx) {
			// No endpoint to deliver to: changes need no look until one
			// is created, which the next poll finds.
			changed = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			// Let the burst this change belongs to commit, and fan it out
			// in one pass.
			select {
			case <-ctx.Done():
				return
			case <-time.After(batchWait):
			}
		case <-t.C:
		case <-e.kick:
		}
	}
}

// batchWait is how long the engine lets changes gather after the first
// one wakes it: each pass costs a few reads and a write whatever it
// carries, and delivery lag grows by this much at most.
const batchWait = 2 * time.Millisecond

// pass reads the endpoints, runs one worker for each enabled one, and
// queues what the events since the cursor give them. It reports whether
// any endpoint is enabled (or the store could not say).
func (e *Engine) pass(ctx context.Context) bool {
	eps, err := e.cfg.Store.ListEndpoints(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("notifications: list endpoints", "err", err)
		}
		return true
	}
	// listed are every enabled endpoint; enabled, those this process can
	// send to. The store refuses a fan-out that leaves out an endpoint it
	// did not list.
	var listed []string
	enabled := eps[:0:0]
	disabled := 0
	for _, ep := range eps {
		if ep.DisabledAt != nil {
			disabled++
			continue
		}
		listed = append(listed, ep.ID)
		if e.cfg.Senders[ep.Kind] != nil {
			enabled = append(enabled, ep)
		}
	}
	e.cfg.Metrics.setDisabled(disabled)
	e.syncWorkers(ctx, enabled)
	if len(enabled) == 0 {
		return false
	}
	for ctx.Err() == nil {
		queued, more, err := e.fanOut(ctx, enabled, listed)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("notifications: fan out events", "err", err)
			}
			return true
		}
		for id := range queued {
			e.wakeWorker(id)
		}
		if !more {
			return true
		}
	}
	return true
}

// fanOut queues the deliveries of one batch of events after the cursor
// to eps, listed being every enabled endpoint. It returns the endpoints
// that got deliveries, and whether more events may wait.
func (e *Engine) fanOut(ctx context.Context, eps []airlock.Endpoint, listed []string) (map[string]bool, bool, error) {
	cursor, err := e.cfg.Store.FanOutCursor(ctx)
	if err != nil {
		return nil, false, err
	}
	// Events up to every endpoint's start go nowhere: skip them.
	from := eps[0].AfterEvent
	for _, ep := range eps[1:] {
		from = min(from, ep.AfterEvent)
	}
	from = max(from, cursor)
	evs, err := e.cfg.Store.ListEvents(ctx, from, fanOutBatch)
	if err != nil || len(evs) == 0 {
		return nil, false, err
	}
	var ds []airlock.Delivery
	now := e.cfg.Now()
	queued := map[string]bool{}
	perEndpoint := map[string]int{}
	rendered := map[string][]byte{} // a request's events in one batch share one read
	for _, ev := range evs {
		typ, ok := airlock.NotifyTypeOf(ev.Type)
		if !ok {
			continue
		}
		var payload []byte
		for _, ep := range eps {
			if ev.ID <= ep.AfterEvent || !ep.Wants(typ) {
				continue
			}
			if payload == nil {
				data, ok := rendered[ev.RequestID]
				if !ok {
					r, err := e.cfg.Store.GetRequest(ctx, ev.RequestID)
					switch {
					case err == nil:
						data = e.cfg.Render(r)
					case airlock.ErrorCode(err) == airlock.CodeNotFound:
						// Requests are never deleted; should one be
						// missing, its event still goes out rather than
						// stall the rest.
						data, _ = json.Marshal(map[string]string{"id": ev.RequestID})
					default:
						return nil, false, err
					}
					rendered[ev.RequestID] = data
				}
				payload = Body(typ, ev.At, data)
			}
			ds = append(ds, airlock.Delivery{ID: airlock.NewClockID(airlock.PrefixDelivery, now), EndpointID: ep.ID, EventID: ev.ID,
				MessageID: airlock.MessageIDFor(ev), Type: typ, RequestID: ev.RequestID, Payload: payload,
				TraceID: ev.TraceID, SpanID: ev.SpanID})
			queued[ep.ID] = true
			perEndpoint[ep.ID]++
		}
	}
	// Deliveries for an endpoint whose worker has room are queued leased
	// to this process and handed to the worker: no lease write, and no
	// wait for the worker's next look. The rest (a catch-up, or a worker
	// still busy with earlier ones) wait in the queue for a lease.
	hand := e.handable(perEndpoint)
	for i := range ds {
		if hand[ds[i].EndpointID] != nil {
			ds[i].LeaseHolder = e.cfg.Holder
		}
	}
	moved, err := e.cfg.Store.QueueDeliveries(ctx, store.QueueParams{After: cursor, Upto: evs[len(evs)-1].ID, Deliveries: ds,
		Listed: listed, LeaseFor: e.handLease()})
	if err != nil {
		return nil, false, err
	}
	if moved {
		e.markUnleased(queued, hand)
	}
	if moved && len(hand) > 0 {
		// A delivery whose endpoint was disabled or deleted meanwhile was
		// not queued; attempting it anyway sends what that endpoint was
		// about to get, once, and its record finds nothing to update.
		for _, d := range ds {
			if w := hand[d.EndpointID]; w != nil {
				w.mu.Lock()
				w.handed = append(w.handed, d)
				w.mu.Unlock()
			}
		}
	}
	if !moved {
		// Another process queued them; its workers (and ours, at the next
		// poll) send them. The next change or poll reads on from where it
		// left the cursor: racing it now would only repeat its reads. Or
		// an endpoint was created since eps were read: the next pass
		// reads them again.
		return nil, false, nil
	}
	return queued, len(evs) == fanOutBatch, nil
}

// handable returns the workers that may be handed this pass's deliveries
// (count by endpoint): those with at most a batch in hand, counting these.
func (e *Engine) handable(count map[string]int) map[string]*worker {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]*worker{}
	for id, n := range count {
		if w := e.workers[id]; w != nil && w.handing()+n <= e.cfg.LeaseBatch {
			out[id] = w
		}
	}
	return out
}

// markUnleased tells the workers of the endpoints in queued but not in
// hand that due deliveries wait for them in the queue.
func (e *Engine) markUnleased(queued map[string]bool, hand map[string]*worker) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id := range queued {
		if w := e.workers[id]; w != nil && hand[id] == nil {
			w.unleased.Store(true)
		}
	}
}

// handLease is how long deliveries handed to a worker are leased: twice a
// batch's lease, since they may wait for the batch the worker is busy
// with before their own.
func (e *Engine) handLease() time.Duration { return 2 * e.lease }

// Body is a webhook's body: {type, timestamp, data}, data being the
// request as the API shows it.
func Body(typ airlock.NotifyType, at time.Time, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	t, _ := json.Marshal(string(typ))
	b.Write(t)
	b.WriteString(`,"timestamp":"`)
	b.WriteString(at.UTC().Format(time.RFC3339Nano))
	b.WriteString(`","data":`)
	if len(data) == 0 {
		data = []byte("{}")
	}
	b.Write(data)
	b.WriteByte('}')
	return b.Bytes()
}

// Wake makes every worker look for due deliveries now, and the engine
// read the endpoints again: a test delivery was queued, or an endpoint
// (a push subscription) created, whose events go out from the next
// change rather than the next poll.
func (e *Engine) Wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.workers {
		w.unleased.Store(true)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (e *Engine) wakeWorker(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := e.workers[id]; w != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// syncWorkers runs one worker per enabled endpoint, stopping those of
// endpoints deleted or disabled.
func (e *Engine) syncWorkers(ctx context.Context, eps []airlock.Endpoint) {
	e.mu.Lock()
	defer e.mu.Unlock()
	live := map[string]bool{}
	for _, ep := range eps {
		live[ep.ID] = true
		if e.workers[ep.ID] != nil {
			continue
		}
		wctx, stop := context.WithCancel(ctx)
		w := &worker{wake: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
		w.unleased.Store(true)
		w.wake <- struct{}{}
		e.workers[ep.ID] = w
		go func() {
			defer close(w.done)
			e.work(wctx, ep, w)
		}()
	}
	for id, w := range e.workers {
		if !live[id] {
			w.stop()
			delete(e.workers, id)
		}
	}
}

func (e *Engine) stopWorkers() {
	e.mu.Lock()
	ws := make([]*worker, 0, len(e.workers))
	for id, w := range e.workers {
		w.stop()
		ws = append(ws, w)
		delete(e.workers, id)
	}
	e.mu.Unlock()
	for _, w := range ws {
		<-w.done
	}
}

// work attempts ep's due deliveries, PerEndpoint at a time, until ctx
// ends. A slow or dead endpoint holds only its own worker.
func (e *Engine) work(ctx context.Context, ep airlock.Endpoint, w *worker) {
	sender := e.cfg.Senders[ep.Kind]
	t := time.NewTicker(e.cfg.PollEvery)
	defer t.Stop()
	// A batch's record is written while the next batch is leased and
	// sent: on a backlog the worker never waits for its own writes. One
	// record at most is in flight, and the deliveries it records stay
	// leased to this worker until it commits, so none is leased twice.
	var recording sync.WaitGroup
	defer recording.Wait()
	// full is whether the last lease took a whole batch: more may be due.
	full := false
	for {
		ds := w.take()
		if len(ds) == 0 && (w.unleased.Swap(false) || full) {
			var err error
			ds, err = e.cfg.Store.LeaseDeliveries(ctx, store.LeaseParams{EndpointID: ep.ID, Holder: e.cfg.Holder, For: e.lease,
				Limit: e.cfg.LeaseBatch})
			if err != nil && ctx.Err() == nil {
				e.log.Warn("notifications: lease deliveries", "endpoint", ep.ID, "err", err)
			}
			full = len(ds) == e.cfg.LeaseBatch
		}
		if len(ds) > 0 {
			next := make(chan airlock.Delivery, len(ds))
			for _, d := range ds {
				next <- d
			}
			close(next)
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				records []store.AttemptParams
			)
			for range min(e.cfg.PerEndpoint, len(ds)) {
				wg.Go(func() {
					for d := range next {
						if p, ok := e.attempt(ctx, sender, ep, d); ok {
							mu.Lock()
							records = append(records, p)
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			recording.Wait()
			recording.Go(func() { e.record(ctx, records) })
			if ctx.Err() == nil {
				continue // more may be due
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
			// Retries falling due, and deliveries other processes
			// queued, are found at each poll.
			w.unleased.Store(true)
		}
	}
}

// record records a batch's attempts in one write: they share its commit.
// An attempt whose lease was taken over meanwhile is not recorded; what it
// sent stands, and the new holder sends again with the same webhook-id.
func (e *Engine) record(ctx context.Context, ps []store.AttemptParams) {
	if len(ps) == 0 {
		return
	}
	// Recorded even when shutting down: what was sent is known, and a
	// record saves the receiver a duplicate.
	if _, err := e.cfg.Store.RecordAttempts(context.WithoutCancel(ctx), ps); err != nil {
		e.log.Warn("notifications: record attempts", "attempts", len(ps), "err", err)
	}
}

// attempt sends d once and returns the record of what came of it; false
// when it was cut short by shutdown (the lease lapses and the delivery is
// attempted again) or when the endpoint is gone (ErrGone: it is deleted
// with its deliveries).
func (e *Engine) attempt(ctx context.Context, sender Sender, ep airlock.Endpoint, d airlock.Delivery) (store.AttemptParams, bool) {
	start := e.cfg.Now()
	actx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	actx, span := startDelivery(actx, ep, d)
	status, err := sender.Send(actx, ep, d)
	endDelivery(span, status, err)
	cancel()
	if ctx.Err() != nil {
		return store.AttemptParams{}, false
	}
	end := e.cfg.Now()
	if errors.Is(err, ErrGone) {
		// The subscription ended: delete it, and its deliveries with it.
		// Should the delete fail, the lease lapses and the next attempt
		// learns the same.
		derr := e.cfg.Store.DeleteEndpoint(context.WithoutCancel(ctx), ep.ID, airlock.ActorNotify)
		if derr != nil && airlock.ErrorCode(derr) != airlock.CodeNotFound {
			e.log.Warn("notifications: delete a gone subscription", "endpoint", ep.ID, "err", derr)
		} else if derr == nil {
			e.log.Info("notifications: subscription gone, deleted", "endpoint", ep.ID, "status", status)
		}
		e.cfg.Metrics.attempted(d, airlock.OutcomeFailed, start, end)
		return store.AttemptParams{}, false
	}
	a := airlock.DeliveryAttempt{At: start.UTC().Truncate(time.Microsecond), Status: status, Latency: end.Sub(start)}
	p := store.AttemptParams{DeliveryID: d.ID, Holder: e.cfg.Holder, Attempt: a, Outcome: airlock.OutcomeDelivered,
		DisableAfter: e.cfg.DisableAfter}
	if err != nil {
		p.Attempt.Error = err.Error()
		n := len(d.Attempts) // failed attempts before this one
		if n < len(e.cfg.Schedule) {
			p.Outcome, p.RetryIn = airlock.OutcomeRetry, e.cfg.Jitter(e.cfg.Schedule[n])
		} else {
			p.Outcome = airlock.OutcomeFailed
		}
		e.log.Info("notification attempt failed", "endpoint", ep.ID, "delivery", d.ID, "webhook_id", d.MessageID,
			"type", d.Type, "attempt", n+1, "status", status, "err", p.Attempt.Error, "retry_in", p.RetryIn)
	}
	e.cfg.Metrics.attempted(d, p.Outcome, start, end)
	return p, true
}

// remindLoop records due reminders every RemindEvery.
func (e *Engine) remindLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.RemindEvery)
	defer t.Stop()
	for {
		for {
			ids, err := e.cfg.Store.RemindDue(ctx, e.cfg.Remind, store.DefaultExpireBatch)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					e.log.Warn("notifications: record reminders", "err", err)
				}
				break
			}
			if len(ids) < store.DefaultExpireBatch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
