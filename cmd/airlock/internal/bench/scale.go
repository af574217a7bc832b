package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/jackc/pgx/v5"
)

// The scale scenario (docs/performance.md, "Scale") puts Count pending
// requests in a PostgreSQL store, spread over instances of at most
// scalePerInstance, then measures across the replicas what a reviewer and
// an agent read while that backlog stands: the reviewer's first page of
// pending requests, at the inbox's page size, and an instance with its
// pending count.
//
// The requests are seeded through the store contract (CreateRequest),
// from scaleWriters concurrent writers, not through the HTTP API (a
// million creates over HTTP take too long to be a setup step) and not by
// a set-based INSERT in SQL: CreateRequest writes each request's
// request.created event and audit-log leaf and keeps every CHECK and
// every index, so the store holds what a million creates through the API
// would have left, and nothing the schema's invariants forbid.

// Scale scenario parameters.
const (
	// DefaultScalePending is the scale scenario's pending requests when
	// Count is unset; MaxPending bounds them.
	DefaultScalePending = 100_000
	// scalePerInstance is the most pending requests one instance holds.
	scalePerInstance = 1000
	// scaleWriters are the concurrent seeding writers, one store
	// connection each.
	scaleWriters = 16
	// scaleWindow is the seeded requests' window: far beyond any run, so
	// that none expires while it measures.
	scaleWindow = 24 * time.Hour
	// scaleDueShare: after the reads, Count/scaleDueShare more requests
	// are seeded due together, and their expiry measured over the
	// backlog.
	scaleDueShare = 10
	// scaleSeedRate is the least seeding rate the setup bound allows for.
	scaleSeedRate = 200
)

// inboxPageSize is the page the inbox asks for.
const inboxPageSize = provider.MaxPageSize

// ScaleReport is what the scale scenario measured.
type ScaleReport struct {
	// Pending requests were seeded over Instances instances, at most
	// PerInstance each.
	Pending     int `json:"pending"`
	Instances   int `json:"instances"`
	PerInstance int `json:"per_instance"`
	// Seeding says how the requests were put in the store; SeedS and
	// SeededPerS how long it took.
	Seeding    string  `json:"seeding"`
	SeedS      float64 `json:"seed_s"`
	SeededPerS float64 `json:"seeded_per_s"`
	// FirstPage is GET /v1/approval-requests?state=pending&limit=PageSize
	// by reviewers, one a client; InstanceRead GET /v1/instances/{id} by its agent,
	// with its pending count checked.
	PageSize     int       `json:"page_size"`
	FirstPage    ScaleRead `json:"first_page"`
	InstanceRead ScaleRead `json:"instance_read"`
	// Plans are PostgreSQL's plans (EXPLAIN ANALYZE) of the statements
	// behind the two reads, and Indexes the indexes each plan reads.
	Plans   map[string]string   `json:"plans"`
	Indexes map[string][]string `json:"indexes"`
	// Routing is the routing phase's, with --groups.
	Routing *ScaleRouting `json:"routing,omitempty"`
	// Expiry is the expiry of requests due together over the backlog.
	Expiry *ScaleExpiry `json:"expiry,omitempty"`
}

// ScaleExpiry is what the scale scenario's expiry measured: Due requests,
// seeded after the reads with one common deadline, over Backlog pending
// requests due a day later.
type ScaleExpiry struct {
	Due     int `json:"due"`
	Backlog int `json:"backlog"`
	// StillPending are those of Due not expired a minute (or --duration,
	// if longer) after the deadline, when the run stopped waiting.
	StillPending int `json:"still_pending"`
	// LastExpiredAfterDeadlineMS is from the deadline until the last
	// sweep's commit; ExpiredPerS is those expired over that time.
	LastExpiredAfterDeadlineMS float64 `json:"last_expired_after_deadline_ms"`
	ExpiredPerS                float64 `json:"expired_per_s"`
	// Sweeps are the replicas' ExpireDue calls that expired something:
	// how many, the most rows one expired, how long the calls took, and
	// how many took over 60 ms (docs/performance.md, "Expiry of a large
	// backlog").
	Sweeps         int     `json:"sweeps"`
	MaxSweepRows   int     `json:"max_sweep_rows"`
	SweepMS        Latency `json:"sweep_ms"`
	SweepsOver60MS int     `json:"sweeps_over_60ms"`
}

// ScaleRead is one kind of read, measured.
type ScaleRead struct {
	Reads     int64            `json:"reads"`
	Errors    int64            `json:"errors"`
	ErrorKind map[string]int64 `json:"error_kinds,omitempty"`
	PerS      float64          `json:"per_s"`
	LatencyMS Latency          `json:"latency_ms"`
}

// errWrongRead is a read whose answer is not what the seeded store holds.
var errWrongRead = errors.New("wrong answer")

// validateScale checks what the scale scenario needs: its own servers on
// PostgreSQL, the only store several replicas share.
func (c Config) validateScale() error {
	if c.Scenario != Scale {
		if c.Groups != 0 {
			return fmt.Errorf("--groups goes with --scenario scale, not %s", c.Scenario)
		}
		return nil
	}
	switch {
	case !isPostgres(c.DB):
		return errors.New("--scenario scale measures a large backlog on PostgreSQL, shared by --replicas: give --db postgres://…")
	case len(c.URLs) > 0:
		return errors.New("--scenario scale seeds its requests through the store of its own servers; leave out --url")
	case c.Policy != "":
		return errors.New("--scenario scale seeds its requests through the store, where no policy runs; leave out --policy")
	case c.Groups < 0 || c.Groups > MaxGroups:
		return fmt.Errorf("--groups must be between 1 and %d (a policy file's groups), not %d", MaxGroups, c.Groups)
	}
	return nil
}

// runScale is the scale scenario.
func runScale(ctx context.Context, cfg Config, t *target, rep *Report) error {
	n := cfg.Count
	x := &ScaleReport{Pending: n, PerInstance: scalePerInstance, PageSize: inboxPageSize}
	rep.Scale = x
	setup, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(n)*time.Second/scaleSeedRate)
	defer cancel()

	instances, err := seedPending(setup, cfg, t, x)
	if err != nil {
		return err
	}
	if err := explainScale(setup, cfg, t, instances, x); err != nil {
		return err
	}

	// Each client is a reviewer of its own: one token may have only two
	// list reads in progress (provider.Config.MaxHeavyReadsPerToken), and
	// an inbox is one person's.
	reviewers := make([]string, cfg.Clients)
	for i := range reviewers {
		var tok struct {
			Secret string `json:"secret"`
		}
		body := fmt.Sprintf(`{"name":"airlock bench reviewer %d","role":"reviewer"}`, i)
		if err := t.call(setup, "POST", t.urls[0], "/v1/tokens", t.admin, body, &tok); err != nil {
			return fmt.Errorf("mint reviewer %d: %w", i, err)
		}
		reviewers[i] = tok.Secret
	}

	half := cfg.Duration / 2
	stopProfile, err := cfg.phaseProfile("")
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Progress, "scale: the reviewer's first page of %d, %d clients over %d replicas, %s\n", inboxPageSize, cfg.Clients, len(t.urls), half)
	x.FirstPage = measureReads(ctx, cfg, half, func(ctx context.Context, i int, _ *rand.Rand) error {
		var page struct {
			Items []struct {
				State string `json:"state"`
			} `json:"items"`
		}
		if err := t.call(ctx, "GET", t.base(i), "/v1/approval-requests?state=pending&limit="+strconv.Itoa(inboxPageSize), reviewers[i], "", &page); err != nil {
			return err
		}
		if len(page.Items) != min(inboxPageSize, n) {
			return fmt.Errorf("%w: a first page of %d, want %d", errWrongRead, len(page.Items), min(inboxPageSize, n))
		}
		for _, it := range page.Items {
			if it.State != string(airlock.StatePending) {
				return fmt.Errorf("%w: a %s request on the pending page", errWrongRead, it.State)
			}
		}
		return nil
	})
	fmt.Fprintf(cfg.Progress, "scale: an instance with its pending count, %d clients over %d replicas, %s\n", cfg.Clients, len(t.urls), half)
	x.InstanceRead = measureReads(ctx, cfg, half, func(ctx context.Context, i int, rnd *rand.Rand) error {
		k := rnd.IntN(len(instances))
		var in struct {
			PendingCount int `json:"pending_count"`
		}
		if err := t.call(ctx, "GET", t.base(i), "/v1/instances/"+instances[k], t.agent, "", &in); err != nil {
			return err
		}
		if want := min(scalePerInstance, n-k*scalePerInstance); in.PendingCount != want {
			return fmt.Errorf("%w: pending_count %d, want %d", errWrongRead, in.PendingCount, want)
		}
		return nil
	})
	stopProfile()
	rep.Result = Result{Ops: x.FirstPage.Reads + x.InstanceRead.Reads, Errors: x.FirstPage.Errors + x.InstanceRead.Errors}
	// Said now, so that a later failure does not lose them.
	fmt.Fprintf(cfg.Progress, "scale: first page p50 %.2f ms, p99 %.2f ms (%d reads, %d errors); instance p50 %.2f ms, p99 %.2f ms (%d reads, %d errors); plans read %v\n",
		x.FirstPage.LatencyMS.P50, x.FirstPage.LatencyMS.P99, x.FirstPage.Reads, x.FirstPage.Errors,
		x.InstanceRead.LatencyMS.P50, x.InstanceRead.LatencyMS.P99, x.InstanceRead.Reads, x.InstanceRead.Errors, x.Indexes)
	if cfg.Groups > 0 {
		if err := measureRouting(ctx, cfg, t, x); err != nil {
			return err
		}
		rc := x.Routing.Create
		rep.Result.Ops += rc.Reads
		rep.Result.Errors += rc.Errors
	}
	return expireOverBacklog(ctx, cfg, t, x)
}

// expireOverBacklog seeds a tenth as many requests again, due together,
// on instances of their own, over the standing backlog, and measures
// their expiry: the rate, and the sweeps each replica ran.
func expireOverBacklog(ctx context.Context, cfg Config, t *target, x *ScaleReport) error {
	n, k := cfg.Count, max(cfg.Count/scaleDueShare, 1)
	setup, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(k)*time.Second/scaleSeedRate)
	defer cancel()
	// The deadline leaves seeding twice the time the backlog's rate took.
	perReq := time.Duration(float64(time.Second) / max(x.SeededPerS, 1))
	deadline := time.Now().Add(max(3*time.Second, 2*time.Duration(k)*perReq+5*time.Second))
	fmt.Fprintf(cfg.Progress, "scale: seeding %d more requests due together at %s, over the backlog of %d\n", k, deadline.Format("15:04:05.000"), n)
	if _, err := seed(setup, cfg, t, n, n+k, func(i int) (time.Duration, error) {
		left := time.Until(deadline)
		if left < minLeft {
			return 0, fmt.Errorf("seeding the %d due requests is slower than planned: %d seeded with %s left before their deadline; lower --count", k, i-n, left.Round(time.Millisecond))
		}
		return left, nil
	}); err != nil {
		return err
	}
	e := &ScaleExpiry{Due: k, Backlog: n}
	x.Expiry = e
	rowsBefore := t.sweeps.rows.Load()
	select {
	case <-time.After(time.Until(deadline)):
	case <-ctx.Done():
		return ctx.Err()
	}
	stopProfile, err := cfg.phaseProfile("expiry")
	if err != nil {
		return err
	}
	// Past limit, the report says how many were left: an expiry too slow
	// for the limit is a measurement, and the reads' figures stand.
	limit := deadline.Add(max(cfg.Duration, time.Minute))
	for t.sweeps.rows.Load()-rowsBefore < int64(k) && time.Now().Before(limit) {
		time.Sleep(time.Millisecond)
	}
	stopProfile()
	t.sweeps.settle(10 * time.Second)
	e.StillPending = max(0, int(int64(k)-(t.sweeps.rows.Load()-rowsBefore)))
	last := deadline
	var took samples
	for _, sw := range t.sweeps.since(deadline.Add(-time.Second)) {
		took = append(took, sw.took)
		if sw.took > sweepCallBound {
			e.SweepsOver60MS++
		}
		e.MaxSweepRows = max(e.MaxSweepRows, sw.rows)
		if sw.end.After(last) {
			last = sw.end
		}
	}
	e.Sweeps, e.SweepMS = len(took), took.latency()
	e.LastExpiredAfterDeadlineMS = ms(last.Sub(deadline))
	if d := last.Sub(deadline); d > 0 {
		e.ExpiredPerS = round(float64(k-e.StillPending)/d.Seconds(), 0)
	}
	return nil
}

// seedPending creates the run's instances and cfg.Count pending requests
// through a store handle of its own on the run's schema, and returns the
// instances' IDs in order: instance k holds requests k·scalePerInstance
// onwards.
func seedPending(ctx context.Context, cfg Config, t *target, x *ScaleReport) ([]string, error) {
	n := cfg.Count
	x.Seeding = fmt.Sprintf("store contract: CreateRequest from %d concurrent writers", scaleWriters)
	x.Instances = (n + scalePerInstance - 1) / scalePerInstance
	fmt.Fprintf(cfg.Progress, "scale: seeding %d pending requests over %d instances (%s)\n", n, x.Instances, x.Seeding)
	start := time.Now()
	ids, err := seed(ctx, cfg, t, 0, n, func(int) (time.Duration, error) { return scaleWindow, nil })
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	x.SeedS = round(took.Seconds(), 1)
	x.SeededPerS = round(float64(n)/took.Seconds(), 0)
	return ids, nil
}

// seed creates requests [from, to), request i on instance
// i/scalePerInstance (which seed creates), with window(i) its window,
// and returns the instances' IDs in order.
func seed(ctx context.Context, cfg Config, t *target, from, to int, window func(i int) (time.Duration, error)) ([]string, error) {
	st, err := postgres.Open(ctx, t.spec.Postgres, postgres.WithSchema(t.spec.Schema), postgres.WithMaxConns(scaleWriters))
	if err != nil {
		return nil, fmt.Errorf("open the run's store to seed it: %w", err)
	}
	defer st.Close()
	first := from / scalePerInstance
	ids := make([]string, (to-1)/scalePerInstance+1-first)
	for k := range ids {
		in, err := st.CreateInstance(ctx, airlock.Instance{OwnerID: t.agentID, Name: fmt.Sprintf("bench scale %d", first+k)}, t.agentID)
		if err != nil {
			return nil, fmt.Errorf("seed instance %d: %w", first+k, err)
		}
		ids[k] = in.ID
	}
	var done atomic.Int64
	start := time.Now()
	err = seedEach(ctx, from, to, func(ctx context.Context, i int) error {
		w, err := window(i)
		if err == nil {
			err = seedOne(ctx, st, t.agentID, ids[i/scalePerInstance-first], i, w)
		}
		if err != nil {
			return fmt.Errorf("seed request %d: %w", i, err)
		}
		if d := done.Add(1); d%100_000 == 0 {
			fmt.Fprintf(cfg.Progress, "scale: %d seeded, %.0f/s\n", d, float64(d)/time.Since(start).Seconds())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("seeding %d requests outlasted its bound (%d seeded; at least %d/s is allowed for): %w", to-from, done.Load(), scaleSeedRate, err)
	}
	return ids, nil
}

// seedEach runs each for every i in [from, to) on scaleWriters concurrent
// writers; the first error stops them all and is returned.
func seedEach(ctx context.Context, from, to int, each func(ctx context.Context, i int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	next.Store(int64(from))
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for range scaleWriters {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || wctx.Err() != nil {
					return
				}
				if err := each(wctx, i); err != nil {
					errOnce.Do(func() { firstErr = err; stop() })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// seedOne creates request i on instance, as the API's create would,
// with window its decision window.
func seedOne(ctx context.Context, st store.Store, agent, instance string, i int, window time.Duration) error {
	in := airlock.CreateRequestInput{
		Tool:           "payments.refund",
		Arguments:      json.RawMessage(fmt.Sprintf(`{"payment_id":"pay_%d","amount":4900,"currency":"GBP"}`, i)),
		Timeout:        fmt.Sprintf("%dus", window.Microseconds()),
		AgentReasoning: "The customer was charged twice.",
		Context:        json.RawMessage(`{"bench":true}`),
	}
	fp, err := in.Fingerprint(instance)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("scale-%d", i)
	r := airlock.Request{
		ID: airlock.NewRequestID(time.Now()), InstanceID: instance, OwnerID: agent,
		Kind: airlock.KindToolCall, Tool: in.Tool, Arguments: in.Arguments, Timeout: in.Timeout,
		AgentReasoning: in.AgentReasoning, Context: in.Context, IdempotencyKey: key, Fingerprint: fp,
	}
	_, created, err := st.CreateRequest(ctx, store.NewRequestParams{Request: r, Window: window, Actor: agent})
	if err == nil && !created {
		err = fmt.Errorf("idempotency key %s was already used", key)
	}
	return err
}

// measureReads runs read from cfg.Clients clients for d, client i on
// replica i mod replicas, and measures it.
func measureReads(ctx context.Context, cfg Config, d time.Duration, read func(ctx context.Context, i int, rnd *rand.Rand) error) ScaleRead {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu    sync.Mutex
		lat   samples
		kinds = map[string]int64{}
		wg    sync.WaitGroup
	)
	start := time.Now()
	for i := range cfg.Clients {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			var mine samples
			mykinds := map[string]int64{}
			for ctx.Err() == nil && len(mine) < MaxOps/cfg.Clients {
				t0 := time.Now()
				err := read(ctx, i, rnd)
				if ctx.Err() != nil {
					break // the run's end cut it short: not an error of the server's
				}
				if err != nil {
					k := kind(err)
					if errors.Is(err, errWrongRead) {
						k = err.Error()
					}
					mykinds[k]++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			for k, v := range mykinds {
				kinds[k] += v
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := ScaleRead{Reads: int64(len(lat)), LatencyMS: lat.latency(), PerS: round(float64(len(lat))/elapsed.Seconds(), 0)}
	if len(kinds) > 0 {
		r.ErrorKind = kinds
		for _, v := range kinds {
			r.Errors += v
		}
	}
	return r
}

// scaleStatements are the statements behind the two reads, as the
// PostgreSQL store runs them, reduced to the part that picks rows: the
// first page's candidates (store/postgres/sql/requests.sql,
// Requests.List, whose outer query joins back by seq), and an instance's
// pending count (instances.sql, instanceCols).
var scaleStatements = []struct{ name, sql string }{
	{"first_page", `SELECT r.seq FROM requests r WHERE r.state = 'pending' ORDER BY r.seq DESC LIMIT ` + strconv.Itoa(inboxPageSize+1)},
	{"pending_count", `SELECT count(*) FROM requests r WHERE r.instance_id = $1 AND r.state = 'pending'`},
}

var planIndex = regexp.MustCompile(`(?:Index Only Scan|Index Scan|Bitmap Index Scan)(?: Backward)? (?:using|on) (\w+)`)

// explainScale analyzes the seeded table, as autovacuum would after so
// many inserts, and keeps the plans of the reads' statements.
func explainScale(ctx context.Context, cfg Config, t *target, instances []string, x *ScaleReport) error {
	conn, err := connectAdmin(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{t.spec.Schema}.Sanitize()); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `ANALYZE requests`); err != nil {
		return fmt.Errorf("analyze the seeded requests: %w", err)
	}
	x.Plans, x.Indexes = map[string]string{}, map[string][]string{}
	for _, s := range scaleStatements {
		var args []any
		if strings.Contains(s.sql, "$1") {
			args = append(args, instances[len(instances)/2])
		}
		rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+s.sql, args...)
		if err != nil {
			return fmt.Errorf("explain %s: %w", s.name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("explain %s: %w", s.name, err)
		}
		plan := strings.Join(lines, "\n")
		x.Plans[s.name] = plan
		idx := []string{}
		for _, m := range planIndex.FindAllStringSubmatch(plan, -1) {
			if !slices.Contains(idx, m[1]) {
				idx = append(idx, m[1])
			}
		}
		x.Indexes[s.name] = idx
	}
	return nil
}
