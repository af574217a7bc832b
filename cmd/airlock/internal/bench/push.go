package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/pushrecv"
)

// The push scenario measures Web Push's two targets (docs/performance.md,
// "What Web Push costs") on the run's own servers, in two parts:
//
//  1. push_ratio: the lifecycle (create → approve → read) with the
//     delivery engine running and no push subscription, over the same
//     with the engine stopped, in interleaved passes on the same warm
//     servers (interleave.go). What a server with push built in costs
//     while nobody has subscribed (target ≥ 0.98).
//  2. Push lag: a push service on this machine's loopback (pushrecv)
//     that checks every push's VAPID signature and decrypts it with its
//     subscription's keys, pushSubscriptions subscriptions of the run's
//     reviewer, then creates as fast as the clients go (the maximum),
//     then creates paced at half of it. Lag is from each request's
//     created_at — the instant its create's transaction stamped on it and
//     on its event, as webhooks' lag runs from the event's timestamp —
//     until the push service has decrypted its push (target p99 ≤ 1 s).
//     A push carrying anything beyond {request_id, tool, deadline_at}, or
//     one that does not verify or decrypt, fails the run.
//
// The ratio comes first: it needs no subscription, and the lag part
// leaves them in place.

// pushOrder is the push scenario's measured passes: whether the delivery
// engine runs in each.
var pushOrder = [...]bool{true, false, false, true}

// pushSubscriptions is how many browsers the run's reviewer subscribes:
// each create is pushed to every one.
const pushSubscriptions = 2

// PushReport is what the push scenario measured.
type PushReport struct {
	// Passes are the lifecycle passes of the first part, with the
	// delivery engine running (Deliverer) or stopped, no subscription.
	Passes []PushPass `json:"passes"`
	// WithDeliverer and WithoutDeliverer are the passes of each state
	// summed; PushRatio is the first's ops/s over the second's (target ≥
	// 0.98), PassSpread as in ClaimReport, DelivererServerCPUUS the
	// server CPU per lifecycle with the engine less without.
	WithDeliverer        Result  `json:"with_deliverer"`
	WithoutDeliverer     Result  `json:"without_deliverer"`
	PushRatio            float64 `json:"push_ratio"`
	PassSpread           float64 `json:"pass_spread,omitempty"`
	DelivererServerCPUUS float64 `json:"deliverer_server_cpu_us_per_op,omitempty"`
	// Subscriptions are the reviewer's subscriptions in the second part.
	Subscriptions int `json:"subscriptions"`
	// MaxCreates is the creates as fast as the clients go, and
	// PacedCreates at Rate, half of MaxCreates' ops/s.
	MaxCreates   Result  `json:"max_creates"`
	PacedCreates Result  `json:"paced_creates"`
	Rate         float64 `json:"rate"`
	// LagFrom says where lag starts: "created_at".
	LagFrom string `json:"lag_from"`
	// LagMS is from each paced request's created_at to the push service
	// decrypting its push, one sample per request and subscription.
	LagMS Latency `json:"lag_ms"`
	// Messages counts every push the push service got, both phases;
	// Lagged those of the paced creates, first arrivals only; Duplicates
	// pushes of a request to a subscription that had it already;
	// Undelivered paced pushes still missing after settleBound.
	Messages    int64 `json:"messages"`
	Lagged      int64 `json:"lagged"`
	Duplicates  int64 `json:"duplicates,omitempty"`
	Undelivered int64 `json:"undelivered,omitempty"`
	// WithArguments counts pushes carrying more than {request_id, tool,
	// deadline_at}: any fails the run, so a report says 0.
	WithArguments int64 `json:"with_arguments"`
}

// PushPass is one lifecycle pass of the push scenario.
type PushPass struct {
	Deliverer bool `json:"deliverer"`
	Result
}

var errPushRemote = errors.New("--scenario push needs the run's own servers (no --url): it stops and starts their delivery engine, and its push service is on this machine's loopback")

// validatePush checks what only the push scenario needs.
func (c Config) validatePush() error {
	if c.Scenario != Push {
		return nil
	}
	switch {
	case len(c.URLs) > 0:
		return errPushRemote
	case c.Count < 2*(len(pushOrder)+2):
		return fmt.Errorf("--count must be at least %d for push: half goes to %d lifecycle passes, half to creates at the maximum and at half of it", 2*(len(pushOrder)+2), len(pushOrder))
	case c.Duration < 200*time.Millisecond:
		return fmt.Errorf("--duration must be at least 200ms for push: it runs a warm-up, %d passes and two create phases within it", len(pushOrder))
	}
	return nil
}

// pushLog is what the push service got, as the run reads it.
type pushLog struct {
	mu sync.Mutex
	// first is when each (request, subscription) first arrived.
	first      map[pushKey]time.Time
	messages   int64
	duplicates int64
	// refused are pushes that did not verify or decrypt; leaks those
	// carrying more than they may; vapid the keys pushes were signed with.
	refused, leaks []string
	nRefused       int64
	nLeaks         int64
	vapid          map[string]bool
	changed        chan struct{}
}

type pushKey struct{ request, path string }

func newPushLog() *pushLog {
	return &pushLog{first: map[pushKey]time.Time{}, vapid: map[string]bool{}, changed: make(chan struct{})}
}

// add records one push; it is the push service's handler.
func (l *pushLog) add(m pushrecv.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.messages++
	defer func() {
		close(l.changed)
		l.changed = make(chan struct{})
	}()
	if m.Err != nil {
		l.nRefused++
		if len(l.refused) < 5 {
			l.refused = append(l.refused, fmt.Sprintf("%s: %v", m.Path, m.Err))
		}
		return
	}
	l.vapid[m.VAPIDKey] = true
	id, err := pushrecv.CheckMessage(m.Plain)
	if err != nil {
		l.nLeaks++
		if len(l.leaks) < 5 {
			l.leaks = append(l.leaks, err.Error())
		}
		return
	}
	k := pushKey{id, m.Path}
	if _, ok := l.first[k]; ok {
		l.duplicates++
		return
	}
	l.first[k] = m.At
}

// waitFor waits until ok holds of the log or bound passes.
func (l *pushLog) waitFor(ctx context.Context, bound time.Duration, ok func() bool) {
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		l.mu.Lock()
		done, changed := ok(), l.changed
		l.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// runPush runs the push scenario.
func runPush(ctx context.Context, cfg Config, t *target, rep *Report) error {
	run := randomHex(4)
	pr := &PushReport{Subscriptions: pushSubscriptions, LagFrom: "created_at"}
	rep.Push = pr

	// Part 1: the lifecycle with the engine running and stopped, no
	// subscription; half the run's bounds.
	half := cfg
	half.Duration, half.Count = cfg.Duration/2, cfg.Count/2
	pass := func(phase int, _ bool, duration time.Duration, count int) (Result, error) {
		return runLoad(ctx, cfg.Clients, duration, count, 0, t.serverCPU(), func(ctx context.Context, i int) (clientOp, func(), error) {
			base := t.base(i)
			inst, err := t.newInstance(ctx, base, fmt.Sprintf("bench %s-%d client %d", run, phase, i))
			if err != nil {
				return nil, nil, err
			}
			return lifecycleOp(t, base, inst, run, phase, false), nil, nil
		})
	}
	results, err := runInterleaved(ctx, half, t, "push", "delivery engine", pushOrder[:], t.setNotifications, pass)
	if err != nil {
		return err
	}
	var on, off []Result
	for i, res := range results {
		pr.Passes = append(pr.Passes, PushPass{Deliverer: pushOrder[i], Result: res})
		if pushOrder[i] {
			on = append(on, res)
		} else {
			off = append(off, res)
		}
	}
	pr.WithDeliverer, pr.WithoutDeliverer = mergeResults(on), mergeResults(off)
	if pr.WithoutDeliverer.OpsPerS > 0 {
		pr.PushRatio = round(pr.WithDeliverer.OpsPerS/pr.WithoutDeliverer.OpsPerS, 3)
	}
	pr.PassSpread = round(max(passSpread(on), passSpread(off)), 3)
	if pr.WithDeliverer.ServerCPUPerOpUS > 0 && pr.WithoutDeliverer.ServerCPUPerOpUS > 0 {
		pr.DelivererServerCPUUS = round(pr.WithDeliverer.ServerCPUPerOpUS-pr.WithoutDeliverer.ServerCPUPerOpUS, 1)
	}

	// Part 2: subscriptions, then creates at the maximum and at half.
	log := newPushLog()
	rc, err := pushrecv.Start(log.add)
	if err != nil {
		return err
	}
	defer rc.Close()
	var key struct {
		PublicKey string `json:"public_key"`
	}
	if err := t.call(ctx, "GET", t.urls[0], "/v1/push/vapid-public-key", t.reviewer, "", &key); err != nil {
		return fmt.Errorf("read the server's VAPID key: %w", err)
	}
	for i := range pushSubscriptions {
		in, err := rc.Subscribe(fmt.Sprintf("/push/%s/%d", run, i))
		if err != nil {
			return err
		}
		body, _ := json.Marshal(in)
		if err := t.call(ctx, "POST", t.urls[0], "/v1/push/subscriptions", t.reviewer, string(body), nil); err != nil {
			return fmt.Errorf("subscribe the run's reviewer to pushes: %w", err)
		}
	}
	// created keeps each paced request's created_at; only the paced
	// phase records.
	var (
		mu      sync.Mutex
		created = map[string]time.Time{}
		record  bool
	)
	phase := len(pushOrder) + 1
	creates := func(duration time.Duration, count int, rate float64) (Result, error) {
		phase++
		ph := phase
		return runLoad(ctx, cfg.Clients, duration, count, rate, t.serverCPU(), func(ctx context.Context, i int) (clientOp, func(), error) {
			base := t.base(i)
			inst, err := t.newInstance(ctx, base, fmt.Sprintf("bench %s-%d client %d", run, ph, i))
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context, n int64) error {
				r, err := t.create(ctx, base, inst, fmt.Sprintf("bench-%s-%d-%d", run, ph, n), requestBody(n, "1h"))
				if err != nil {
					return err
				}
				if r.State != "pending" || r.CreatedAt.IsZero() {
					return fmt.Errorf("created %s is %s at %v, want pending with its created_at", r.ID, r.State, r.CreatedAt)
				}
				mu.Lock()
				if record {
					created[r.ID] = r.CreatedAt
				}
				mu.Unlock()
				return nil
			}, nil, nil
		})
	}
	quarter, countQuarter := (cfg.Duration-half.Duration)/2, (cfg.Count-half.Count)/2
	fmt.Fprintf(cfg.Progress, "push: creates pushed to %d subscriptions, as fast as %d clients go, up to %s or %d operations, to find the maximum\n",
		pushSubscriptions, cfg.Clients, quarter, countQuarter)
	if pr.MaxCreates, err = creates(quarter, countQuarter, 0); err != nil {
		return err
	}
	// Let the maximum's pushes arrive, so that the lag is the paced
	// phase's own.
	want := pr.MaxCreates.Ops * pushSubscriptions
	log.waitFor(ctx, settleBound, func() bool { return int64(len(log.first))+log.nLeaks+log.nRefused >= want })
	pr.Rate = math.Round(pr.MaxCreates.OpsPerS / 2)
	if pr.Rate < 1 {
		return fmt.Errorf("push: the maximum was %.2f creates/s: too few to pace at half of it", pr.MaxCreates.OpsPerS)
	}
	fmt.Fprintf(cfg.Progress, "push: creates paced at %g/s (half the maximum), up to %s or %d operations; lag from created_at to the push decrypted\n",
		pr.Rate, quarter, countQuarter)
	mu.Lock()
	record = true
	mu.Unlock()
	pr.PacedCreates, err = creates(quarter, countQuarter, pr.Rate)
	mu.Lock()
	record = false
	mu.Unlock()
	if err != nil {
		return err
	}
	paths := make([]string, pushSubscriptions)
	for i := range paths {
		paths[i] = fmt.Sprintf("/push/%s/%d", run, i)
	}
	arrived := func() (lags samples, missing int64) {
		for id, at := range created {
			for _, p := range paths {
				if got, ok := log.first[pushKey{id, p}]; ok {
					lags = append(lags, got.Sub(at))
				} else {
					missing++
				}
			}
		}
		return lags, missing
	}
	log.waitFor(ctx, settleBound, func() bool { _, missing := arrived(); return missing == 0 })
	log.mu.Lock()
	defer log.mu.Unlock()
	lags, missing := arrived()
	pr.LagMS, pr.Lagged, pr.Undelivered = lags.latency(), int64(len(lags)), missing
	pr.Messages, pr.Duplicates, pr.WithArguments = log.messages, log.duplicates, log.nLeaks
	rep.Result, rep.Max, rep.Bounds.Rate = pr.PacedCreates, &pr.MaxCreates, pr.Rate
	switch {
	case log.nLeaks > 0:
		return fmt.Errorf("push: %d of %d pushes carried more than {request_id, tool, deadline_at} — arguments, reasoning or context must never leave through a push service: %v",
			log.nLeaks, log.messages, log.leaks)
	case log.nRefused > 0:
		return fmt.Errorf("push: %d of %d pushes did not verify or decrypt with their subscription's keys: %v", log.nRefused, log.messages, log.refused)
	case len(log.vapid) != 1 || !log.vapid[key.PublicKey]:
		return fmt.Errorf("push: pushes were signed with %d keys, want the server's one (%s)", len(log.vapid), key.PublicKey)
	case pr.Lagged == 0:
		return fmt.Errorf("push: none of the %d paced creates was pushed within %s", len(created), settleBound)
	}
	return nil
}

// setNotifications starts or stops the delivery engine in every server of
// the run: in its child processes, or in this one.
func (t *target) setNotifications(on bool) error {
	if len(t.children) == 0 && len(t.servers) == 0 {
		return errPushRemote
	}
	for _, c := range t.children {
		var a childPush
		if err := c.switchChild("push "+onOff(on), &a); err != nil {
			return err
		}
		if a.Error != "" || a.Push != on {
			return fmt.Errorf("the benchmark's server process %d did not switch its delivery engine %s: %s", c.pid, onOff(on), a.Error)
		}
	}
	for _, s := range t.servers {
		if err := s.notifications(on); err != nil {
			return err
		}
	}
	return nil
}

// childPush answers "push on" and "push off": whether the child's
// delivery engine runs now, or why it could not switch.
type childPush struct {
	Push  bool   `json:"push"`
	Error string `json:"error,omitempty"`
}

// pushCommand answers a child's "push on" or "push off" with set.
func pushCommand(line string, set func(on bool) error) childPush {
	on := line == "push on"
	if set == nil {
		return childPush{Error: "this server has no delivery engine"}
	}
	if err := set(on); err != nil {
		return childPush{Error: err.Error()}
	}
	return childPush{Push: on}
}

// writeRows adds the push scenario's lifecycle rows.
func (pr *PushReport) writeRows(row func(name string, res Result)) {
	row("lifecycle, delivery engine on", pr.WithDeliverer)
	row("lifecycle, delivery engine off", pr.WithoutDeliverer)
	for i, p := range pr.Passes {
		row(fmt.Sprintf("  pass %d, engine %s", i+1, onOff(p.Deliverer)), p.Result)
	}
}

// writeSummary says what the push scenario's rows mean.
func (pr *PushReport) writeSummary(w io.Writer) {
	order := make([]bool, len(pr.Passes))
	for i, p := range pr.Passes {
		order[i] = p.Deliverer
	}
	comparison{
		scenario: "push", what: "create → approve → read with no push subscription, the delivery engine running and stopped",
		ratioName: "push_ratio", ratioOf: "lifecycles/s with the engine ÷ without", cost: "the engine's cost", target: 0.98,
		cpuOf: "server CPU per lifecycle", on: "with the engine", off: "without",
		ratio: pr.PushRatio, spread: pr.PassSpread, order: order,
		onCPU: pr.WithDeliverer.ServerCPUPerOpUS, offCPU: pr.WithoutDeliverer.ServerCPUPerOpUS, deltaCPU: pr.DelivererServerCPUUS,
	}.write(w)
	fmt.Fprintf(w, "push lag, %s → push decrypted, creates at %g/s (half the maximum, %.0f/s) to %d subscriptions: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms over %d pushes (target p99 ≤ 1 s)",
		pr.LagFrom, pr.Rate, pr.MaxCreates.OpsPerS, pr.Subscriptions, pr.LagMS.P50, pr.LagMS.P90, pr.LagMS.P99, pr.LagMS.Max, pr.Lagged)
	if pr.Undelivered > 0 {
		fmt.Fprintf(w, "; %d not pushed within %s", pr.Undelivered, settleBound)
	}
	fmt.Fprintf(w, "\npushes received: %d, every one VAPID-verified and decrypted; %d carried more than {request_id, tool, deadline_at}", pr.Messages, pr.WithArguments)
	if pr.Duplicates > 0 {
		fmt.Fprintf(w, "; %d duplicates", pr.Duplicates)
	}
	fmt.Fprintln(w)
}
