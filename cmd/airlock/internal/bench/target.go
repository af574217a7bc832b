package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/cmd/airlock/internal/server"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// inProcessMaxWait is the in-process servers' longest long-poll, so that
// the wait scenario's waiters can stay idle through setup and measuring.
const inProcessMaxWait = 30 * time.Minute

// target is what a run drives: servers at urls, with an agent and a
// reviewer token minted for the run. In-process, it also holds the
// servers, so that the wait and expiry scenarios can look inside.
type target struct {
	urls  []string
	store string // sqlite, postgres, or remote
	hc    *http.Client

	admin, agent, reviewer string // token secrets
	// agentID is the agent token's ID, the owner the scale scenario
	// seeds requests for.
	agentID string
	// spec is the in-process servers' store.
	spec storeSpec
	// verifier is a verifier token's secret, minted for the consume
	// scenario only.
	verifier string
	minted   []string

	servers []*replica
	// children are the servers the run started in child processes
	// (Config.serversApart), in place of servers.
	children []*child
	// serverPID is a server at urls whose CPU the run reads
	// (Config.ServerPID).
	serverPID int
	sweeps    *sweepLog
	// batches are the in-process SQLite store's write transactions.
	batches *batchLog
	// lite is the in-process SQLite store, for its write counters.
	lite *sqlite.Store
	// notifyStore is the in-process store, for the delivery backlog.
	notifyStore store.Notify
	// webhooks are the endpoints a --webhooks run created.
	webhooks []string
	// cleanup undoes what openTarget made, last first.
	cleanup []func(ctx context.Context)
}

// replica is one in-process `airlock serve`: the same assembly
// (cmd/airlock/internal/server), without a rate limit.
type replica struct {
	svc *provider.Service
	url string
	// notifications starts or stops the server's delivery engine (push.go).
	notifications func(on bool) error
	// pipe is a second listener whose connections are in-memory pipes,
	// not file descriptors; the wait scenario dials it for more waiters
	// than the process has descriptors.
	pipe *pipeListener
}

func (t *target) describe() string {
	if len(t.servers) > 0 || len(t.children) > 0 {
		return "in-process"
	}
	return strings.Join(t.urls, ",")
}

// base returns the URL client i talks to: replicas are taken in turn.
func (t *target) base(i int) string { return t.urls[i%len(t.urls)] }

// writeStats returns the in-process SQLite store's write counters, asking
// the first child when the servers run in children.
func (t *target) writeStats() (*Commits, error) {
	var s sqlite.WriteStats
	switch {
	case t.lite != nil:
		s = t.lite.WriteStats()
	case len(t.children) > 0:
		cs, err := t.children[0].stats()
		if err != nil || !cs.SQLite {
			return nil, err
		}
		s = sqlite.WriteStats{Ops: cs.Ops, Commits: cs.Commits, MaxBatch: cs.MaxBatch}
	default:
		return nil, nil
	}
	c := &Commits{Ops: s.Ops, Commits: s.Commits, MaxBatch: s.MaxBatch}
	if s.Commits > 0 {
		c.OpsPerCommit = round(float64(s.Ops)/float64(s.Commits), 2)
	}
	return c, nil
}

// serverCPU returns how to read the CPU time the servers have used, when
// they run apart from this process: the children's, summed over replicas,
// or --server-pid's. It returns nil when the servers are in this process,
// or the system has no /proc to read.
func (t *target) serverCPU() cpuReader {
	if !procCPUAvailable() {
		return nil
	}
	switch {
	case len(t.children) > 0:
		return childrenCPU(t.children...)
	case t.serverPID > 0:
		pid := t.serverPID
		return func() (time.Duration, error) {
			d, err := procCPU(pid)
			if err != nil {
				return 0, fmt.Errorf("read the CPU time of --server-pid %d: %w", pid, err)
			}
			return d, nil
		}
	}
	return nil
}

// windowProfile starts the CPU profile of each server process over a
// measured window, when the run profiles its windows (windowProfiled),
// to the replica's file with suffix before its extension ("" for the
// file itself); stop ends them. Started just before the window's clock,
// it leaves out the setup before it.
func (t *target) windowProfile(cfg Config, suffix string) (stop func() error, err error) {
	if cfg.CPUProfile == "" || !cfg.windowProfiled() {
		return func() error { return nil }, nil
	}
	var started []*child
	stop = func() error {
		var first error
		for _, c := range started {
			if err := c.profile("profile stop"); err != nil && first == nil {
				first = err
			}
		}
		started = nil
		return first
	}
	for i, c := range t.children {
		path, err := filepath.Abs(withSuffix(cfg.profileOf(i), suffix))
		if err != nil {
			stop()
			return nil, err
		}
		if err := c.profile("profile start " + path); err != nil {
			stop()
			return nil, err
		}
		started = append(started, c)
	}
	return stop, nil
}

// childrenCPU reads the CPU time of children, summed.
func childrenCPU(children ...*child) cpuReader {
	return func() (time.Duration, error) {
		var sum time.Duration
		for _, c := range children {
			d, err := c.cpu()
			if err != nil {
				return 0, err
			}
			sum += d
		}
		return sum, nil
	}
}

// openTarget connects to cfg's servers, or starts them in-process on a
// temporary store, and mints the run's tokens.
func openTarget(ctx context.Context, cfg Config) (_ *target, err error) {
	t := &target{hc: newHTTPClient(cfg.Clients), sweeps: &sweepLog{}, batches: &batchLog{}}
	defer func() {
		if err != nil {
			t.close(context.WithoutCancel(ctx))
		}
	}()
	if len(cfg.URLs) > 0 {
		t.urls, t.store, t.admin, t.serverPID = cfg.URLs, "remote", cfg.Token, cfg.ServerPID
		for i, u := range t.urls {
			t.urls[i] = strings.TrimRight(u, "/")
		}
	} else if err := t.startServers(ctx, cfg); err != nil {
		return nil, err
	}
	roles := []string{"agent", "reviewer"}
	if cfg.Scenario == Consume {
		roles = append(roles, "verifier")
	}
	for _, role := range roles {
		var tok struct {
			ID     string `json:"id"`
			Secret string `json:"secret"`
		}
		body := fmt.Sprintf(`{"name":"airlock bench %s","role":%q}`, role, role)
		if err := t.call(ctx, "POST", t.urls[0], "/v1/tokens", t.admin, body, &tok); err != nil {
			var he *httpError
			if errors.As(err, &he) && (he.status == http.StatusForbidden || he.status == http.StatusUnauthorized) {
				return nil, fmt.Errorf("mint the run's %s token: %w; --token must be an admin token of the server", role, err)
			}
			return nil, fmt.Errorf("mint the run's %s token: %w", role, err)
		}
		if len(cfg.URLs) > 0 {
			t.minted = append(t.minted, tok.ID)
		}
		switch role {
		case "agent":
			t.agent, t.agentID = tok.Secret, tok.ID
		case "reviewer":
			t.reviewer = tok.Secret
		default:
			t.verifier = tok.Secret
		}
	}
	return t, nil
}

// startServers prepares the store and starts cfg.Replicas servers on it:
// in child processes where cfg's scenario only drives the servers over
// HTTP (serversApart), so that their CPU is measured apart from the
// clients'; in this process where the scenario looks inside them.
func (t *target) startServers(ctx context.Context, cfg Config) error {
	log := slog.New(slog.NewTextHandler(cfg.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	spec, err := t.prepareStore(ctx, cfg)
	if err != nil {
		return err
	}
	t.spec = spec
	t.admin = "bench-admin-" + randomHex(16)
	for i := range cfg.Replicas {
		// The first replica sets the run's admin token; the others find
		// it stored, as replicas of `airlock serve` do.
		admin := ""
		if i == 0 {
			admin = t.admin
		}
		if cfg.serversApart() {
			c, err := startChild(ctx, childSpec{Kind: childAirlock, Store: spec, Admin: admin, Policy: cfg.Policy, CPUProfile: cfg.childProfile(i)}, cfg.Progress)
			if err != nil {
				return err
			}
			if cfg.onChild != nil {
				cfg.onChild(c.pid)
			}
			t.cleanup = append(t.cleanup, c.stop)
			t.children = append(t.children, c)
			t.urls = append(t.urls, c.hello.URL)
			continue
		}
		st, err := openStore(ctx, spec, t.batches)
		if err != nil {
			return err
		}
		if i == 0 {
			t.lite, _ = st.(*sqlite.Store)
			t.notifyStore = st
		}
		var pol *policy.Engine
		if cfg.Policy != "" {
			if pol, err = policy.NewEngine(cfg.Policy, log); err != nil {
				st.Close()
				return fmt.Errorf("policy %s: %w", cfg.Policy, err)
			}
		}
		srv, stop, err := startServer(ctx, timeSweeps(st, t.sweeps), admin, pol, log)
		if err != nil {
			return err
		}
		t.cleanup = append(t.cleanup, stop)
		t.servers = append(t.servers, srv)
		t.urls = append(t.urls, srv.url)
	}
	return nil
}

// prepareStore says where the run's store goes: a fresh SQLite file, or a
// fresh schema in the PostgreSQL database. Cleanup removes the file or
// drops the schema, after the servers have stopped.
func (t *target) prepareStore(ctx context.Context, cfg Config) (storeSpec, error) {
	if isPostgres(cfg.DB) {
		t.store = "postgres"
		schema := "airlock_bench_" + randomHex(6)
		t.cleanup = append(t.cleanup, func(ctx context.Context) {
			if cfg.explain != nil {
				cfg.explain.finish(ctx, "airlock", schema)
			}
			dropSchema(ctx, cfg.DB, schema, cfg.Progress)
		})
		return storeSpec{Postgres: cfg.DB, Schema: schema}, nil
	}
	t.store = "sqlite"
	path, remove, err := sqlitePath(cfg.DB, "airlock.db")
	if err != nil {
		return storeSpec{}, err
	}
	t.cleanup = append(t.cleanup, func(context.Context) { remove() })
	return storeSpec{SQLite: path}, nil
}

// openStore opens one handle on the store spec names (one per replica);
// batches, when set, keeps a SQLite store's write transactions.
func openStore(ctx context.Context, spec storeSpec, batches *batchLog) (store.Store, error) {
	if spec.Postgres != "" {
		s, err := postgres.Open(ctx, spec.Postgres, postgres.WithSchema(spec.Schema))
		if err != nil {
			return nil, fmt.Errorf("open the PostgreSQL store (schema %s): %w", spec.Schema, err)
		}
		return s, nil
	}
	var opts []sqlite.Option
	if batches != nil {
		opts = append(opts, sqlite.WithBatchObserver(batches.add))
	}
	s, err := sqlite.Open(ctx, spec.SQLite, opts...)
	if err != nil {
		return nil, fmt.Errorf("open the SQLite store %s: %w", spec.SQLite, err)
	}
	return s, nil
}

// sqlitePath returns where a run's SQLite file goes — db when given (it
// must not exist), else name in a new temporary directory — and how to
// remove it with its WAL files.
func sqlitePath(db, name string) (string, func(), error) {
	if db != "" {
		if _, err := os.Stat(db); err == nil {
			return "", nil, fmt.Errorf("--db %s already exists; name a path that does not", db)
		}
		return db, func() { removeDB(db) }, nil
	}
	dir, err := os.MkdirTemp("", "airlock-bench-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, name), func() { os.RemoveAll(dir) }, nil
}

func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal", sqlite.TokenStampSuffix} {
		os.Remove(path + suffix)
	}
}

// dropSchema removes a run's PostgreSQL schema, or says on progress which
// one is left to drop by hand.
func dropSchema(ctx context.Context, url, schema string, progress io.Writer) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := connectAdmin(ctx, url)
	if err == nil {
		_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		conn.Close(ctx)
	}
	if err != nil {
		fmt.Fprintf(progress, "could not drop the run's schema %s (%v): drop it with DROP SCHEMA %s CASCADE\n", schema, err, schema)
	}
}

// connectAdmin opens one connection to url for the run's own schema
// changes. The URL may carry the pool's parameters (pool_max_conns, …),
// which pgx.Connect would pass to the server as settings, and fail on:
// read it as a pool's URL first, which takes them out.
func connectAdmin(ctx context.Context, url string) (*pgx.Conn, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, pc.ConnConfig)
}

// startServer starts one in-process server on 127.0.0.1 over store,
// assembled as `airlock serve` assembles it, and returns it with the
// function that stops it (and closes the store). What differs is
// configuration: no rate limit worth the name, long-polls up to
// inProcessMaxWait, and a second listener of in-memory pipes.
func startServer(ctx context.Context, st store.Store, admin string, pol *policy.Engine, log *slog.Logger) (*replica, func(context.Context), error) {
	pipe := newPipeListener()
	srv, err := server.New(ctx, server.Config{
		Store: st, StoreName: "bench", Addr: "127.0.0.1:0", Listeners: []net.Listener{pipe}, AdminToken: admin,
		MaxWait: inProcessMaxWait, RateLimit: 1e12, RateBurst: 1 << 30, ShutdownGrace: 5 * time.Second,
		Policy: pol, Logger: log, Version: "bench",
		// --webhooks's receivers and the push scenario's push service
		// are on this machine's loopback.
		OutboundAllowPrivate: true,
	})
	if err != nil {
		return nil, nil, err
	}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(runCtx); err != nil {
			log.Warn("in-process server stopped", "err", err)
		}
	}()
	stop := func(context.Context) {
		stopRun()
		<-done
	}
	return &replica{svc: srv.Service(), url: "http://" + srv.Addr(), pipe: pipe, notifications: srv.SetNotifications}, stop, nil
}

// close revokes the run's tokens on a remote server, and stops and removes
// what an in-process run made.
func (t *target) close(ctx context.Context) {
	for _, id := range t.minted {
		t.call(ctx, "DELETE", t.urls[0], "/v1/tokens/"+id, t.admin, "", nil)
	}
	t.minted = nil
	for i := len(t.cleanup) - 1; i >= 0; i-- {
		t.cleanup[i](ctx)
	}
	t.cleanup = nil
	t.hc.CloseIdleConnections()
}

// timedStore times every expiry sweep (one store transaction each), for
// the expiry scenario's "longest sweep". Everything else, Extras
// included, is the store's own: the provider sees the store as `airlock
// serve` does. Calls made for a token taken from memory go through the
// PostgreSQL store's checking view (Extras.TokenCheck), not through
// timedStore; sweeps and overdue expiries are made for no caller, so
// every one is timed.
type timedStore struct {
	store.Store
	sweeps *sweepLog
}

// ExpireDue runs the store's sweep and records how long it took.
func (s *timedStore) ExpireDue(ctx context.Context, limit int) ([]airlock.Request, error) {
	s.sweeps.inflight.Add(1)
	defer s.sweeps.inflight.Add(-1)
	start := time.Now()
	rs, err := s.Store.ExpireDue(ctx, limit)
	if err == nil && len(rs) > 0 {
		s.sweeps.add(sweep{end: time.Now(), took: time.Since(start), rows: len(rs)})
	}
	return rs, err
}

// ExpireRequests runs the store's expiry of requests readers found overdue
// before a sweep did, and counts them with the rows swept, so that the
// scenario sees every request expired, whichever way.
func (s *timedStore) ExpireRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	rs, err := s.Store.ExpireRequests(ctx, ids)
	s.sweeps.rows.Add(int64(len(rs)))
	return rs, err
}

// timeSweeps wraps store to time its sweeps.
func timeSweeps(st store.Store, sweeps *sweepLog) store.Store {
	return &timedStore{Store: st, sweeps: sweeps}
}

// sweep is one expiry transaction that expired rows.
type sweep struct {
	end  time.Time
	took time.Duration
	rows int
}

type sweepLog struct {
	mu  sync.Mutex
	all []sweep
	// inflight counts sweeps running now; rows counts the requests
	// expired, by sweeps and by reads (ExpireRequests).
	inflight, rows atomic.Int64
}

// settle waits, up to limit, until no sweep is running, so that every
// committed sweep is in the log.
func (l *sweepLog) settle(limit time.Duration) {
	for end := time.Now().Add(limit); l.inflight.Load() > 0 && time.Now().Before(end); {
		time.Sleep(100 * time.Microsecond)
	}
}

func (l *sweepLog) add(s sweep) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, s)
	l.rows.Add(int64(s.rows))
}

// batchLog keeps an in-process SQLite store's write transactions.
type batchLog struct {
	mu  sync.Mutex
	all []sqlite.Batch
}

func (l *batchLog) add(b sqlite.Batch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, b)
}

// between returns the transactions that began in [from, to].
func (l *batchLog) between(from, to time.Time) []sqlite.Batch {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sqlite.Batch
	for _, b := range l.all {
		if !b.Began.Before(from) && !b.Began.After(to) {
			out = append(out, b)
		}
	}
	return out
}

// since returns the sweeps that ended at or after t.
func (l *sweepLog) since(t time.Time) []sweep {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sweep
	for _, s := range l.all {
		if !s.end.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

func newHTTPClient(clients int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = max(16, 2*clients)
	tr.Proxy = nil
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// httpError is an answer outside 2xx.
type httpError struct {
	status int
	code   string
	detail string
}

func (e *httpError) Error() string {
	if e.code != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.status, e.code, e.detail)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.detail)
}

// kind names an error for the report's error_kinds.
func kind(err error) string {
	var he *httpError
	switch {
	case errors.Is(err, errNotGranted):
		return errNotGranted.Error()
	case errors.Is(err, errNoToken):
		return errNoToken.Error()
	case errors.Is(err, errUnexpectedToken):
		return errUnexpectedToken.Error()
	case errors.As(err, &he) && he.code != "":
		return fmt.Sprintf("http %d %s", he.status, he.code)
	case errors.As(err, &he):
		return fmt.Sprintf("http %d", he.status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		var ne net.Error
		if errors.As(err, &ne) {
			return "network"
		}
		return "other"
	}
}

// call sends one API request and decodes a 2xx JSON answer into out
// (when not nil).
func (t *target) call(ctx context.Context, method, base, path, token, body string, out any, header ...string) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		json.Unmarshal(b, &p)
		if p.Detail == "" {
			p.Detail = string(bytes.TrimSpace(b))
		}
		return &httpError{status: resp.StatusCode, code: p.Code, detail: p.Detail}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
		}
	}
	return nil
}

// apiRequest is the part of an ApprovalRequest the scenarios read.
type apiRequest struct {
	ID         string    `json:"id"`
	State      string    `json:"state"`
	CreatedAt  time.Time `json:"created_at"`
	DeadlineAt time.Time `json:"deadline_at"`
	Decision   *struct {
		DecidedBy string `json:"decided_by"`
	} `json:"decision"`
	Execution *struct {
		Status        string `json:"status"`
		ApprovalToken string `json:"approval_token"`
	} `json:"execution"`
}

func (t *target) newInstance(ctx context.Context, base, name string) (string, error) {
	var in struct {
		ID string `json:"id"`
	}
	err := t.call(ctx, "POST", base, "/v1/instances", t.agent, fmt.Sprintf(`{"name":%q}`, name), &in)
	return in.ID, err
}

func (t *target) create(ctx context.Context, base, instance, key, body string) (apiRequest, error) {
	var r apiRequest
	err := t.call(ctx, "POST", base, "/v1/instances/"+instance+"/approval-requests", t.agent, body, &r, "Idempotency-Key", key)
	return r, err
}

// approveCreated approves r, just created: it must be pending, and the
// decision's answer approved.
func (t *target) approveCreated(ctx context.Context, base string, r apiRequest) error {
	if r.State != "pending" {
		return fmt.Errorf("created %s is %s, want pending", r.ID, r.State)
	}
	d, err := t.decide(ctx, base, r.ID, "approved")
	if err != nil {
		return err
	}
	if d.State != "approved" {
		return fmt.Errorf("decided %s is %s, want approved", r.ID, d.State)
	}
	return nil
}

func (t *target) decide(ctx context.Context, base, id, status string) (apiRequest, error) {
	var r apiRequest
	err := t.call(ctx, "POST", base, "/v1/approval-requests/"+id+"/decision", t.reviewer, `{"status":"`+status+`"}`, &r)
	return r, err
}

func (t *target) read(ctx context.Context, base, id string) (apiRequest, error) {
	var r apiRequest
	err := t.call(ctx, "GET", base, "/v1/approval-requests/"+id, t.agent, "", &r)
	return r, err
}

// decodeBody reads a JSON answer into out.
func decodeBody(resp *http.Response, out any) error {
	return json.NewDecoder(resp.Body).Decode(out)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
