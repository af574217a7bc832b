package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/inbox"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/postgres"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

var serveCommand = command{
	name:    "serve",
	args:    "[flags]",
	summary: "Run the Airlock provider: the REST API, with its expiry scheduler, over a SQLite file or a PostgreSQL database.",
	run:     runServe,
}

func runServe(ctx context.Context, a *App, args []string) error {
	cfg, err := a.serveConfig(args)
	if err != nil {
		return err
	}
	srv, err := NewServer(ctx, cfg, a.Stderr)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

// serveConfig reads serve's flags over their environment twins, fills in
// the defaults and validates the result.
func (a *App) serveConfig(args []string) (Config, error) {
	var cfg Config
	fs := a.newFlagSet("serve")
	bindServeFlags(fs, &cfg)
	if err := a.parseFlags(fs, args); err != nil {
		return Config{}, err
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, &usageError{msg: err.Error()}
	}
	return cfg, nil
}

// HTTP server bounds. There is no write timeout: long-polls (up to the
// provider's MaxWait) and event streams must outlive any fixed one, and
// their handlers bound themselves.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second // a whole request, body included (≤ 1 MiB)
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	// followEvery is how often, at most, a replica sharing its database
	// wakes its expiry scheduler for other replicas' changes, so that it
	// expires on time the requests of a replica that died.
	followEvery = 200 * time.Millisecond
	// cutWait bounds how long, after the grace period, cut requests may
	// take to return before the store is closed anyway.
	cutWait = 5 * time.Second
)

// Server is a running `airlock serve`: the store, the provider service with
// its scheduler, and the HTTP server on its listener. NewServer starts
// listening; Run serves until its context ends, then shuts down.
type Server struct {
	cfg      Config
	log      *slog.Logger
	store    airlock.Store
	svc      *provider.Service
	listener net.Listener
	http     *http.Server
	// guard throttles and logs failed authentications (Run flushes its log).
	guard *ratelimit.Guard
	// drain ends long-polls (answering with the state as it is) and event
	// streams, when shutdown begins: they would otherwise hold it up.
	drain context.CancelFunc
	// cut cancels the context of every in-flight request, once the grace
	// period is over.
	cut      context.CancelFunc
	inflight sync.WaitGroup
}

// NewServer opens the store, makes sure a bootstrap admin token exists,
// and listens on cfg.Addr. It prints the address, and a generated admin
// token (once, ever), to notices. cfg must have passed Validate.
func NewServer(ctx context.Context, cfg Config, notices io.Writer) (_ *Server, err error) {
	log, err := newLogger(cfg, notices)
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", redactDB(cfg.DB), err)
	}
	defer func() {
		if err != nil {
			store.Close()
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	svc, err := provider.New(provider.Config{
		Store: store, Limits: cfg.Limits(), Logger: log, Metrics: provider.NewMetrics(reg, nil),
		StaleAfter: cfg.SessionStaleAfter, MaxHeavyReads: cfg.MaxHeavyReads, MaxHeavyReadsPerToken: cfg.MaxHeavyReadsPerToken,
	})
	if err != nil {
		return nil, err
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_long_polls_waiting",
		Help: "Long-polls of this process waiting for a request to change.",
	}, func() float64 { return float64(svc.Waiters()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_heavy_reads_in_progress",
		Help: "Lists and searches of this process holding a heavy-read slot (at most --max-heavy-reads).",
	}, func() float64 { return float64(svc.HeavyReads()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "airlock_requests_pending",
		Help: "Requests pending now, across every replica sharing the database.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := svc.PendingCount(ctx)
		if err != nil {
			return math.NaN()
		}
		return float64(n)
	}))

	// Listen before touching the token, so a port already in use leaves a
	// first run's database without a token nobody saw.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (is another server running? choose another --addr)", cfg.Addr, err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	generated, err := bootstrapAdmin(ctx, store, svc, cfg.AdminToken)
	if err != nil {
		return nil, err
	}

	s := &Server{cfg: cfg, log: log, store: store, svc: svc, listener: ln}
	drainCtx, drain := context.WithCancel(context.WithoutCancel(ctx))
	baseCtx, cut := context.WithCancel(context.WithoutCancel(ctx))
	s.drain, s.cut = drain, cut
	// One rate budget per token, whether it calls the REST API or /mcp;
	// one budget of failed authentications per client address, whichever
	// door it knocks at.
	limiter := ratelimit.New(cfg.RateLimit, max(1, int(2*cfg.RateLimit)), time.Now)
	guardCfg := cfg.AuthGuard()
	guardCfg.Logger = log
	s.guard = ratelimit.NewGuard(guardCfg)
	handler := rest.New(rest.Config{
		Service: svc, Logger: log, Registry: reg, Context: drainCtx, Limiter: limiter, AuthGuard: s.guard,
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler(cfg, svc, log, drainCtx, limiter, s.guard))
	// The reviewer inbox at / (its own paths); everything else is the API's.
	ib := inbox.New(inbox.Config{
		Service: svc, Logger: log, Context: drainCtx, AllowedHosts: listenHosts(cfg.Addr), AuthGuard: s.guard,
	})
	for _, p := range inbox.Patterns {
		mux.Handle(p, ib)
	}
	mux.Handle("/", handler)
	s.http = &http.Server{
		Handler:           s.track(rest.RefuseUncleanPaths(mux)),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	url := "http://" + s.Addr()
	fmt.Fprintln(notices, listeningNotice(url, redactDB(cfg.DB)))
	if generated != "" {
		fmt.Fprintf(notices, "Admin token (shown once): %s\n", generated)
		fmt.Fprintf(notices, "  Keep it: only its hash is stored. Mint agent and reviewer tokens with it at %s/v1/tokens.\n", url)
		fmt.Fprintf(notices, "  Lost it? Restart with --admin-token <new secret> to replace it.\n")
	}
	if host, _, _ := net.SplitHostPort(cfg.Addr); !isLoopback(host) {
		log.Warn("listening beyond this machine; put TLS in front of Airlock", "addr", s.Addr())
	}
	return s, nil
}

// openStore opens the store --db names: PostgreSQL for a postgres:// or
// postgresql:// URL or a keyword string (its search_path parameter, when
// given, picks the schema), a SQLite file otherwise. Both apply their
// migrations.
func openStore(ctx context.Context, db string) (airlock.Store, error) {
	if isPostgres(db) {
		s, err := postgres.Open(ctx, db)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s, err := sqlite.Open(ctx, db)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// listeningNotice is the line that says where the server is; tests and the
// README rely on its shape.
func listeningNotice(url, db string) string {
	return fmt.Sprintf("Airlock listening on %s (REST API under %s/v1; database %s)", url, url, db)
}

// bootstrapAdmin sets the bootstrap admin token to secret when one is
// given. Otherwise, at the first start (no bootstrap token stored yet), it
// generates one and returns it so it can be shown, once.
func bootstrapAdmin(ctx context.Context, store airlock.Store, svc *provider.Service, secret string) (generated string, err error) {
	if secret == "" {
		_, err := store.GetToken(ctx, provider.BootstrapTokenID)
		switch {
		case err == nil:
			return "", nil // shown at an earlier start
		case airlock.ErrorCode(err) != airlock.CodeNotFound:
			return "", fmt.Errorf("look up the bootstrap admin token: %w", err)
		}
		secret = airlock.NewTokenSecret()
		generated = secret
	}
	if err := svc.BootstrapAdmin(ctx, secret); err != nil {
		return "", fmt.Errorf("store the bootstrap admin token: %w", err)
	}
	return generated, nil
}

// Addr returns the address the server listens on, with the real port when
// --addr asked for port 0.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Run serves until ctx ends or serving fails, then shuts down: it stops
// accepting, gives in-flight requests the grace period to finish, cuts
// the rest, stops the scheduler and closes the store.
func (s *Server) Run(ctx context.Context) error {
	schedCtx, stopScheduler := context.WithCancel(context.WithoutCancel(ctx))
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		if err := s.svc.Run(schedCtx); err != nil {
			s.log.Error("expiry scheduler stopped", "err", err)
		}
	}()
	followDone := make(chan struct{})
	go func() {
		defer close(followDone)
		s.svc.FollowReplicas(schedCtx, followEvery) // returns at once for a store not shared

	}()
	guardDone := make(chan struct{})
	go func() {
		defer close(guardDone)
		s.guard.Run(schedCtx)
	}()
	served := make(chan error, 1)
	go func() { served <- s.http.Serve(s.listener) }()
	s.log.Info("serving", "addr", s.Addr(), "db", redactDB(s.cfg.DB))

	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "grace", s.cfg.ShutdownGrace)
	case err := <-served:
		runErr = fmt.Errorf("serve: %w", err)
	}

	s.drain()
	graceCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	err := s.http.Shutdown(graceCtx)
	cancel()
	if err != nil {
		s.log.Warn("grace period over; cutting in-flight requests", "err", err)
		s.cut()
		s.http.Close()
		if !waitTimeout(&s.inflight, cutWait) {
			s.log.Error("requests still running after being cut; closing the store anyway")
		}
	}
	s.cut()
	stopScheduler()
	<-schedDone
	<-followDone
	<-guardDone
	if err := s.store.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("close database: %w", err)
	}
	s.log.Info("stopped")
	return runErr
}

// track counts in-flight requests, so that shutdown can wait for cut
// requests to return before closing the store under them.
func (s *Server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		h.ServeHTTP(w, r)
	})
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// listenHosts is the host --addr names, when it names one (not 0.0.0.0):
// besides loopback names, the one Host the inbox answers to.
func listenHosts(addr string) []string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return nil
	}
	return []string{host}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newLogger returns the slog logger the flags ask for, writing to w.
func newLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
