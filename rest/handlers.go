package rest

import (
	"bytes"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/provider"
)

// authenticated wraps an endpoint: the bearer token from the Authorization
// header (never from the query string) is checked against the store on
// every call, so a revoked token stops at once; then the token's bucket
// must hold a request, and the query string must name each parameter once.
// Failed authentications are throttled per client address and overall
// before the store is asked (ratelimit.Guard).
//
// On a store that checks tokens itself (PostgreSQL), the caller of a
// token this process has seen carries its check (airlock.Caller.Check),
// which rides with the call's first statement
// (provider.AuthenticateDeferred); checkedWriter makes sure it was made,
// and passed, before the first byte of the answer.
//
// A token of a limited role (airlock.Role.Limited) may call only the
// endpoints marked for its role (route.limited): a verifier (a tool
// server's token) the consume of approval tokens, an auditor the audit
// log's endpoints. Every other is 403 here, whatever the endpoint's own
// checks would let a role that is none of agent, reviewer and admin read.
func (h *handler) authenticated(endpoint func(*handler, http.ResponseWriter, *http.Request, *airlock.Caller), limited airlock.Role) http.Handler {
	// A long-poll parks under these frames (awaitRequest): they are kept
	// small, the work done in functions that return before the endpoint
	// runs, so that its stack can shrink (TestIdleWaiterMemory).
	return &authenticatedRoute{h: h, endpoint: endpoint, limited: limited}
}

// authenticatedRoute is an endpoint behind authentication. A type with
// its own ServeHTTP, not an http.HandlerFunc, which would add a frame.
type authenticatedRoute struct {
	h        *handler
	endpoint func(*handler, http.ResponseWriter, *http.Request, *airlock.Caller)
	limited  airlock.Role
}

func (a *authenticatedRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c := a.h.admit(w, r); c != nil { // else admit answered, and counted the attempt
		a.h.call(w, r, c, a.endpoint, a.limited)
		a.h.refusedLater(w, r)
	}
}

// byValue adapts an endpoint that takes its caller by value to
// authenticated, which passes a pointer.
func byValue(endpoint func(*handler, http.ResponseWriter, *http.Request, airlock.Caller)) func(*handler, http.ResponseWriter, *http.Request, *airlock.Caller) {
	return func(h *handler, w http.ResponseWriter, r *http.Request, c *airlock.Caller) { endpoint(h, w, r, *c) }
}

// byPointer are the endpoints New registers in place of the routes
// table's, taking the caller by pointer: a long-poll's stack holds no
// copy of it (192 bytes) while it parks.
var byPointer = map[string]func(*handler, http.ResponseWriter, *http.Request, *airlock.Caller){
	"GET /v1/approval-requests/{id}": (*handler).awaitRequest,
}

// call runs endpoint for caller c, which admit authenticated, unless
// refused answered the call; a caller whose token check is deferred
// answers through a checkedWriter. Never inlined, to keep the frame a
// long-poll parks under small.
//
//go:noinline
func (h *handler) call(w http.ResponseWriter, r *http.Request, c *airlock.Caller, endpoint func(*handler, http.ResponseWriter, *http.Request, *airlock.Caller), limited airlock.Role) {
	var cw *checkedWriter
	if c.Check != nil {
		cw = &checkedWriter{ResponseWriter: w, h: h, r: r, c: c}
		w = cw
	}
	if !h.refused(w, r, c, limited) {
		endpoint(h, w, r, c)
	}
	if cw != nil {
		cw.check() // an endpoint that wrote nothing still answers 401 for a revoked token
	}
}

// refused answers a call that c may not make here: a limited role's token
// at an endpoint not for it, or a query string url.Values would misread.
//
//go:noinline
func (h *handler) refused(w http.ResponseWriter, r *http.Request, c *airlock.Caller, limited airlock.Role) bool {
	var err error
	if c.Role.Limited() && c.Role != limited {
		err = limitedRefusal(c.Role)
	} else {
		err = checkQuery(r.URL.RawQuery)
	}
	if err != nil {
		h.problem(w, r, err)
		return true
	}
	return false
}

// limitedRefusal is the 403 of a limited role's token at an endpoint
// not for it: it says what the token may call.
func limitedRefusal(role airlock.Role) error {
	if role == airlock.RoleAuditor {
		return airlock.Errorf(airlock.CodeForbidden, "an auditor token may only read the audit log (GET /v1/audit/…, GET /v1/approval-requests/{id}/proof)")
	}
	return airlock.Errorf(airlock.CodeForbidden, "a verifier token may only consume approval tokens (POST /v1/approval-tokens/consume)")
}

// refusedLater counts a call whose token passed admit but was refused
// later (a remembered token found revoked by the store's check, a
// long-poll whose token was revoked while it waited) as a failed
// authentication of its address.
//
//go:noinline
func (h *handler) refusedLater(w http.ResponseWriter, r *http.Request) {
	if sw, ok := w.(*statusWriter); ok && sw.status() == http.StatusUnauthorized {
		h.guard.Refused(r, bearer(r))
	}
}

// checkedWriter holds back a call's answer until its token check is made
// and passed (provider.FinishTokenCheck). When the token is not live, it
// answers 401 instead, whatever the endpoint meant to say, and drops what
// the endpoint writes.
type checkedWriter struct {
	http.ResponseWriter
	h       *handler
	r       *http.Request
	c       *airlock.Caller // its Check is the one to finish
	checked bool
	refused bool
}

// check makes the token check once, answering the call when it fails, and
// says whether the endpoint may answer.
func (w *checkedWriter) check() bool {
	if !w.checked {
		w.checked = true
		if err := w.h.svc.FinishTokenCheck(w.r.Context(), *w.c); err != nil {
			w.refused = true
			clear(w.ResponseWriter.Header()) // nothing the endpoint set (a Location, say) goes out
			w.h.problem(w.ResponseWriter, w.r, err)
		}
	}
	return !w.refused
}

// settle makes the token check of a call about to answer err, unless it is
// made, and returns what to answer: the token's refusal when the token is
// not live; err when the check passed, or when it failed as the call did
// (the store is down: one failure, answered and logged once); the check's
// failure when err is an answer the caller may hear only with a live token.
func (w *checkedWriter) settle(err error) error {
	if w.checked {
		return err
	}
	w.checked = true
	cerr := w.h.svc.FinishTokenCheck(w.r.Context(), *w.c)
	switch code := airlock.ErrorCode(err); {
	case cerr == nil:
		return err
	case airlock.ErrorCode(cerr) == airlock.CodeUnauthorized:
		clear(w.ResponseWriter.Header()) // as check does
		return cerr
	case code == airlock.CodeInternal || code == airlock.CodeUnavailable:
		return err
	default:
		return cerr
	}
}

func (w *checkedWriter) WriteHeader(code int) {
	if w.check() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *checkedWriter) Write(b []byte) (int, error) {
	if !w.check() {
		return 0, errTokenRefused
	}
	return w.ResponseWriter.Write(b)
}

func (w *checkedWriter) Flush() {
	if w.check() {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *checkedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// errTokenRefused is what an endpoint's writes return after checkedWriter
// answered 401 in its place.
var errTokenRefused = errors.New("rest: the call's token was refused; its answer was replaced by 401")

// admit authenticates and rate-limits a call, answering it when it may not
// proceed (nil). It returns the caller by pointer and is never inlined, so that
// its work is off the stack while the endpoint runs: a long-poll parks
// under this frame, and a shallow stack is what lets the garbage collector
// shrink a parked goroutine's stack to 8 KiB.
//
//go:noinline
func (h *handler) admit(w http.ResponseWriter, r *http.Request) *airlock.Caller {
	secret := bearer(r)
	attempt, wait, ok := h.guard.Admit(r, secret)
	if !ok {
		secs := ratelimit.RetryAfter(wait)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		h.problem(w, r, attempt.Throttled(secs))
		return nil
	}
	c, err := h.svc.AuthenticateDeferred(r.Context(), secret)
	attempt.Done(err)
	if err != nil {
		h.problem(w, r, err)
		return nil
	}
	if ok, retry := h.limiter.Allow(c.ID); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
		h.problem(w, r, airlock.Errorf(airlock.CodeRateLimited,
			"too many requests for this token; retry after %d s", int(math.Ceil(retry.Seconds()))))
		return nil
	}
	return &c
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

// readJSON reads a request body of at most maxBody bytes sent as
// application/json. It does not decode: only the domain's strict decoders
// may read a body, so nothing lenient ever sees it.
// answerOK replies 200 with the body write writes, or the problem err
// when the call failed.
func (h *handler) answerOK(w http.ResponseWriter, r *http.Request, err error, write func(*bytes.Buffer)) {
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, write)
}

// answerList answers 200 with items under key, each written by write, or
// the problem that err is: the end of the handlers that list.
func answerList[T any](h *handler, w http.ResponseWriter, r *http.Request, err error, key string, items []T, write func(*bytes.Buffer, T)) {
	if err != nil {
		h.problem(w, r, err)
		return
	}
	replyList(w, key, items, write)
}

// answerCreated answers 201 with what write writes and the new resource's
// URL as Location, or the problem that err is: the end of the handlers
// that create a resource and name its URL.
func (h *handler) answerCreated(w http.ResponseWriter, r *http.Request, err error, location string, write func(*bytes.Buffer)) {
	if err != nil {
		h.problem(w, r, err)
		return
	}
	w.Header().Set("Location", location)
	reply(w, http.StatusCreated, write)
}

// decodeBody reads the request's JSON body into a T, strictly
// (airlock.DecodeObject). When it cannot, it answers the problem and
// reports false.
func decodeBody[T any](h *handler, w http.ResponseWriter, r *http.Request) (T, bool) {
	var in T
	body, err := h.readJSON(w, r)
	if err == nil {
		err = airlock.DecodeObject(body, &in)
	}
	if err != nil {
		h.problem(w, r, err)
		return in, false
	}
	return in, true
}

func (h *handler) readJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := checkJSONMediaType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	if r.ContentLength > h.maxBody {
		return nil, tooLarge(h.maxBody)
	}
	// MaxBytesReader tells the server to close the connection after an
	// oversized body, which it can do only through the server's own writer.
	if sw, ok := w.(*statusWriter); ok {
		w = sw.ResponseWriter
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge(h.maxBody)
	case err != nil:
		return nil, airlock.Invalid("", "could not read the request body: %v", err)
	}
	return body, nil
}

// unsupportedMediaType is an invalid_request about the body's media type,
// answered 415 rather than 400.
type unsupportedMediaType struct{ err *airlock.Error }

func (e unsupportedMediaType) Error() string { return e.err.Error() }
func (e unsupportedMediaType) Unwrap() error { return e.err }

// checkJSONMediaType accepts application/json in UTF-8, the only encoding
// JSON has (RFC 8259 §8.1): a body declared as UTF-16 or Latin-1 would be
// read as UTF-8 all the same, so a reviewer could be shown other text than
// the sender meant.
func checkJSONMediaType(contentType string) error {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		return unsupportedMediaType{airlock.Invalid("Content-Type", "send the body as JSON with Content-Type: application/json")}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return unsupportedMediaType{airlock.Invalid("Content-Type",
			"charset %q is not supported: JSON is UTF-8; send the body in UTF-8 with Content-Type: application/json", cs)}
	}
	return nil
}

func tooLarge(limit int64) error {
	return airlock.Errorf(airlock.CodePayloadTooLarge, "request body is larger than %d bytes; send less", limit)
}

func (h *handler) createInstance(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[airlock.InstanceInput](h, w, r)
	if !ok {
		return
	}
	inst, err := h.svc.RegisterInstance(r.Context(), c, in)
	h.answerCreated(w, r, err, "/v1/instances/"+inst.ID, func(b *bytes.Buffer) { writeInstance(b, inst) })
}

func (h *handler) getInstance(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	inst, err := h.svc.Instance(r.Context(), c, r.PathValue("id"))
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeInstance(b, inst) })
}

func (h *handler) deleteInstance(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	n, err := h.svc.DeleteInstance(r.Context(), c, r.PathValue("id"))
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.always("cancelled", n)
		o.end()
	})
}

func (h *handler) createRequest(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	// The key is checked first so a caller without one learns that before
	// anything about its body.
	key := r.Header.Get("Idempotency-Key")
	if err := airlock.CheckIdempotencyKey(key); err != nil {
		h.problem(w, r, err)
		return
	}
	body, err := h.readJSON(w, r)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	in, err := airlock.ParseCreateRequest(body)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	req, created, err := h.svc.CreateRequest(r.Context(), c, r.PathValue("id"), key, in)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/approval-requests/"+req.ID)
	reply(w, status, func(b *bytes.Buffer) { writeRequest(b, req) })
}

// getRequest reads a request; with ?wait= it long-polls. A server may hold
// thousands of these idle at once, so it parks with as little as it can: no
// derived context (shutdown ends the wait through a channel that every
// waiter shares), nothing of the request on its stack, and small frames
// (the parsing and the answer are done in functions that have returned or
// not yet begun), so the goroutine's stack shrinks while it waits.
func (h *handler) getRequest(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	h.awaitRequest(w, r, &c)
}

// awaitRequest is getRequest with the caller by pointer, as New registers
// it (byPointer).
func (h *handler) awaitRequest(w http.ResponseWriter, r *http.Request, c *airlock.Caller) {
	wait, err := waitParam(r, h.svc.MaxWait())
	if err != nil {
		h.problem(w, r, err)
		return
	}
	var stop <-chan struct{}
	if h.shutdown != nil {
		// The server is stopping: answer with the state as it is now, and
		// the client polls again elsewhere.
		stop = h.shutdown.Done()
	}
	req, err := h.svc.Await(r.Context(), c, r.PathValue("id"), wait, stop)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	replyRequest(w, req)
}

// waitParam returns the ?wait= of a long-poll, at most maxWait; 0 without one.
//
//go:noinline
func waitParam(r *http.Request, maxWait time.Duration) (time.Duration, error) {
	s := r.URL.Query().Get("wait")
	if s == "" {
		return 0, nil
	}
	d, err := airlock.ParseDuration(s)
	if err != nil {
		return 0, airlock.Invalid("wait", "wait: %v", err)
	}
	return min(d, maxWait), nil
}

// replyRequest answers 200 with req.
//
//go:noinline
func replyRequest(w http.ResponseWriter, req *airlock.Request) {
	reply(w, http.StatusOK, func(b *bytes.Buffer) { writeRequest(b, *req) })
}

func (h *handler) listRequests(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "all" {
		state = "" // every state, as when none is given
	}
	lq := provider.ListQuery{
		State: airlock.State(state), InstanceID: q.Get("instance_id"),
		Tool: q.Get("tool"), Kind: airlock.Kind(q.Get("kind")), Cursor: q.Get("cursor"),
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			h.problem(w, r, airlock.Invalid("limit", "limit must be a whole number between 1 and %d", provider.MaxPageSize))
			return
		}
		if n == 0 {
			n = -1 // an explicit 0 is out of range, not "the default"
		}
		lq.Limit = n
	}
	// A page can hold the provider's ListPageBytes of arguments, and a
	// request more: the slot bounds how many pages are in memory at once.
	release, err := h.svc.HeavyRead(c)
	if err != nil {
		h.refuseHeavyRead(w, r, err)
		return
	}
	defer release()
	page, err := h.svc.ListRequests(r.Context(), c, lq)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	replyPage(w, page)
}

// refuseHeavyRead answers a heavy read refused for want of a slot (429
// rate_limited) with when to retry.
func (h *handler) refuseHeavyRead(w http.ResponseWriter, r *http.Request, err error) {
	if airlock.ErrorCode(err) == airlock.CodeRateLimited {
		w.Header().Set("Retry-After", strconv.Itoa(int(provider.HeavyReadRetryAfter.Seconds())))
	}
	h.problem(w, r, err)
}

func (h *handler) cancelRequest(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	req, err := h.svc.Cancel(r.Context(), c, r.PathValue("id"))
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeRequest(b, req) })
}

func (h *handler) decide(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[airlock.DecisionInput](h, w, r)
	if !ok {
		return
	}
	if in.Edits() {
		orig, edited, err := h.svc.Edit(r.Context(), c, r.PathValue("id"), in)
		h.answerOK(w, r, err, func(b *bytes.Buffer) { writeDecided(b, orig, nil, &edited) })
		return
	}
	req, g, err := h.svc.DecideGrant(r.Context(), c, r.PathValue("id"), in)
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeRequestWith(b, req, g) })
}

// decideBatch is POST /v1/approval-requests/decisions: a result per id,
// in the order of ids, each the request its decision left or the problem
// that refused it (docs/protocol.md, "Batch decisions").
func (h *handler) decideBatch(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[airlock.BatchDecisionInput](h, w, r)
	if !ok {
		return
	}
	results, err := h.svc.DecideBatch(r.Context(), c, in)
	h.answerOK(w, r, err, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.key("results")
		writeArray(b, results, func(b *bytes.Buffer, res provider.BatchResult) {
			item := beginObject(b)
			item.always("id", res.ID)
			if res.Err != nil {
				status, problem := h.itemProblem(r, res.ID, res.Err)
				item.always("status", status)
				item.raw("problem", problem)
			} else {
				item.always("status", http.StatusOK)
				item.key("request")
				writeRequest(b, res.Request)
			}
			item.end()
		})
		o.end()
	})
}

func (h *handler) claim(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	req, err := h.svc.Claim(r.Context(), c, r.PathValue("id"))
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeRequest(b, req) })
}

func (h *handler) report(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[airlock.ReportInput](h, w, r)
	if !ok {
		return
	}
	req, err := h.svc.Report(r.Context(), c, r.PathValue("id"), in)
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeRequest(b, req) })
}

// tokenInput is the body of POST /v1/tokens (CreateToken).
type tokenInput struct {
	Name      string       `json:"name"`
	Role      airlock.Role `json:"role"`
	Scopes    []string     `json:"scopes"`
	Principal string       `json:"principal"`
}

func (h *handler) createToken(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[tokenInput](h, w, r)
	if !ok {
		return
	}
	t, secret, err := h.svc.CreateToken(r.Context(), c, airlock.NewTokenInput{
		Name: in.Name, Role: in.Role, Scopes: in.Scopes, Principal: in.Principal,
	})
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusCreated, func(b *bytes.Buffer) { writeToken(b, t, secret) })
}

func (h *handler) listTokens(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	ts, err := h.svc.Tokens(r.Context(), c)
	answerList(h, w, r, err, "items", ts, func(b *bytes.Buffer, t airlock.Token) { writeToken(b, t, "") })
}

func (h *handler) revokeToken(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	t, err := h.svc.RevokeToken(r.Context(), c, r.PathValue("id"))
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeToken(b, t, "") })
}
