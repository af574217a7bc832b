// Package inbox is Airlock's web inbox for reviewers (docs/inbox.md): the
// pending requests, live over server-sent events; a request's page with
// exactly what would run, the agent's claim set apart, and the decision
// forms; history, sessions and the work board. It is server-rendered with
// html/template and one small embedded script, with no build step, and is
// a thin layer over provider.Service like the REST API.
//
// Security (docs/inbox.md, "Security model"; tests T17–T19): every text from an
// agent or adapter is escaped by html/template and shown with its invisible
// and bidirectional characters as visible markers; every response carries
// a strict Content-Security-Policy (no inline script, no framing);
// sign-in makes an HttpOnly, SameSite=Strict cookie naming a session kept
// in the store (by its hash), looked up with its token on every request;
// every state-changing form is checked by http.CrossOriginProtection and a
// per-session CSRF token; the Host header must name this server.
package inbox

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/hostcheck"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/provider"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// ContentSecurityPolicy is sent with every inbox response: scripts, styles,
// images and connections only from the inbox itself, no inline script or
// style, forms post only to the inbox, and no page may frame it.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; manifest-src 'self'; worker-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Defaults of Config.
const (
	DefaultSessionIdle = 12 * time.Hour
	DefaultSessionMax  = 7 * 24 * time.Hour
	DefaultHeartbeat   = 15 * time.Second
)

// Patterns are the ServeMux patterns the inbox serves. `airlock serve`
// mounts the inbox on these, beside the REST API (/v1, /healthz, …) and
// /mcp, so that every other path keeps the API's own answers.
var Patterns = []string{"/{$}", "/signin", "/signin/", "/signout", "/requests/", "/batch", "/history", "/sessions", "/board", "/grants", "/grants/", "/fatigue", "/live", "/static/",
	"/sw.js", "/manifest.webmanifest", "/push/", "/passkeys", "/passkeys/"}

// Config configures the inbox. Zero fields take the documented defaults.
type Config struct {
	// Service is the provider the inbox is a layer over. Required.
	Service *provider.Service
	// Logger receives internal errors, once each (default slog.Default()).
	Logger *slog.Logger
	// AllowedHosts are the host names (with or without port) the Host
	// header may name besides loopback ones (localhost, 127.0.0.1, [::1]):
	// the names a reverse proxy or the listen address use. Any other Host
	// is refused, so a DNS-rebinding page cannot reach the inbox.
	AllowedHosts []string
	// Context, when set, ends live streams when it is done, so a server
	// shutdown is not held up by them.
	Context context.Context
	// SessionIdle is how long a sign-in lasts without a page of the inbox
	// opened (default 12h); SessionMax how long it lasts at most, however
	// busy (default 7 days). Sign-ins live in the store, which judges both
	// by its own clock.
	SessionIdle time.Duration
	SessionMax  time.Duration
	// SecureCookies marks cookies Secure even on plain HTTP connections:
	// set it when a TLS proxy sits in front. Cookies on TLS connections
	// are always Secure.
	SecureCookies bool
	// Now is the clock of countdowns and of when a session's activity is
	// due to be recorded (default time.Now).
	Now func() time.Time
	// Heartbeat is how often a live stream re-reads and sends a keep-alive
	// (default 15s); tests shorten it.
	Heartbeat time.Duration
	// OIDC, when set, signs reviewers in with an identity provider
	// (docs/teams.md). New panics when it does not validate: the caller
	// validates it first (OIDCConfig.Validate).
	OIDC *OIDCConfig
	// NoTokenSignIn turns the token sign-in form off, and ends the inbox
	// sessions of tokens at their next request: reviewers sign in with
	// OIDC only. Tokens still work for the REST API, /mcp and the CLI.
	NoTokenSignIn bool
	// AuthGuard throttles failed sign-ins per client address and overall
	// (429 with Retry-After), and logs them; airlock serve shares one with
	// the REST API and /mcp. Default: one of the inbox's own, with
	// ratelimit's defaults.
	AuthGuard *ratelimit.Guard
	// PublicURL is the inbox's address as browsers reach it
	// (--public-url): its host is the passkeys' relying party ID and its
	// origin the only one a passkey ceremony may come from. Without it,
	// passkeys work only on http://localhost (docs/phone.md).
	PublicURL string
}

// handler is the inbox.
type handler struct {
	svc           *provider.Service
	log           *slog.Logger
	allowed       []string
	shutdown      context.Context
	secureCookies bool
	now           func() time.Time
	heartbeat     time.Duration
	guard         *ratelimit.Guard
	sessionIdle   time.Duration
	sessionMax    time.Duration
	oidc          *oidcSignin // nil without OIDC sign-in
	publicURL     *url.URL    // nil without a public URL
	noTokenSignIn bool
	pages         map[string]*template.Template
	static        http.Handler
	mux           *http.ServeMux
	cop           *http.CrossOriginProtection
}

// New returns the inbox handler for cfg. It panics when cfg.Service is nil
// or a template does not parse, wiring mistakes no request could recover
// from.
func New(cfg Config) http.Handler {
	if cfg.Service == nil {
		panic("inbox: Config.Service is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionMax <= 0 {
		cfg.SessionMax = DefaultSessionMax
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.AuthGuard == nil {
		cfg.AuthGuard = ratelimit.NewGuard(ratelimit.GuardConfig{Logger: cfg.Logger})
	}
	h := &handler{
		svc: cfg.Service, log: cfg.Logger, shutdown: cfg.Context, secureCookies: cfg.SecureCookies,
		now: cfg.Now, heartbeat: cfg.Heartbeat, guard: cfg.AuthGuard,
		sessionIdle: cfg.SessionIdle, sessionMax: cfg.SessionMax,
		pages: parsePages(), mux: http.NewServeMux(), cop: http.NewCrossOriginProtection(),
	}
	if cfg.OIDC != nil {
		if err := cfg.OIDC.Validate(); err != nil {
			panic("inbox: " + err.Error())
		}
		h.oidc = newOIDCSignin(*cfg.OIDC)
		// The identity provider sends the browser back to this host.
		if u, err := url.Parse(cfg.OIDC.RedirectURL); err == nil {
			cfg.AllowedHosts = append(cfg.AllowedHosts, u.Host)
		}
	}
	if cfg.NoTokenSignIn && cfg.OIDC == nil {
		panic("inbox: NoTokenSignIn without OIDC leaves no way to sign in")
	}
	h.noTokenSignIn = cfg.NoTokenSignIn
	h.publicURL = parsePublicURL(cfg.PublicURL)
	for _, host := range cfg.AllowedHosts {
		h.allowed = append(h.allowed, strings.ToLower(strings.TrimSpace(host)))
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(fmt.Sprintf("inbox: static files: %v", err))
	}
	h.static = http.StripPrefix("/static/", http.FileServerFS(static))
	h.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.errorPage(w, r, http.StatusForbidden, "Refused",
			"This form was sent from another site, so nothing was recorded. Decide from the inbox itself.")
	}))

	// Every state-changing route is behind CrossOriginProtection and checks
	// its form's CSRF token too.
	post := func(f http.HandlerFunc) http.Handler { return h.cop.Handler(f) }
	h.mux.HandleFunc("GET /{$}", h.pending)
	h.mux.HandleFunc("GET /signin", h.signinForm)
	h.mux.Handle("POST /signin", post(h.signin))
	h.mux.Handle("POST /signout", post(h.signout))
	if h.oidc != nil {
		h.mux.HandleFunc("GET /signin/oidc", h.oidcStart)
		h.mux.HandleFunc("GET "+OIDCCallbackPath, h.oidcCallback)
	}
	h.mux.HandleFunc("GET /requests/{id}", h.request)
	h.mux.Handle("POST /requests/{id}/decide", post(h.decide))
	h.mux.HandleFunc("GET /batch", h.batchReview)
	h.mux.Handle("POST /batch", post(h.batchDecide))
	h.mux.HandleFunc("GET /history", h.history)
	h.mux.HandleFunc("GET /sessions", h.sessionsPage)
	h.mux.HandleFunc("GET /board", h.board)
	h.mux.HandleFunc("GET /grants", h.grantsPage)
	h.mux.HandleFunc("GET /fatigue", h.fatiguePage)
	h.mux.Handle("POST /grants/{id}/revoke", post(h.revokeGrant))
	h.mux.HandleFunc("GET /live", h.live)
	h.mux.Handle("GET /static/", h.static)
	// The installable inbox and Web Push (push.go).
	h.mux.HandleFunc("GET /sw.js", servePlain("sw.js", "text/javascript; charset=utf-8"))
	h.mux.HandleFunc("GET /manifest.webmanifest", servePlain("manifest.webmanifest", "application/manifest+json"))
	h.mux.HandleFunc("GET /push/key", h.pushKey)
	h.mux.Handle("POST /push/subscriptions", post(h.pushSubscribe))
	h.mux.Handle("POST /push/subscriptions/{id}/delete", post(h.pushUnsubscribe))
	// Passkeys (passkey.go).
	h.mux.HandleFunc("GET /passkeys", h.passkeysPage)
	h.mux.Handle("POST /passkeys/register/begin", post(h.passkeyRegisterBegin))
	h.mux.Handle("POST /passkeys/register/finish", post(h.passkeyRegisterFinish))
	h.mux.Handle("POST /passkeys/{id}/delete", post(h.passkeyDelete))
	h.mux.Handle("POST /requests/{id}/passkey", post(h.passkeyDecisionOptions))
	h.mux.Handle("POST /signin/passkey/begin", post(h.passkeySigninBegin))
	h.mux.Handle("POST /signin/passkey/finish", post(h.passkeySigninFinish))
	return h
}

// ServeHTTP sets the security headers every inbox response carries, checks
// the Host, and routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	defer h.recoverPanic(w, r)
	if !h.hostAllowed(r.Host) {
		h.errorPage(w, r, http.StatusForbidden, "Unknown host",
			"This server does not answer to the name "+r.Host+". Open the inbox at the address `airlock serve` printed.")
		return
	}
	_, pattern := h.mux.Handler(r)
	if pattern == "" {
		rec := &statusRecorder{header: http.Header{}}
		h.mux.ServeHTTP(rec, r)
		if rec.code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			h.errorPage(w, r, http.StatusMethodNotAllowed, "Method not allowed", r.Method+" is not allowed here.")
			return
		}
		h.errorPage(w, r, http.StatusNotFound, "Not found", "There is no page at this address.")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// securityHeaders sets the headers every inbox response carries.
func securityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// recoverPanic turns a handler panic into a logged 500 page.
func (h *handler) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	h.log.Error("inbox: panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
	h.errorPage(w, r, http.StatusInternalServerError, "Internal error", "Something went wrong on the server; it has been logged. Try again.")
}

// hostAllowed reports whether the Host header names this server (DNS
// rebinding protection, shared with the other browser-reachable endpoint).
func (h *handler) hostAllowed(hostport string) bool { return hostcheck.Allowed(hostport, h.allowed) }

// statusRecorder captures the mux's own answer for an unmatched request.
type statusRecorder struct {
	header http.Header
	code   int
}

func (w *statusRecorder) Header() http.Header { return w.header }
func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(b), nil
}

// BrowserNotFound returns api, the handler `airlock serve` mounts beside
// the inbox for every other path, with one change: a browser asking for a
// page that does not exist (a GET or HEAD that accepts text/html, outside
// /v1/ and /mcp) gets the inbox's own "Not found" page, readable on a
// phone, instead of the API's JSON problem. Every other answer, and every
// answer to an API client, is api's own, streamed as it is. inbox must be
// a handler from New.
func BrowserNotFound(inbox, api http.Handler) http.Handler {
	h, ok := inbox.(*handler)
	if !ok {
		panic("inbox: BrowserNotFound needs the handler New returned")
	}
	return &browserNotFound{inbox: h, api: api}
}

// browserNotFound is BrowserNotFound's handler. An API long-poll parks
// under its frame: a type with its own ServeHTTP, not an
// http.HandlerFunc, which would add a frame, and the browser's case in a
// function of its own, so that the parked stack can shrink
// (docs/performance.md).
type browserNotFound struct {
	inbox *handler
	api   http.Handler
}

func (b *browserNotFound) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if browserPage(r) {
		b.inbox.browserNotFound(b.api, w, r)
		return
	}
	b.api.ServeHTTP(w, r)
}

// browserNotFound serves a browser's r with api, answering the inbox's
// "Not found" page in place of api's 404.
//
//go:noinline
func (h *handler) browserNotFound(api http.Handler, w http.ResponseWriter, r *http.Request) {
	nf := &notFoundWriter{ResponseWriter: w}
	api.ServeHTTP(nf, r)
	if nf.notFound {
		for _, k := range []string{"Content-Type", "Content-Length", "Content-Encoding"} {
			w.Header().Del(k)
		}
		securityHeaders(w.Header())
		h.errorPage(w, r, http.StatusNotFound, "Not found", "There is no page at this address.")
	}
}

// browserPage reports whether r is a browser asking for a page. Never
// inlined, for BrowserNotFound's frame.
//
//go:noinline
func browserPage(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/mcp") {
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// notFoundWriter passes a response through unless its status is 404, which
// it swallows, with its body, for BrowserNotFound to answer instead.
type notFoundWriter struct {
	http.ResponseWriter
	notFound, wrote bool
}

func (w *notFoundWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if code == http.StatusNotFound {
		w.notFound = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *notFoundWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.notFound {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes of
// long polls and event streams).
func (w *notFoundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
