package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ctxwait"
	"github.com/airlockhq/airlock/internal/hostcheck"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tokenInfoCaller is the auth.TokenInfo.Extra key that carries the
// authenticated caller of one HTTP request to the tool handlers.
const tokenInfoCaller = "airlock.caller"

// Defaults of the HTTP transport.
const (
	// DefaultSessionTimeout closes an idle MCP transport session.
	DefaultSessionTimeout = time.Hour
)

// Header names of the streamable HTTP transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
)

// Handler returns the streamable HTTP transport for cfg, to mount at /mcp
// beside the REST API. It panics when cfg.Service is nil.
func Handler(cfg Config) http.Handler { return New(cfg).HTTPHandler() }

// HTTPHandler returns the streamable HTTP transport serving s, configured
// by the Config s was made with. Before the SDK sees a request, it:
//
//   - refuses a Host that is not a loopback name or in cfg.AllowedHosts,
//     and an Origin that does not match the Host (403): DNS rebinding and
//     cross-site pages cannot drive it;
//   - refuses a token in the query string (401): URLs end up in logs;
//   - authenticates the bearer token against the store (401), on every
//     request, so a revoked token stops at once, throttling failed
//     authentications per client address and overall before the store is
//     asked (cfg.AuthGuard, 429), and takes the request from the token's
//     rate budget when cfg.Limiter is set (429);
//   - refuses an MCP-Protocol-Version it does not speak (400);
//   - serves an Mcp-Session-Id only to the token that created it; to any
//     other token the session does not exist (404);
//   - answers a tools/call at 2026-07-28 in the SDK clients' shape itself
//     (directCall), and the Tasks methods (serveTask); hands any other
//     request made at 2026-07-28 (stateless: see stateless) to the SDK's
//     stateless handler, and every other to its stateful one;
//   - refuses bodies over cfg.MaxBodyBytes (413), and bodies that are not
//     one JSON-RPC message (400, with the JSON-RPC error: checkMessage);
//
// and it answers what the SDK refuses with plain text as JSON-RPC errors,
// as stdio does (rpcRefusal).
func (s *Server) HTTPHandler() http.Handler {
	cfg := s.cfg
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = airlock.MaxBodyBytes
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.AuthGuard == nil {
		cfg.AuthGuard = ratelimit.NewGuard(ratelimit.GuardConfig{Logger: s.log})
	}
	h := &httpHandler{
		s: s, log: s.log, maxBody: cfg.MaxBodyBytes, shutdown: cfg.Context,
		limiter: cfg.Limiter, guard: cfg.AuthGuard, owners: map[string]sessionOwner{},
	}
	for _, host := range cfg.AllowedHosts {
		h.allowed = append(h.allowed, strings.ToLower(strings.TrimSpace(host)))
	}
	server := func(*http.Request) *mcp.Server { return s.mcp }
	streamable := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		Logger:         s.sdkLog,
		SessionTimeout: cfg.SessionTimeout,
		// The Host check below is the SDK's DNS-rebinding protection
		// and more: it applies whatever address the server listens on,
		// and lets an operator name the hosts a reverse proxy uses.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        cfg.MaxBodyBytes,
	})
	// The SDK serves 2026-07-28 only from a stateless handler (v1.8.0;
	// a stateful one refuses it), and a stateless one gives clients of
	// the older revisions no session to hold a GET stream or a DELETE:
	// Airlock keeps one of each and routes by revision.
	stateless := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		Logger:                     s.sdkLog,
		Stateless:                  true,
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        cfg.MaxBodyBytes,
	})
	// RequireBearerToken is how the SDK hands a request's identity to tool
	// handlers (CallToolRequest.Extra.TokenInfo) and binds its sessions to a
	// user. The token was verified a moment before, in ServeHTTP.
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		c, ok := ctx.Value(callerKey{}).(airlock.Caller)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return tokenInfo(ctx, c), nil
	}
	if cfg.Context != nil {
		// The SDK keeps sessions until they time out; end them with the
		// server.
		context.AfterFunc(cfg.Context, func() {
			for ss := range s.mcp.Sessions() {
				ss.Close()
			}
		})
	}
	bearer := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	h.sdk, h.sdkStateless = bearer(streamable), bearer(stateless)
	return h
}

type httpHandler struct {
	s            *Server
	log          *slog.Logger
	sdk          http.Handler // with sessions: revisions before 2026-07-28
	sdkStateless http.Handler // 2026-07-28: an SDK session per request
	allowed      []string
	maxBody      int64
	shutdown     context.Context    // nil: never
	limiter      *ratelimit.Limiter // nil: no limit
	guard        *ratelimit.Guard

	mu sync.Mutex
	// owners maps each MCP transport session ID to the token that
	// created it.
	owners map[string]sessionOwner
	// bound counts binds; an owner's bound is the count at its bind.
	bound uint64
	// listed, set by tests only, runs in bind once it has listed the
	// live sessions, before it forgets the others.
	listed func()
}

// sessionOwner is the token that created an MCP transport session, and
// when in the order of binds it was bound.
type sessionOwner struct {
	tokenID string
	bound   uint64
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if !h.hostAllowed(r.Host) {
		h.refuse(w, r, http.StatusForbidden, "Host "+quote(r.Host)+" is not allowed: use a loopback address (127.0.0.1, localhost) or a host the server is configured to allow")
		return
	}
	if origin, ok := r.Header["Origin"]; ok && !originMatches(origin, r.Host) {
		h.refuse(w, r, http.StatusForbidden, "Origin "+quote(strings.Join(origin, ","))+" does not match the Host "+quote(r.Host)+": cross-origin requests are refused")
		return
	}
	if tokenInQuery(r.URL) {
		h.refuse(w, r, http.StatusUnauthorized, "never put a token in the URL (it ends up in logs and histories): send Authorization: Bearer <token>, and consider this token leaked")
		return
	}
	// The body is read first, within the limit, so that refusals can
	// answer the JSON-RPC request by its id: clients show such an error's
	// message, where they show a bare status for one without an id.
	var (
		id  json.RawMessage
		msg jsonrpc.Message // the POSTed message; nil for GET and DELETE
	)
	if r.Method == http.MethodPost {
		body, m, ok := h.readBody(w, r)
		if !ok {
			return
		}
		id, msg = requestID(body), m
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	secret := bearer(r)
	attempt, wait, ok := h.guard.Admit(r, secret)
	if !ok {
		secs := ratelimit.RetryAfter(wait)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		h.refuseRPC(w, r, id, http.StatusTooManyRequests, -32000, string(airlock.CodeRateLimited)+": "+attempt.Throttled(secs).Message)
		return
	}
	c, err := h.s.svc.Authenticate(r.Context(), secret)
	attempt.Done(err)
	if err != nil {
		var e *airlock.Error
		switch {
		case errors.As(err, &e) && e.Code == airlock.CodeUnavailable:
			h.s.log.Error("store unavailable: authenticate MCP request", "err", err)
			w.Header().Set("Retry-After", strconv.Itoa(int(airlock.UnavailableRetryAfter.Seconds())))
			h.refuseRPC(w, r, id, http.StatusServiceUnavailable, -32000, string(e.Code)+": "+unavailableText(e.Message))
			return
		case airlock.ErrorCode(err) != airlock.CodeUnauthorized:
			h.s.log.Error("authenticate MCP request", "err", err)
			h.refuseRPC(w, r, id, http.StatusInternalServerError, -32603, "internal error")
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
		h.refuseRPC(w, r, id, http.StatusUnauthorized, -32001, err.Error())
		return
	}
	switch c.Role {
	case airlock.RoleVerifier:
		// A tool server's token consumes approval tokens over REST and
		// does nothing else (docs/tokens.md, "Single use").
		h.refuseRPC(w, r, id, http.StatusForbidden, -32001, string(airlock.CodeForbidden)+": a verifier token may only consume approval tokens (POST /v1/approval-tokens/consume)")
		return
	case airlock.RoleAuditor:
		// An auditor's token reads the audit log over REST and does
		// nothing else (docs/audit.md).
		h.refuseRPC(w, r, id, http.StatusForbidden, -32001, string(airlock.CodeForbidden)+": an auditor token may only read the audit log (GET /v1/audit/…)")
		return
	}
	if h.limiter != nil {
		if ok, retry := h.limiter.Allow(c.ID); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
			h.refuseRPC(w, r, id, http.StatusTooManyRequests, -32000, "rate_limited: this token is over its request rate; retry after "+retry.Round(time.Millisecond).String())
			return
		}
	}
	if v, ok := r.Header[headerProtocolVersion]; ok && (len(v) != 1 || !slices.Contains(ProtocolVersions, v[0])) {
		h.refuseVersion(w, r, id, strings.Join(v, ","))
		return
	}
	ctx := withCaller(r.Context(), c)
	if h.shutdown != nil {
		var stop func()
		ctx, stop = ctxwait.WithStop(ctx, h.shutdown)
		defer stop()
	}
	r = r.WithContext(ctx)
	if stateless(r, msg) {
		// No transport session at 2026-07-28: an Mcp-Session-Id is not
		// read, bound or answered, and the SDK connects a session for
		// this one request. Airlock's own sessions (session_open) are
		// records in the store, so they work as before.
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			h.refuse(w, r, http.StatusMethodNotAllowed, "MCP "+Revision2026+" has no session to open a stream (GET) or end (DELETE): POST each request; what the server sends about it comes on that request's response")
			return
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && taskMethods[req.Method] {
			h.serveTask(w, r, c, id, req.Method, req.Params)
			return
		}
		if call, ok := h.s.directToolCall(r, msg); ok {
			h.serveDirect(w, r, c, call)
			return
		}
		h.serveSDK(h.sdkStateless, w, r, msg)
		return
	}
	sid := r.Header.Get(headerSessionID)
	if sid != "" && !h.owns(sid, c.ID) {
		// Another token's session is indistinguishable from none. The
		// body is plain text, as the SDK's own 404 for a session it does
		// not know, so clients see the session as gone and start anew.
		h.log.Debug("MCP request refused", "method", r.Method, "status", http.StatusNotFound, "reason", "session not found")
		http.Error(w, "session not found: start a new MCP session (initialize without Mcp-Session-Id)", http.StatusNotFound)
		return
	}

	bw := &bindWriter{ResponseWriter: w}
	if sid == "" {
		// A response that creates a session names it in its header: bind
		// it to this token before the client can learn it.
		bw.onHeader = func() {
			if created := w.Header().Get(headerSessionID); created != "" {
				h.bind(created, c.ID)
			}
		}
	}
	h.serveSDK(h.sdk, bw, r, msg)
	if r.Method == http.MethodDelete && sid != "" && bw.status == http.StatusNoContent {
		h.mu.Lock()
		delete(h.owners, sid)
		h.mu.Unlock()
	}
}

// serveSDK hands a request to one of the SDK's handlers, answering what it
// refuses with plain text as a JSON-RPC error when the request is a POST
// (rpcRefusal).
func (h *httpHandler) serveSDK(sdk http.Handler, w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
	if msg == nil {
		sdk.ServeHTTP(w, r)
		return
	}
	rw := &rpcRefusal{ResponseWriter: w}
	sdk.ServeHTTP(rw, r)
	if status, code, text, held := rw.answer(w, msg); held {
		h.log.Debug("MCP message refused", "status", status, "code", code, "reason", text)
	}
}

// stateless reports whether a request is made at MCP 2026-07-28, which has
// no transport session: its MCP-Protocol-Version header names that
// revision, or, with no header, its _meta names a revision (SEP-2575's
// per-request protocolVersion). Such a request without the header is
// still the stateless handler's, which answers that the header is
// required, where the stateful one would answer that the revision is not
// supported. The header was checked against ProtocolVersions before.
func stateless(r *http.Request, msg jsonrpc.Message) bool {
	if v := r.Header.Get(headerProtocolVersion); v != "" {
		return v >= Revision2026
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || len(req.Params) == 0 {
		return false
	}
	var params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &params) != nil {
		return false
	}
	_, named := params.Meta[mcp.MetaKeyProtocolVersion]
	return named
}

// readBody reads a POST body within the limit and decodes its message,
// refusing anything that is not one JSON-RPC message (checkMessage) with
// 400 and the JSON-RPC error. It answers the request itself when it
// returns false.
func (h *httpHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, jsonrpc.Message, bool) {
	tooLarge := "request body exceeds " + itoa(h.maxBody) + " bytes"
	if r.ContentLength > h.maxBody {
		h.refuse(w, r, http.StatusRequestEntityTooLarge, tooLarge)
		return nil, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		h.refuse(w, r, http.StatusRequestEntityTooLarge, tooLarge)
		return nil, nil, false
	case err != nil:
		h.refuse(w, r, http.StatusBadRequest, "could not read the request body")
		return nil, nil, false
	}
	msg, id, code, text, ok := checkMessage(body)
	if !ok {
		h.refuseRPC(w, r, id, http.StatusBadRequest, code, text)
		return nil, nil, false
	}
	return body, msg, true
}

// hostAllowed reports whether the Host header names this server (DNS
// rebinding protection, shared with the other browser-reachable endpoint).
func (h *httpHandler) hostAllowed(hostport string) bool {
	return hostcheck.Allowed(hostport, h.allowed)
}

// originMatches reports whether an Origin header is the server's own: an
// http(s) origin whose host:port is the request's Host.
func originMatches(values []string, host string) bool {
	if len(values) != 1 {
		return false
	}
	u, err := url.Parse(values[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// tokenQueryNames are query parameters that would carry a credential.
var tokenQueryNames = []string{"token", "access_token", "accesstoken", "auth", "authorization", "bearer", "api_key", "apikey", "key", "secret"}

// tokenInQuery reports whether the URL carries something that looks like
// a credential: a parameter named like one, or any Airlock secret.
func tokenInQuery(u *url.URL) bool {
	for name, values := range u.Query() {
		if slices.Contains(tokenQueryNames, strings.ToLower(name)) {
			return true
		}
		for _, v := range values {
			if strings.HasPrefix(v, airlock.TokenSecretPrefix) {
				return true
			}
		}
	}
	return false
}

// bearer returns the token of an "Authorization: Bearer <token>" header,
// or "" when there is none.
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// owns reports whether the MCP session sid was created by token tokenID.
func (h *httpHandler) owns(sid, tokenID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	owner, ok := h.owners[sid]
	return ok && owner.tokenID == tokenID
}

// bind records that tokenID created session sid, and forgets sessions the
// SDK has closed (by timeout or DELETE), so the map stays as small as the
// set of live sessions.
//
// It forgets only sessions bound before it listed the live ones. A
// session is live in the SDK before its first response names it, and so
// before its bind; but one bound while this bind was listing may be
// missing from the list, and forgetting it would refuse its next request
// as "session not found".
func (h *httpHandler) bind(sid, tokenID string) {
	h.mu.Lock()
	listing := h.bound
	h.mu.Unlock()
	live := map[string]bool{}
	for ss := range h.s.mcp.Sessions() {
		live[ss.ID()] = true
	}
	if h.listed != nil {
		h.listed()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, o := range h.owners {
		if o.bound <= listing && !live[id] {
			delete(h.owners, id)
		}
	}
	h.bound++
	h.owners[sid] = sessionOwner{tokenID: tokenID, bound: h.bound}
}

// refuse answers with an HTTP status and a JSON-RPC error body (id null),
// which MCP clients show as the reason.
func (h *httpHandler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.refuseRPC(w, r, nil, status, -32000, msg)
}

// refuseRPC answers with an HTTP status and a JSON-RPC error for the
// request with the given id (nil: null).
func (h *httpHandler) refuseRPC(w http.ResponseWriter, r *http.Request, id json.RawMessage, status, code int, msg string) {
	h.log.Debug("MCP request refused", "method", r.Method, "status", status, "reason", msg)
	writeRPCError(w, status, id, code, msg, nil)
}

// refuseVersion refuses an MCP-Protocol-Version the server does not speak,
// with the SDK's unsupported-version error, so an SDK client that probed a
// newer revision falls back to one listed.
func (h *httpHandler) refuseVersion(w http.ResponseWriter, r *http.Request, id json.RawMessage, asked string) {
	data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: ProtocolVersions, Requested: asked})
	msg := "unsupported MCP-Protocol-Version " + quote(asked) + "; this server speaks " + strings.Join(ProtocolVersions, ", ")
	h.log.Debug("MCP request refused", "method", r.Method, "status", http.StatusBadRequest, "reason", msg)
	writeRPCError(w, http.StatusBadRequest, id, mcp.CodeUnsupportedProtocolVersion, msg, data)
}

// bindWriter runs onHeader once, just before the response's header is
// sent, and remembers the status.
type bindWriter struct {
	http.ResponseWriter
	onHeader func()
	status   int
}

func (w *bindWriter) header(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	if w.onHeader != nil {
		w.onHeader()
	}
}

func (w *bindWriter) WriteHeader(status int) {
	w.header(status)
	w.ResponseWriter.WriteHeader(status)
}

func (w *bindWriter) Write(b []byte) (int, error) {
	w.header(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *bindWriter) Flush() {
	w.header(http.StatusOK)
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *bindWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func quote(s string) string { return `"` + clip(s) + `"` }

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
