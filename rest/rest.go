// Package rest is Airlock's REST API (rest/openapi.yaml): a thin HTTP layer over
// provider.Service. It authenticates bearer tokens, rate-limits them, reads
// bodies strictly (size, content type, the domain's strict JSON), maps each
// call to one Service method and writes resources and RFC 9457 problems. The
// rules themselves live in the provider and the domain, so REST and MCP
// enforce exactly the same ones.
package rest

import (
	"context"
	_ "embed"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/provider"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OpenAPI is the API's OpenAPI 3.1 document, served at /openapi.yaml. Tests
// check that it lists exactly the routes the handler serves and validate
// every request and response against it.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Defaults of Config.
const (
	DefaultRateLimit = 50  // requests per second per token
	DefaultRateBurst = 100 // requests a token may send at once
	// HeartbeatInterval is how often an idle event stream sends a comment,
	// so proxies keep it open and clients notice a dead connection.
	HeartbeatInterval = 15 * time.Second
)

// Config configures the REST handler. Zero fields take the documented defaults.
type Config struct {
	// Service is the provider the API is a layer over. Required.
	Service *provider.Service
	// Logger receives internal errors, once each (default slog.Default()).
	Logger *slog.Logger
	// Registry is served at /metrics; the handler registers its HTTP
	// request counter and latency histogram (by route) there. Default: a
	// fresh registry holding only those.
	Registry *prometheus.Registry
	// RateLimit is the sustained requests per second allowed per token
	// (default 50); RateBurst is how many it may send at once (default 100).
	RateLimit float64
	RateBurst int
	// Limiter, when set, is used instead of one built from RateLimit and
	// RateBurst: airlock serve shares one with /mcp, so a token has one
	// budget whichever endpoint it calls.
	Limiter *ratelimit.Limiter
	// AuthGuard throttles failed authentications per client address and
	// overall (429 with Retry-After), and logs them. airlock serve shares
	// one with /mcp and the inbox's sign-in. Default: one of the
	// handler's own, with ratelimit's defaults.
	AuthGuard *ratelimit.Guard
	// MaxBodyBytes bounds a request body (default airlock.MaxBodyBytes);
	// larger bodies are refused with 413 payload_too_large.
	MaxBodyBytes int64
	// Context, when set, ends event streams and long polls when it is done,
	// so a server shutdown is not held up by them (http.Server.Shutdown does
	// not cancel active requests). Default: they end only with their request.
	Context context.Context
	// Heartbeat is the event stream's keep-alive interval (default
	// HeartbeatInterval); tests shorten it.
	Heartbeat time.Duration
	// Slack, when set, serves POST /slack/interactions: Slack's requests,
	// which it authenticates by their signature, not a token. Without it
	// that route is 404.
	Slack http.Handler
}

// handler is the REST API.
type handler struct {
	svc       *provider.Service
	log       *slog.Logger
	maxBody   int64
	limiter   *ratelimit.Limiter
	guard     *ratelimit.Guard
	shutdown  context.Context // nil: never
	heartbeat time.Duration
	mux       *http.ServeMux
	metrics   *httpMetrics
	// notReady is whether the last /readyz found the store unable to serve.
	notReady atomic.Bool
	slack    http.Handler
}

// New returns the REST API handler for cfg. It panics when cfg.Service is
// nil, a wiring mistake that no request could recover from.
func New(cfg Config) http.Handler {
	if cfg.Service == nil {
		panic("rest: Config.Service is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	if cfg.RateBurst <= 0 {
		cfg.RateBurst = DefaultRateBurst
	}
	if cfg.Limiter == nil {
		cfg.Limiter = ratelimit.New(cfg.RateLimit, cfg.RateBurst, time.Now)
	}
	if cfg.AuthGuard == nil {
		cfg.AuthGuard = ratelimit.NewGuard(ratelimit.GuardConfig{Logger: cfg.Logger})
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = airlock.MaxBodyBytes
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = HeartbeatInterval
	}
	h := &handler{
		svc: cfg.Service, log: cfg.Logger, maxBody: cfg.MaxBodyBytes,
		limiter:   cfg.Limiter,
		guard:     cfg.AuthGuard,
		heartbeat: cfg.Heartbeat,
		mux:       http.NewServeMux(),
		metrics:   newHTTPMetrics(cfg.Registry),
		slack:     cfg.Slack,
	}
	h.shutdown = cfg.Context
	metricsHandler := promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})
	for _, rt := range routes {
		switch {
		case rt.call == nil:
			h.mux.Handle(rt.pattern, metricsHandler)
		case rt.auth:
			call := byPointer[rt.pattern]
			if call == nil {
				call = byValue(rt.call)
			}
			h.mux.Handle(rt.pattern, h.authenticated(call, forLimited[rt.pattern]))
		default:
			call := rt.call
			h.mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) { call(h, w, r, airlock.Caller{}) })
		}
	}
	return h
}

// ServeHTTP routes a request, answering unknown routes and wrong methods
// with problems instead of ServeMux's plain text, and records metrics.
//
// A long-poll parks under this frame: the route's lookup is done in
// route, which has returned by then, so the frame stays small enough for
// the parked goroutine's stack to shrink (docs/performance.md).
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw, pattern := h.route(w, r)
	defer h.observe(sw, pattern, start)
	defer h.recoverPanic(sw, r)
	if pattern == "" {
		h.unmatched(sw, r)
		return
	}
	h.mux.ServeHTTP(sw, r)
}

// route wraps w to record the status, sets the header every answer has,
// and returns the pattern of r's route ("" when none matches).
//
//go:noinline
func (h *handler) route(w http.ResponseWriter, r *http.Request) (*statusWriter, string) {
	sw := &statusWriter{ResponseWriter: w}
	sw.Header().Set("X-Content-Type-Options", "nosniff")
	_, pattern := h.mux.Handler(r)
	return sw, pattern
}

// observe records a call's metrics once it is answered.
func (h *handler) observe(sw *statusWriter, pattern string, start time.Time) {
	if pattern == "" {
		pattern = "unmatched"
	}
	h.metrics.observe(pattern, sw.status(), time.Since(start))
}

// checkQuery refuses a query string that url.Values would read silently
// otherwise: a parameter given twice (Get takes the first, so a proxy or a
// log that takes the last sees another filter) or one that is malformed
// (ParseQuery drops it).
func checkQuery(raw string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return airlock.Invalid("", "the query string is malformed (%v); escape it as application/x-www-form-urlencoded", err)
	}
	for k, v := range q {
		if len(v) > 1 {
			return airlock.Invalid(k, "query parameter %s is given %d times; give it once", k, len(v))
		}
	}
	return nil
}

// RefuseUncleanPaths answers a request whose path is not clean (a doubled
// slash, a "." or ".." segment) with a 404 problem naming the clean path,
// instead of the HTML redirect http.ServeMux sends: a client that follows
// a redirect may turn a POST into a GET, and an API answers problems, not
// pages. airlock serve wraps its whole mux in it, so /mcp and the inbox
// answer alike.
//
// It looks at the escaped path, as http.ServeMux does when it routes and
// cleans: a segment may hold an escaped slash (%2F), so that an OIDC
// principal, "oidc:https://…#…", fits in one path segment; the mux
// matches segments escaped and hands a wildcard its unescaped value.
func RefuseUncleanPaths(next http.Handler) http.Handler {
	return uncleanRefuser{next}
}

// uncleanRefuser is RefuseUncleanPaths's handler. A long-poll parks under
// its frame: a type with its own ServeHTTP, not an http.HandlerFunc, which
// would add a frame, and the check done in a function that has returned
// by then, so that the parked stack can shrink (docs/performance.md).
type uncleanRefuser struct{ next http.Handler }

func (u uncleanRefuser) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !refusedUnclean(w, r) {
		u.next.ServeHTTP(w, r)
	}
}

// refusedUnclean answers r with a 404 problem when its path is not clean.
//
//go:noinline
func refusedUnclean(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.EscapedPath()
	clean := cleanPath(p)
	if clean == p || r.Method == http.MethodConnect {
		return false
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeProblemStatus(w, http.StatusNotFound, titles[airlock.CodeNotFound], airlock.CodeNotFound,
		&airlock.Error{Message: "no such endpoint " + p + ": paths are not cleaned; use " + clean})
	return true
}

// cleanPath is the path http.ServeMux would redirect p to: path.Clean,
// keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// unmatched answers a request that no route serves: 405 with Allow when the
// path exists under another method, 404 otherwise. ServeMux knows which;
// its plain-text answer is captured and replaced by a problem.
func (h *handler) unmatched(w http.ResponseWriter, r *http.Request) {
	rec := &captureWriter{header: http.Header{}}
	h.mux.ServeHTTP(rec, r)
	switch rec.code {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeProblemStatus(w, http.StatusMethodNotAllowed, "Method not allowed", airlock.CodeInvalidRequest,
			&airlock.Error{Message: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + rec.header.Get("Allow")})
	case http.StatusNotFound, 0:
		h.problem(w, r, airlock.Errorf(airlock.CodeNotFound, "no such endpoint %s %s; see /openapi.yaml", r.Method, r.URL.Path))
	default:
		// A redirect ServeMux makes for an unclean path, when the handler
		// is not behind RefuseUncleanPaths.
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.code)
		w.Write(rec.body)
	}
}

// recoverPanic turns a handler panic into a logged 500, so one bad request
// never answers with a dropped connection.
func (h *handler) recoverPanic(w *statusWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	h.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
	if !w.wrote {
		writeProblemStatus(w, http.StatusInternalServerError, titles[airlock.CodeInternal], airlock.CodeInternal,
			&airlock.Error{Message: "internal error"})
	}
}

// healthz says the process serves; it touches nothing else so it answers
// even when the store is stuck.
func (h *handler) healthz(w http.ResponseWriter, r *http.Request, _ airlock.Caller) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// readyz says whether the store can serve reads and writes, for load
// balancers (provider.Service.Ready). It logs when readiness changes, not
// at every probe: a load balancer asks every few seconds.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request, _ airlock.Caller) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	if err := h.svc.Ready(ctx); err != nil {
		if !h.notReady.Swap(true) {
			h.log.Warn("not ready: the store cannot serve", "err", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"status":"unavailable"}` + "\n"))
		return
	}
	if h.notReady.Swap(false) {
		h.log.Info("ready again: the store serves")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// openapi serves the embedded OpenAPI document.
func (h *handler) openapi(w http.ResponseWriter, r *http.Request, _ airlock.Caller) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(OpenAPI)))
	w.Write(OpenAPI)
}

// statusWriter remembers the status written, for metrics and for knowing
// whether a problem can still be sent. It passes Flush through for SSE.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// StatusClientClosed is the status metrics record for a request whose
// client went away before it was answered (nginx's 499).
const StatusClientClosed = 499

// clientGone records that the client left and nothing will be written.
func (w *statusWriter) clientGone() {
	if !w.wrote {
		w.code, w.wrote = StatusClientClosed, true
	}
}

func (w *statusWriter) status() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.code
}

// captureWriter records ServeMux's own answer for an unmatched request.
type captureWriter struct {
	header http.Header
	code   int
	body   []byte
}

func (w *captureWriter) Header() http.Header { return w.header }
func (w *captureWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *captureWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.body = append(w.body, b...)
	return len(b), nil
}
