package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/prometheus/client_golang/prometheus"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// principalA is the principal of agent A's token, shared by the reviewer
// "reviewerA": one person running an agent and reviewing.
const principalA = "alice"

// bundle is one test's running API: a real SQLite file, a provider with its
// expiry scheduler, and the REST handler behind an httptest server whose
// every request and response is validated against the OpenAPI document.
type bundle struct {
	store *sqlite.Store // nil on PostgreSQL (options.postgres)
	// st is the store under the provider, whichever driver.
	st     store.Store
	svc    *provider.Service
	srv    *httptest.Server
	client *http.Client
	reg    *prometheus.Registry
	logs   *logtest.Errors
	// stop ends the handler's Context, as a server shutdown would.
	stop context.CancelFunc

	// Secrets of the callers of the authorization matrix, and their callers.
	agentA, agentB, reviewer, reviewerA, admin, revoked, verifier, auditor string
	callers                                                                map[string]airlock.Caller
}

// options adjusts a bundle.
type options struct {
	rateLimit float64
	rateBurst int
	limiter   *ratelimit.Limiter // instead of one from rateLimit and rateBurst
	maxWait   time.Duration
	maxBody   int64
	heartbeat time.Duration
	validate  bool
	// noScheduler leaves the expiry scheduler off (a test that closes the
	// store under the API must not have it log).
	noScheduler bool
	// connState, when set, observes the server's connections.
	connState func(net.Conn, http.ConnState)
	// guard throttles failed authentications; by default one too generous
	// to throttle the tests that fail on purpose.
	guard *ratelimit.Guard
	// heavyReads and heavyPerToken are the provider's MaxHeavyReads and
	// MaxHeavyReadsPerToken.
	heavyReads, heavyPerToken int
	// pageBytes is the provider's ListPageBytes.
	pageBytes int
	// wrapStore, when set, wraps the store the provider is given.
	wrapStore func(store.Store) store.Store
	// policy, when set, is the provider's policy and group directory.
	policy *policy.Engine
	// postgres runs the bundle on a fresh PostgreSQL schema instead of a
	// SQLite file.
	postgres bool
	// checkpointEvery is the provider's CheckpointInterval; negative
	// leaves the audit log's sequencer to the test (SequenceAudit).
	checkpointEvery time.Duration
	// clock, when set, is the store's and the provider's clock.
	clock airlock.Clock
	// requirePasskey is the provider's RequirePasskey.
	requirePasskey airlock.GrantExpression
}

func setup(t testing.TB, opts ...func(*options)) *bundle {
	t.Helper()
	o := options{rateLimit: 1e6, rateBurst: 1e6, validate: true}
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	var (
		st   store.Store
		lite *sqlite.Store
	)
	if o.postgres {
		popts := []postgres.Option{postgres.WithSchema(testkit.SchemaName(t, "t_rest_"))}
		if o.clock != nil {
			popts = append(popts, postgres.WithClock(o.clock))
		}
		pg, err := postgres.Open(ctx, testkit.PostgresURL(t), popts...)
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		st = pg
	} else {
		var err error
		var lopts []sqlite.Option
		if o.clock != nil {
			lopts = append(lopts, sqlite.WithClock(o.clock))
		}
		lite, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "airlock.db"), lopts...)
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		st = lite
	}
	t.Cleanup(func() { st.Close() })

	logs := &logtest.Errors{}
	logger := slog.New(logs)
	if o.guard == nil {
		o.guard = ratelimit.NewGuard(ratelimit.GuardConfig{AddressBurst: 1e6, OverallBurst: 1e6, Logger: logger})
	}
	reg := prometheus.NewRegistry()
	limits := airlock.DefaultLimits()
	limits.MinTimeout = time.Millisecond
	under := st
	if o.wrapStore != nil {
		under = o.wrapStore(st)
	}
	var (
		pol    airlock.Policy
		groups airlock.GroupDirectory
	)
	if o.policy != nil {
		pol, groups = o.policy, o.policy
	}
	svc, err := provider.New(provider.Config{
		Store: under, Limits: limits, Logger: logger, MaxWait: o.maxWait, Policy: pol, Groups: groups,
		Expressions:   new(policy.Expressions),
		Metrics:       provider.NewMetrics(reg, nil),
		MaxHeavyReads: o.heavyReads, MaxHeavyReadsPerToken: o.heavyPerToken, ListPageBytes: o.pageBytes,
		CheckpointInterval: o.checkpointEvery, Clock: o.clock, RequirePasskey: o.requirePasskey,
	})
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	if err := svc.LoadSigningKeys(ctx); err != nil {
		t.Fatalf("signing keys: %v", err)
	}
	if !o.noScheduler {
		testkit.Go(t, svc.Run)
	}

	b := &bundle{store: lite, st: st, svc: svc, reg: reg, logs: logs, callers: map[string]airlock.Caller{}}
	shutdown, stop := context.WithCancel(ctx)
	b.stop = stop
	h := New(Config{
		Service: svc, Logger: logger, Registry: reg, RateLimit: o.rateLimit, RateBurst: o.rateBurst, Limiter: o.limiter,
		MaxBodyBytes: o.maxBody, Context: shutdown, Heartbeat: o.heartbeat, AuthGuard: o.guard,
	})
	if o.validate {
		h = validated(t, h)
	}
	b.srv = httptest.NewUnstartedServer(h)
	b.srv.Config.ConnState = o.connState
	b.srv.Start()
	b.client = b.srv.Client()
	b.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	t.Cleanup(b.srv.Close)
	t.Cleanup(stop) // runs first: ends streams and long polls so Close can return
	logs.FailOnErrors(t)

	b.admin = "admin-secret-0123456789"
	if err := svc.BootstrapAdmin(ctx, b.admin); err != nil {
		t.Fatalf("bootstrap admin: %v", err)
	}
	admin := b.auth(t, b.admin)
	b.callers["admin"] = admin
	mint := func(name string, role airlock.Role, principal string) string {
		tok, secret, err := svc.CreateToken(ctx, admin, airlock.NewTokenInput{Name: name, Role: role, Principal: principal})
		if err != nil {
			t.Fatalf("create token %s: %v", name, err)
		}
		b.callers[name] = airlock.Caller{Token: tok}
		return secret
	}
	b.agentA = mint("agentA", airlock.RoleAgent, principalA)
	b.agentB = mint("agentB", airlock.RoleAgent, "bob")
	b.reviewer = mint("reviewer", airlock.RoleReviewer, "carol")
	b.reviewerA = mint("reviewerA", airlock.RoleReviewer, principalA)
	b.revoked = mint("revoked", airlock.RoleAgent, "dave")
	b.verifier = mint("verifier", airlock.RoleVerifier, "tools")
	b.auditor = mint("auditor", airlock.RoleAuditor, "audit")
	if _, err := svc.RevokeToken(ctx, admin, b.callers["revoked"].ID); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	return b
}

func (b *bundle) auth(t testing.TB, secret string) airlock.Caller {
	t.Helper()
	c, err := b.svc.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return c
}

// resp is a finished HTTP exchange.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// obj decodes the body as a JSON object.
func (r resp) obj(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %d body %q: %v", r.status, r.body, err)
	}
	return m
}

// expectInvalidRequest marks a request that deliberately breaks the
// OpenAPI document (the validator then tolerates the request, and still
// checks the response). It is stripped before the handler sees it.
const expectInvalidRequest = "X-Test-Invalid-Request"

// req describes one call.
type req struct {
	method, path, token string
	body                string // sent as application/json unless header says otherwise
	header              map[string]string
	invalid             bool // the request itself breaks the document on purpose
}

// do performs a call and reads the whole answer.
func (b *bundle) do(t testing.TB, q req) resp {
	t.Helper()
	return b.doCtx(context.Background(), t, q)
}

func (b *bundle) doCtx(ctx context.Context, t testing.TB, q req) resp {
	t.Helper()
	hr := b.newRequest(ctx, t, q)
	res, err := b.client.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", q.method, q.path, err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: body}
}

func (b *bundle) newRequest(ctx context.Context, t testing.TB, q req) *http.Request {
	t.Helper()
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	hr, err := http.NewRequestWithContext(ctx, q.method, b.srv.URL+q.path, body)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if q.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if q.token != "" {
		hr.Header.Set("Authorization", "Bearer "+q.token)
	}
	for k, v := range q.header {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	if q.invalid {
		hr.Header.Set(expectInvalidRequest, "1")
	}
	return hr
}

// want fails the test unless r has the status (and, for problems, the code).
func want(t testing.TB, r resp, status int, code airlock.Code) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.body)
	}
	if code != "" {
		if got := r.obj(t)["code"]; got != string(code) {
			t.Fatalf("code %v, want %s; body: %s", got, code, r.body)
		}
	}
}

// instance registers an instance for an agent over HTTP.
func (b *bundle) instance(t testing.TB, token string) string {
	t.Helper()
	r := b.do(t, req{method: "POST", path: "/v1/instances", token: token, body: `{"name":"adapter"}`})
	want(t, r, http.StatusCreated, "")
	return r.obj(t)["id"].(string)
}

// create asks for approval of a tool call over HTTP and returns the request.
func (b *bundle) create(t testing.TB, token, instanceID, key, body string) resp {
	t.Helper()
	return b.do(t, req{method: "POST", path: "/v1/instances/" + instanceID + "/approval-requests",
		token: token, body: body, header: map[string]string{"Idempotency-Key": key}})
}

// pending creates a pending request for agent A directly through the
// service, for tests about what comes after.
func (b *bundle) pending(t testing.TB, timeout string) (instanceID, requestID string) {
	t.Helper()
	ctx := context.Background()
	a := b.callers["agentA"]
	inst, err := b.svc.RegisterInstance(ctx, a, airlock.InstanceInput{Name: "fixture"})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	r, _, err := b.svc.CreateRequest(ctx, a, inst.ID, airlock.NewID("key_"), airlock.CreateRequestInput{
		Tool: "issue_refund", Arguments: json.RawMessage(`{"amount":4900}`), Timeout: timeout,
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return inst.ID, r.ID
}

// approved creates a request for agent A and approves it as the reviewer.
func (b *bundle) approved(t testing.TB) string {
	t.Helper()
	_, id := b.pending(t, "10m")
	if _, err := b.svc.Decide(context.Background(), b.callers["reviewer"], id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	return id
}

// claimed creates an approved request whose execution agent A has claimed.
func (b *bundle) claimed(t testing.TB) string {
	t.Helper()
	id := b.approved(t)
	if _, err := b.svc.Claim(context.Background(), b.callers["agentA"], id); err != nil {
		t.Fatalf("claim: %v", err)
	}
	return id
}

// approvalToken returns the approval token of a fresh claim of agent A's:
// a token the server signed, not yet consumed.
func (b *bundle) approvalToken(t testing.TB) string {
	t.Helper()
	r, err := b.svc.Claim(context.Background(), b.callers["agentA"], b.approved(t))
	if err != nil || r.Execution == nil || r.Execution.ApprovalToken == "" {
		t.Fatalf("claim: %v, no approval token", err)
	}
	return r.Execution.ApprovalToken
}

// The OpenAPI document, loaded once for every test.
var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// loadSpec returns the document and its router; it fails t when the
// document does not load or is not valid.
func loadSpec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(OpenAPI)
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(loader.Context); specErr != nil {
			return
		}
		openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.PlainBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/csv", openapi3filter.PlainBodyDecoder)
		specRouter, specErr = gorillamux.NewRouter(specDoc)
	})
	if specErr != nil {
		t.Fatalf("load OpenAPI document: %v", specErr)
	}
	return specDoc, specRouter
}

// validated wraps h so each request and response is checked against the
// OpenAPI document; a mismatch fails the test. Responses are buffered and
// checked before the client sees them, except streams (once flushed), whose
// status and headers are checked at the first flush.
func validated(t testing.TB, h http.Handler) http.Handler {
	doc, router := loadSpec(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		invalidOK := r.Header.Get(expectInvalidRequest) != ""
		r.Header.Del(expectInvalidRequest)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "test validator: read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		ctx := context.Background()
		opts := &openapi3filter.Options{
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true,
		}

		var input *openapi3filter.RequestValidationInput
		route, params, routeErr := router.FindRoute(r)
		if routeErr == nil {
			vr := r.Clone(ctx)
			vr.Body = io.NopCloser(bytes.NewReader(body))
			input = &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: opts}
			if err := openapi3filter.ValidateRequest(ctx, input); err != nil && !invalidOK {
				t.Errorf("request %s %s does not match the OpenAPI document: %v", r.Method, r.URL, err)
			}
		}

		check := func(status int, header http.Header, resBody []byte, streamed bool) {
			if r.Context().Err() != nil {
				return // the client left; nobody reads this answer
			}
			if routeErr != nil {
				// Not a documented route: the answer must be a Problem.
				if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
					t.Errorf("%s %s is not in the OpenAPI document but answered %d", r.Method, r.URL.Path, status)
				}
				checkProblem(t, doc, r, status, header, resBody)
				return
			}
			out := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: input, Status: status, Header: header,
				Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: streamed},
			}
			out.SetBodyBytes(resBody)
			if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
				t.Errorf("response %d to %s %s does not match the OpenAPI document: %v\nbody: %.2000s", status, r.Method, r.URL, err, resBody)
			}
			if strings.HasPrefix(header.Get("Content-Type"), "application/problem+json") {
				checkProblem(t, doc, r, status, header, resBody)
			}
		}
		bw := &bufferedWriter{w: w, header: http.Header{}, check: check}
		h.ServeHTTP(bw, r)
		bw.finish()
	})
}

// checkProblem checks a problem body against the Problem schema and that
// its status matches the HTTP status.
func checkProblem(t testing.TB, doc *openapi3.T, r *http.Request, status int, header http.Header, body []byte) {
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s %s: %d with Content-Type %q, want application/problem+json", r.Method, r.URL.Path, status, ct)
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s %s: problem body is not JSON: %v", r.Method, r.URL.Path, err)
		return
	}
	if err := doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("%s %s: problem does not match the Problem schema: %v", r.Method, r.URL.Path, err)
	}
	if m, ok := v.(map[string]any); ok && m["status"] != float64(status) {
		t.Errorf("%s %s: problem status %v differs from HTTP status %d", r.Method, r.URL.Path, m["status"], status)
	}
}

// bufferedWriter holds a response until the handler returns, so it can be
// validated before the client reads it; a Flush turns it into a stream.
type bufferedWriter struct {
	w        http.ResponseWriter
	header   http.Header
	status   int
	buf      bytes.Buffer
	streamed bool
	check    func(status int, header http.Header, body []byte, streamed bool)
}

func (b *bufferedWriter) Header() http.Header { return b.header }

func (b *bufferedWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	if b.streamed {
		return b.w.Write(p)
	}
	return b.buf.Write(p)
}

func (b *bufferedWriter) Flush() {
	if !b.streamed {
		if b.status == 0 {
			b.status = http.StatusOK
		}
		b.check(b.status, b.header, nil, true)
		b.streamed = true
		b.copyHeader()
		b.w.WriteHeader(b.status)
		b.w.Write(b.buf.Bytes())
	}
	if f, ok := b.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (b *bufferedWriter) copyHeader() {
	for k, v := range b.header {
		b.w.Header()[k] = v
	}
}

func (b *bufferedWriter) finish() {
	if b.streamed {
		return
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	b.check(b.status, b.header, b.buf.Bytes(), false)
	b.copyHeader()
	b.w.WriteHeader(b.status)
	b.w.Write(b.buf.Bytes())
}
