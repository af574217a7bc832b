// Package server assembles an Airlock server: the provider over an open
// store, the REST API, the /mcp endpoint and the reviewer inbox behind one
// mux, the HTTP server with its bounds, and the shutdown that drains, cuts
// and closes in order. It is the one composition root: `airlock serve`
// builds its Config from flags, and the benchmark builds one of its own,
// so both run the same server.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/inbox"
	"github.com/airlockhq/airlock/internal/outbound"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/internal/telemetry"
	"github.com/airlockhq/airlock/mailapp"
	"github.com/airlockhq/airlock/mcpserver"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/slackapp"
	"github.com/airlockhq/airlock/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// DefaultShutdownGrace is how long in-flight requests may take to finish,
// once shutdown begins, before they are cut.
const DefaultShutdownGrace = 10 * time.Second

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
	// releaseEvery is how often, at most, the memory of finished heavy
	// reads is handed back to the system (releaseAfterHeavyReads).
	releaseEvery = time.Second
)

// Config is what a Server is built from. Zero fields take the defaults
// of the packages they configure (provider, rest, ratelimit).
type Config struct {
	// Store is the open store to serve. Required. New takes it over: the
	// server closes it when Run returns, or when New fails.
	Store store.Store
	// StoreName names the store in logs (a --db with its password
	// redacted).
	StoreName string
	// Addr is the TCP address to listen on (port 0 picks a free one). Its
	// host, unless a wildcard such as 0.0.0.0, is the one Host besides
	// loopback names that the inbox and /mcp answer.
	Addr string
	// Listeners are served beside Addr's, with the same handler, such as
	// the benchmark's in-memory pipes. New takes them over like Store.
	Listeners []net.Listener
	// AdminToken, when set, becomes the bootstrap admin token's secret,
	// replacing the previous one.
	AdminToken string
	// ShowAdminToken is how a generated admin token reaches a person. At
	// a start without AdminToken and with no admin token stored yet, New
	// generates a secret and calls ShowAdminToken with it before it stores
	// the token's hash; when that fails, New fails and stores nothing, so
	// that a later start generates one again. When nil, New generates no
	// token (AdminTokenMissing): a secret nobody can see would only lock
	// the admin out.
	ShowAdminToken func(secret string) error

	// Limits are the decision windows and approval validity the provider
	// enforces.
	Limits airlock.Limits
	// MaxWait bounds a long-poll.
	MaxWait time.Duration
	// SessionStaleAfter is how long an MCP session may go without a
	// heartbeat before reviewers see it as stale.
	SessionStaleAfter time.Duration
	// InboxSessionIdle and InboxSessionMax are an inbox sign-in's idle and
	// absolute lifetimes (default inbox.DefaultSessionIdle and
	// inbox.DefaultSessionMax).
	InboxSessionIdle, InboxSessionMax time.Duration
	// OIDC, when set, signs reviewers in to the inbox with an identity
	// provider (docs/teams.md); New refuses one that does not validate.
	// NoInboxTokenSignIn turns the inbox's token sign-in off.
	OIDC               *inbox.OIDCConfig
	NoInboxTokenSignIn bool
	// MaxHeavyReads and MaxHeavyReadsPerToken bound the heavy reads (lists
	// and searches) in progress, in all and per token.
	MaxHeavyReads, MaxHeavyReadsPerToken int
	// RateLimit is the requests per second one token may make, REST and
	// /mcp together, and RateBurst how many at once (default twice
	// RateLimit).
	RateLimit float64
	RateBurst int
	// AuthGuard configures the throttle of failed authentications shared
	// by the REST API, /mcp and the inbox's sign-in; its Logger defaults
	// to Logger.
	AuthGuard ratelimit.GuardConfig
	// ShutdownGrace is how long in-flight requests may take to finish
	// once Run's context ends (default DefaultShutdownGrace).
	ShutdownGrace time.Duration

	// Policy, when set, decides requests at creation by its rules
	// (docs/policy.md); its counters are served at /metrics. Run reloads
	// it on every value from PolicyReload (SIGHUP) and when its file
	// changes, looked at every PolicyWatchEvery (default 2s).
	Policy           *policy.Engine
	PolicyReload     <-chan os.Signal
	PolicyWatchEvery time.Duration
	// OutboundAllowPrivate lets every outbound connection — webhooks, the
	// Slack Web API and its response_urls, the SMTP server — reach
	// loopback, private, link-local and other non-public addresses
	// (docs/notifications.md, "SSRF"). It overrides the AllowPrivate of
	// Slack and Email.
	OutboundAllowPrivate bool
	// WebhookTimeout bounds one webhook attempt (default
	// notify.DefaultTimeout).
	WebhookTimeout time.Duration
	// RemindBefore, when set, sends a reminder of each request still
	// pending this long (or this share of its window) before its deadline.
	RemindBefore airlock.RemindBefore
	// CheckpointInterval is how often the audit log's sequencer signs a
	// checkpoint while the tree grows (default
	// provider.DefaultCheckpointInterval).
	CheckpointInterval time.Duration
	// RetainPayloads, when positive, purges the arguments, reasoning and
	// context of requests decided that long ago (provider.Config's);
	// zero keeps them for ever.
	RetainPayloads time.Duration
	// RequirePasskey names the requests whose decisions must be signed
	// with a passkey (provider.Config's); nil: none.
	RequirePasskey airlock.GrantExpression
	// Slack, when its BotToken and Channel are set, posts each pending
	// request to the channel and updates it to the outcome; with its
	// SigningSecret, POST /slack/interactions takes the buttons' clicks
	// (docs/notifications.md, "Slack"). Its Store is the server's.
	Slack slackapp.Config
	// SlackSigningSecret verifies Slack's interaction requests.
	SlackSigningSecret string
	// Email, when its URL is set, mails each pending request and its
	// reminder to every linked reviewer with an address (docs/
	// notifications.md, "Email"). Its Store is the server's.
	Email mailapp.Config

	// SigningKey, when set, signs every approval token instead of the
	// keys kept in the store (--signing-key-file).
	SigningKey *approvaltoken.Key
	// KeyActivationDelay is how long after a rotation the new key starts
	// signing (--key-activation-delay); zero, at once.
	KeyActivationDelay time.Duration
	// PublicURL names the server in the approval tokens it signs (iss);
	// default the address it listens on.
	PublicURL string

	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// Version is the version /mcp reports at initialize.
	Version string
}

// Server is an assembled Airlock server, listening but not yet serving:
// Run serves until its context ends, then shuts down.
type Server struct {
	log       *slog.Logger
	storeName string
	grace     time.Duration
	// noAdmin is true when no admin token is stored: a first start that
	// had nowhere to show one.
	noAdmin bool

	store store.Store
	svc   *provider.Service
	// notify delivers webhooks and records reminders; webhooks is its
	// webhook sender, closed after it stops.
	notify   *notify.Engine
	webhooks *notify.WebhookSender
	pusher   *notify.PushSender
	// delivering runs the delivery engine while Run does, and lets the
	// benchmark stop and start it (SetNotifications).
	delivering engineSwitch
	listeners  []net.Listener
	http       *http.Server
	// guard throttles and logs failed authentications (Run flushes its log).
	guard *ratelimit.Guard
	// drain ends long-polls (answering with the state as it is) and event
	// streams, when shutdown begins: they would otherwise hold it up.
	drain context.CancelFunc
	// cut cancels the context of every in-flight request, once the grace
	// period is over.
	cut      context.CancelFunc
	inflight sync.WaitGroup

	// heavyOver receives when the last heavy read in progress ends.
	heavyOver chan struct{}

	policy           *policy.Engine // nil without --policy
	policyReload     <-chan os.Signal
	policyWatchEvery time.Duration
}

// New builds the server over cfg.Store, listens on cfg.Addr, and makes
// sure a bootstrap admin token exists. Call Run once, to serve and then
// release what New took over.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	defer func() {
		if err != nil {
			for _, l := range cfg.Listeners {
				l.Close()
			}
			if cfg.Store != nil {
				cfg.Store.Close()
			}
		}
	}()
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	if cfg.OIDC != nil {
		if err := cfg.OIDC.Validate(); err != nil {
			return nil, err
		}
	} else if cfg.NoInboxTokenSignIn {
		return nil, errors.New("server: NoInboxTokenSignIn needs OIDC, or nobody could sign in to the inbox")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = rest.DefaultRateLimit
	}
	if cfg.RateBurst <= 0 {
		cfg.RateBurst = max(1, int(2*cfg.RateLimit))
	}
	log := cfg.Logger

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var (
		pol    airlock.Policy = airlock.NoPolicy{}
		groups airlock.GroupDirectory
	)
	if cfg.Policy != nil {
		pol, groups = cfg.Policy, cfg.Policy
		reg.MustRegister(cfg.Policy)
	}
	if cfg.PolicyWatchEvery <= 0 {
		cfg.PolicyWatchEvery = 2 * time.Second
	}
	var engine *notify.Engine // set below, before anything is served
	heavyOver := make(chan struct{}, 1)
	svc, err := provider.New(provider.Config{
		Store: cfg.Store, Limits: cfg.Limits, Logger: log, Metrics: provider.NewMetrics(reg, nil), MaxWait: cfg.MaxWait, Policy: pol, Groups: groups,
		StaleAfter: cfg.SessionStaleAfter, MaxHeavyReads: cfg.MaxHeavyReads, MaxHeavyReadsPerToken: cfg.MaxHeavyReadsPerToken,
		HeavyReadsOver: func() {
			select {
			case heavyOver <- struct{}{}:
			default: // one is pending already
			}
		},
		CheckWebhookURL:    func(u string) error { return notify.CheckURL(u, cfg.OutboundAllowPrivate) },
		CheckPushURL:       func(u string) error { return outbound.CheckURL(u, cfg.OutboundAllowPrivate) },
		PushAllowHTTP:      cfg.OutboundAllowPrivate,
		DeliveryQueued:     func() { engine.Wake() },
		Expressions:        new(policy.Expressions),
		SigningKey:         cfg.SigningKey,
		KeyActivationDelay: cfg.KeyActivationDelay,
		CheckpointInterval: cfg.CheckpointInterval,
		RetainPayloads:     cfg.RetainPayloads,
		RequirePasskey:     cfg.RequirePasskey,
		PasskeyRPID:        publicHostname(cfg.PublicURL),
	})
	if err != nil {
		return nil, err
	}
	if err := svc.LoadSigningKeys(ctx); err != nil {
		return nil, err
	}
	webhooks := notify.NewWebhookSender(notify.WebhookConfig{
		AllowPrivate: cfg.OutboundAllowPrivate, Timeout: cfg.WebhookTimeout, Version: cfg.Version,
	})
	// Web Push (docs/phone.md): every replica signs with the one VAPID
	// key the store keeps, made at the first start.
	vapid, err := svc.LoadVAPIDKey(ctx)
	if err != nil {
		return nil, err
	}
	pusher, err := notify.NewPushSender(notify.PushConfig{Store: cfg.Store, Key: vapid, Subject: pushSubject(cfg.PublicURL),
		MayPush: svc.MayPush, AllowPrivate: cfg.OutboundAllowPrivate, Timeout: cfg.WebhookTimeout})
	if err != nil {
		return nil, err
	}
	senders := map[airlock.EndpointKind]notify.Sender{airlock.EndpointWebhook: webhooks, airlock.EndpointPush: pusher}
	var slackSender *slackapp.Sender
	if cfg.Slack.BotToken != "" && cfg.Slack.Channel != "" {
		sc := cfg.Slack
		sc.Store, sc.AllowPrivate = cfg.Store, cfg.OutboundAllowPrivate
		if sc.Timeout <= 0 {
			sc.Timeout = cfg.WebhookTimeout
		}
		slackSender = slackapp.NewSender(sc)
		senders[airlock.EndpointSlack] = slackSender
		e, err := slackapp.EnsureEndpoint(ctx, cfg.Store, sc.Channel)
		if err != nil {
			return nil, fmt.Errorf("set up Slack notifications: %w", err)
		}
		if e.DisabledAt != nil {
			log.Warn("Slack notifications are disabled: they failed for days; delete the endpoint to start again",
				"endpoint", e.ID, "reason", e.DisabledReason)
		}
	}
	var mailer *mailapp.Sender
	if cfg.Email.URL != "" {
		mc := cfg.Email
		mc.Store, mc.AllowPrivate = cfg.Store, cfg.OutboundAllowPrivate
		if mc.Timeout <= 0 {
			mc.Timeout = cfg.WebhookTimeout
		}
		if mailer, err = mailapp.NewSender(mc); err != nil {
			return nil, err
		}
		senders[airlock.EndpointEmail] = mailer
		if _, err := mailapp.EnsureEndpoint(ctx, cfg.Store); err != nil {
			return nil, fmt.Errorf("set up email notifications: %w", err)
		}
	}
	var slackHandler http.Handler
	if cfg.SlackSigningSecret != "" {
		slackHandler = slackapp.NewInteractions(slackapp.InteractionsConfig{
			Service: svc, SigningSecret: cfg.SlackSigningSecret, APIURL: cfg.Slack.APIURL, Logger: log,
			AllowPrivate: cfg.OutboundAllowPrivate,
		})
	}
	engine = notify.New(notify.Config{
		Store: cfg.Store, Senders: senders,
		Render: rest.RequestJSON, Changed: svc.Changes, Timeout: cfg.WebhookTimeout, Remind: cfg.RemindBefore, Logger: log,
		Metrics: notify.NewMetrics(reg, cfg.Store),
	})
	registerGauges(reg, svc)

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
	if slackSender != nil {
		// Links in messages name where the inbox is: --public-url, or
		// the address listened on.
		slackSender.DefaultPublicURL("http://" + ln.Addr().String())
	}
	if mailer != nil {
		mailer.DefaultPublicURL("http://" + ln.Addr().String())
	}
	if cfg.PublicURL != "" {
		svc.SetIssuer(cfg.PublicURL)
	} else {
		svc.SetIssuer("http://" + ln.Addr().String())
	}
	noAdmin, err := bootstrapAdmin(ctx, cfg.Store, svc, cfg.AdminToken, cfg.ShowAdminToken)
	if err != nil {
		return nil, err
	}

	s := &Server{
		log: log, storeName: cfg.StoreName, grace: cfg.ShutdownGrace, noAdmin: noAdmin,
		store: cfg.Store, svc: svc, listeners: append([]net.Listener{ln}, cfg.Listeners...),
		policy: cfg.Policy, policyReload: cfg.PolicyReload, policyWatchEvery: cfg.PolicyWatchEvery,
		notify: engine, webhooks: webhooks, pusher: pusher, heavyOver: heavyOver,
	}
	drainCtx, drain := context.WithCancel(context.WithoutCancel(ctx))
	baseCtx, cut := context.WithCancel(context.WithoutCancel(ctx))
	s.drain, s.cut = drain, cut
	// One rate budget per token, whether it calls the REST API or /mcp;
	// one budget of failed authentications per client address, whichever
	// door it knocks at.
	limiter := ratelimit.New(cfg.RateLimit, cfg.RateBurst, time.Now)
	guardCfg := cfg.AuthGuard
	if guardCfg.Logger == nil {
		guardCfg.Logger = log
	}
	s.guard = ratelimit.NewGuard(guardCfg)
	hosts := append(listenHosts(cfg.Addr), publicHost(cfg.PublicURL)...)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpserver.Handler(mcpserver.Config{
		Service: svc, Logger: log, Version: cfg.Version, AllowedHosts: hosts, Context: drainCtx, Limiter: limiter,
		AuthGuard: s.guard, PublicURL: cfg.PublicURL,
	}))
	// The reviewer inbox at / (its own paths); everything else is the API's.
	ib := inbox.New(inbox.Config{
		Service: svc, Logger: log, Context: drainCtx, AllowedHosts: hosts, AuthGuard: s.guard,
		SessionIdle: cfg.InboxSessionIdle, SessionMax: cfg.InboxSessionMax,
		OIDC: cfg.OIDC, NoTokenSignIn: cfg.NoInboxTokenSignIn, PublicURL: cfg.PublicURL,
		// Behind a TLS proxy the connection is plain HTTP, but the
		// browser's is not: an https public URL says so.
		SecureCookies: strings.HasPrefix(strings.ToLower(cfg.PublicURL), "https://"),
	})
	for _, p := range inbox.Patterns {
		mux.Handle(p, ib)
	}
	// Every other path is the API's; a browser asking for a page that is
	// not there gets the inbox's own 404 page rather than the API's JSON.
	mux.Handle("/", inbox.BrowserNotFound(ib, rest.New(rest.Config{
		Service: svc, Logger: log, Registry: reg, Context: drainCtx, Limiter: limiter, AuthGuard: s.guard,
		Slack: slackHandler,
	})))
	s.http = &http.Server{
		Handler:           telemetry.HTTP(log, s.track(rest.RefuseUncleanPaths(mux))),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// registerGauges adds to reg what the provider knows of this process and
// of the database it shares.
func registerGauges(reg *prometheus.Registry, svc *provider.Service) {
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
}

// bootstrapAdmin sets the bootstrap admin token to secret when one is
// given. Otherwise, at the first start (no bootstrap token stored yet), it
// generates one, has show show it, and only then stores it; without show
// it stores none and reports the token missing.
func bootstrapAdmin(ctx context.Context, st store.Store, svc *provider.Service, secret string, show func(string) error) (missing bool, err error) {
	if secret == "" {
		_, err := st.GetToken(ctx, provider.BootstrapTokenID)
		switch {
		case err == nil:
			return false, nil // shown at an earlier start
		case airlock.ErrorCode(err) != airlock.CodeNotFound:
			return false, fmt.Errorf("look up the bootstrap admin token: %w", err)
		case show == nil:
			return true, nil
		}
		secret = airlock.NewTokenSecret()
		if err := show(secret); err != nil {
			return false, err
		}
	}
	if err := svc.BootstrapAdmin(ctx, secret); err != nil {
		return false, fmt.Errorf("store the bootstrap admin token: %w", err)
	}
	return false, nil
}

// Addr returns the address the server listens on, with the real port when
// Config.Addr asked for port 0.
func (s *Server) Addr() string { return s.listeners[0].Addr().String() }

// Service returns the provider the server's doors are layers over.
func (s *Server) Service() *provider.Service { return s.svc }

// AdminTokenMissing reports whether no admin token is stored: a first
// start without Config.AdminToken and without Config.ShowAdminToken, which
// had nowhere to show one.
func (s *Server) AdminTokenMissing() bool { return s.noAdmin }

// Run serves until ctx ends or serving fails, then shuts down: it stops
// accepting, ends long-polls and event streams, gives other in-flight
// requests the grace period to finish, cuts the rest, stops the scheduler
// and closes the store.
func (s *Server) Run(ctx context.Context) error {
	schedCtx, stopScheduler := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	background.Go(func() {
		if err := s.svc.Run(schedCtx); err != nil {
			s.log.Error("expiry scheduler stopped", "err", err)
		}
	})
	background.Go(func() { s.svc.FollowReplicas(schedCtx, followEvery) }) // returns at once for a store not shared
	background.Go(func() { s.guard.Run(schedCtx) })
	background.Go(func() { releaseAfterHeavyReads(schedCtx, s.heavyOver, s.svc.HeavyReads) })
	if s.policy != nil {
		background.Go(func() { s.policy.Watch(schedCtx, s.policyWatchEvery, s.policyReload) })
	}
	s.delivering.open(schedCtx, s.notify.Run)
	served := make(chan error, len(s.listeners))
	for _, l := range s.listeners {
		go func() { served <- s.http.Serve(l) }()
	}
	s.log.Info("serving", "addr", s.Addr(), "db", s.storeName)

	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "grace", s.grace)
	case err := <-served:
		runErr = fmt.Errorf("serve: %w", err)
	}

	s.drain()
	graceCtx, cancel := context.WithTimeout(context.Background(), s.grace)
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
	background.Wait()
	s.delivering.close()
	s.webhooks.Close()
	s.pusher.Close()
	if err := s.store.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("close database: %w", err)
	}
	s.log.Info("stopped")
	return runErr
}

// SetNotifications starts (on) or stops the delivery engine — the
// fan-out of events to webhooks, push subscriptions, Slack and email,
// their attempts, and the reminders — while Run runs. Stopped, events
// wait in the log and go out once it starts again. Only the benchmark stops it: its push
// scenario measures the lifecycle with the engine running and without.
func (s *Server) SetNotifications(on bool) error { return s.delivering.set(on) }

// engineSwitch runs a loop (the delivery engine's Run) under a context of
// its own, so that it can be stopped and started again within the
// server's life.
type engineSwitch struct {
	mu     sync.Mutex
	parent context.Context // nil before open and after close
	run    func(context.Context)
	stop   context.CancelFunc // nil while stopped
	done   chan struct{}
}

// open starts run under parent.
func (e *engineSwitch) open(parent context.Context, run func(context.Context)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.parent, e.run = parent, run
	e.startLocked()
}

func (e *engineSwitch) startLocked() {
	ctx, stop := context.WithCancel(e.parent)
	done := make(chan struct{})
	e.stop, e.done = stop, done
	go func() {
		defer close(done)
		e.run(ctx)
	}()
}

func (e *engineSwitch) stopLocked() {
	if e.stop != nil {
		e.stop()
		<-e.done
		e.stop, e.done = nil, nil
	}
}

// set starts or stops the loop, waiting for a stopped one to return.
func (e *engineSwitch) set(on bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.parent == nil {
		return errors.New("the delivery engine runs only while the server runs")
	}
	if !on {
		e.stopLocked()
	} else if e.stop == nil {
		e.startLocked()
	}
	return nil
}

// close stops the loop for good.
func (e *engineSwitch) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopLocked()
	e.parent = nil
}

// track counts in-flight requests, so that shutdown can wait for cut
// requests to return before closing the store under them.
func (s *Server) track(h http.Handler) http.Handler {
	return &tracked{s: s, next: h}
}

// tracked is track's handler: a type with its own ServeHTTP, not an
// http.HandlerFunc, which would add a frame to the stack a long-poll parks
// on (docs/performance.md).
type tracked struct {
	s    *Server
	next http.Handler
}

func (t *tracked) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.s.inflight.Add(1)
	defer t.s.inflight.Done()
	t.next.ServeHTTP(w, r)
}

// releaseAfterHeavyReads hands the memory that heavy reads used back to
// the system once they are over, each time over receives and no heavy
// read is in progress. Without it the runtime keeps that memory long
// after: an idle server allocates nothing, so no collection frees the
// pages until the forced one two minutes later, and the scavenger then
// returns them a little at a time. debug.FreeOSMemory collects and returns
// them at once, for the cost of one collection of a heap the reads no
// longer hold. It runs at most once per releaseEvery, as a steady stream
// of reads ends often; an end that comes meanwhile waits in over, so the
// last one is always followed by a release.
func releaseAfterHeavyReads(ctx context.Context, over <-chan struct{}, inProgress func() int) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-over:
		}
		if inProgress() == 0 {
			debug.FreeOSMemory()
		}
		pause := time.NewTimer(releaseEvery)
		select {
		case <-ctx.Done():
			pause.Stop()
			return
		case <-pause.C:
		}
	}
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

// listenHosts is the host addr names, when it names one (not 0.0.0.0):
// besides loopback names, the one Host the inbox and /mcp answer to.
// publicHost is the host of the public URL reviewers reach the server by
// (behind a proxy that keeps the Host header): the inbox and /mcp answer
// it as their own name.
func publicHost(publicURL string) []string {
	u, err := url.Parse(publicURL)
	if publicURL == "" || err != nil || u.Hostname() == "" {
		return nil
	}
	return []string{u.Hostname()}
}

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

// pushSubject is the VAPID "sub" pushes carry (RFC 8292): the server's
// public address when it is https, which a push service may use to
// reach its operator; otherwise a mailto: that names no one.
func pushSubject(publicURL string) string {
	if strings.HasPrefix(publicURL, "https://") {
		return publicURL
	}
	return "mailto:airlock@localhost"
}

// publicHostname is the host name of the public URL: the passkeys'
// relying party ID ("" without one: provider's default, localhost).
func publicHostname(public string) string {
	u, err := url.Parse(public)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
