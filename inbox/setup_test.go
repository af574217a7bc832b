package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
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
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopBrowser()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// clock is a settable clock for sign-in expiry: the inbox's and the
// store's. Unset, it is the real clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		return time.Now()
	}
	return c.t
}

// Now is the store's reading: UTC, to the microsecond.
func (c *clock) Now() time.Time { return c.now().UTC().Truncate(time.Microsecond) }

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// bundle is one test's running server: a real SQLite file, the provider
// with its expiry scheduler, and the REST API and the inbox mounted as
// `airlock serve` mounts them.
type bundle struct {
	svc   *provider.Service
	st    store.Store // the store under the provider
	srv   *httptest.Server
	inbox *handler
	clock *clock
	logs  *logtest.Errors

	admin, agent, agentB, reviewer, reviewerB string
	callers                                   map[string]airlock.Caller
}

// options adjusts a bundle.
type options struct {
	allowedHosts []string
	tls          bool
	staleAfter   time.Duration
	// guard throttles failed sign-ins; by default one too generous to
	// throttle the tests that fail on purpose.
	guard *ratelimit.Guard
	// pageBytes is the provider's ListPageBytes.
	pageBytes int
	// wrapStore, when set, wraps the store the provider is given.
	wrapStore func(store.Store) store.Store
	// openStore, when set, opens the store instead of a fresh SQLite
	// file, judging time by clock.
	openStore func(t testing.TB, clock airlock.Clock) store.Store
	// policy, when set, is the provider's policy file (rules and groups).
	policy string
	// oidc, when set, configures OIDC sign-in, given the server's URL.
	oidc func(serverURL string) *OIDCConfig
	// noTokenSignIn turns the token sign-in off.
	noTokenSignIn bool
	// retain is the provider's RetainPayloads.
	retain time.Duration
	// requirePasskey is the provider's RequirePasskey.
	requirePasskey airlock.GrantExpression
	// checkpointInterval is the provider's CheckpointInterval.
	checkpointInterval time.Duration
}

func setup(t testing.TB, opts ...func(*options)) *bundle {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	clk := &clock{}
	var st store.Store
	if o.openStore != nil {
		st = o.openStore(t, clk)
	} else {
		db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "airlock.db"), sqlite.WithClock(clk))
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		st = db
	}
	t.Cleanup(func() { st.Close() })
	logs := &logtest.Errors{}
	logger := slog.New(logs)
	if o.guard == nil {
		o.guard = ratelimit.NewGuard(ratelimit.GuardConfig{AddressBurst: 1e6, OverallBurst: 1e6, Logger: logger})
	}
	limits := airlock.DefaultLimits()
	limits.MinTimeout = time.Millisecond
	under := st
	if o.wrapStore != nil {
		under = o.wrapStore(st)
	}
	cfg := provider.Config{Store: under, Limits: limits, Logger: logger, StaleAfter: o.staleAfter, ListPageBytes: o.pageBytes, RetainPayloads: o.retain, RequirePasskey: o.requirePasskey,
		CheckpointInterval: o.checkpointInterval}
	if o.policy != "" {
		e, err := policy.NewEngine(testkit.TempFile(t, "policy.yaml", o.policy), logger)
		if err != nil {
			t.Fatalf("policy: %v", err)
		}
		cfg.Policy, cfg.Groups = e, e
	}
	svc, err := provider.New(cfg)
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	testkit.Go(t, svc.Run)

	shutdown, stop := context.WithCancel(ctx)
	b := &bundle{svc: svc, st: st, clock: clk, logs: logs, callers: map[string]airlock.Caller{}}
	mux := http.NewServeMux()
	b.srv = httptest.NewUnstartedServer(mux)
	scheme := "http://"
	if o.tls {
		scheme = "https://"
	}
	var oidcCfg *OIDCConfig
	if o.oidc != nil {
		oidcCfg = o.oidc(scheme + b.srv.Listener.Addr().String())
	}
	ib := New(Config{
		Service: svc, Logger: logger, Context: shutdown, Now: b.clock.now,
		AllowedHosts: o.allowedHosts, Heartbeat: 200 * time.Millisecond, AuthGuard: o.guard,
		OIDC: oidcCfg, NoTokenSignIn: o.noTokenSignIn,
	})
	b.inbox = ib.(*handler)
	for _, p := range Patterns {
		mux.Handle(p, ib)
	}
	mux.Handle("/", BrowserNotFound(ib, rest.New(rest.Config{Service: svc, Logger: logger, Context: shutdown, RateLimit: 1e6, RateBurst: 1e6, AuthGuard: o.guard})))
	if o.tls {
		b.srv.StartTLS()
	} else {
		b.srv.Start()
	}
	t.Cleanup(b.srv.Close)
	t.Cleanup(stop) // runs first: ends live streams so Close can return
	logs.FailOnErrors(t)

	b.admin = "admin-secret-0123456789"
	if err := svc.BootstrapAdmin(ctx, b.admin); err != nil {
		t.Fatalf("bootstrap admin: %v", err)
	}
	admin, err := svc.Authenticate(ctx, b.admin)
	if err != nil {
		t.Fatalf("authenticate admin: %v", err)
	}
	b.callers["admin"] = admin
	mint := func(name string, role airlock.Role, principal string, scopes ...string) string {
		tok, secret, err := svc.CreateToken(ctx, admin, airlock.NewTokenInput{Name: name, Role: role, Principal: principal, Scopes: scopes})
		if err != nil {
			t.Fatalf("create token %s: %v", name, err)
		}
		b.callers[name] = airlock.Caller{Token: tok}
		return secret
	}
	b.agent = mint("release bot", airlock.RoleAgent, "bot", airlock.ScopeWorkWrite)
	b.agentB = mint("other bot", airlock.RoleAgent, "bot2")
	b.reviewer = mint("Carol (reviewer)", airlock.RoleReviewer, "carol")
	b.reviewerB = mint("Dan (reviewer)", airlock.RoleReviewer, "dan")
	return b
}

// instance registers an adapter instance for the agent.
func (b *bundle) instance(t testing.TB, name string) string {
	t.Helper()
	inst, err := b.svc.RegisterInstance(context.Background(), b.callers["release bot"], airlock.InstanceInput{Name: name})
	if err != nil {
		t.Fatalf("register instance: %v", err)
	}
	return inst.ID
}

// createREST asks for approval of a tool call over the REST API, as an
// adapter does, and returns the status and the decoded body.
func (b *bundle) createREST(t testing.TB, instanceID string, body any) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // send <, > and & as they are
	if err := enc.Encode(body); err != nil {
		t.Fatalf("encode: %v", err)
	}
	r, err := testkit.Call(context.Background(), b.srv.Client(), "POST", b.srv.URL+"/v1/instances/"+instanceID+"/approval-requests",
		b.agent, buf.String(), "Idempotency-Key", airlock.NewID("k_"))
	if err != nil {
		t.Fatalf("create over REST: %v", err)
	}
	return r.Status, r.Body
}

// toolCall creates a pending tool call over REST and returns its ID.
func (b *bundle) toolCall(t testing.TB, instanceID, tool string, args map[string]any, reasoning string) string {
	t.Helper()
	status, out := b.createREST(t, instanceID, map[string]any{"tool": tool, "arguments": args, "timeout": "30m", "agent_reasoning": reasoning})
	if status != http.StatusCreated {
		t.Fatalf("create %s: status %d: %v", tool, status, out)
	}
	return out["id"].(string)
}

// mcp creates an MCP request as the agent.
func (b *bundle) mcp(t testing.TB, in provider.MCPRequestInput) airlock.Request {
	t.Helper()
	if in.Kind == "" {
		in.Kind = airlock.KindWorkChange
	}
	if in.Proposal == nil {
		in.Proposal = &airlock.Proposal{Mode: airlock.ProposalAdvisory}
	}
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = airlock.NewID("k_")
	}
	r, _, err := b.svc.CreateMCPRequest(context.Background(), b.callers["release bot"], in)
	if err != nil {
		t.Fatalf("create MCP request: %v", err)
	}
	return r
}

// get reads a request as the reviewer.
func (b *bundle) get(t testing.TB, id string) airlock.Request {
	t.Helper()
	r, err := b.svc.Request(context.Background(), b.callers["Carol (reviewer)"], id, 0)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return r
}

// browserless is a cookie-keeping HTTP client that does not follow
// redirects, for tests of the inbox without a browser.
type browserless struct {
	b      *bundle
	client *http.Client
}

func (b *bundle) newClient(t testing.TB) *browserless {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := *b.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browserless{b: b, client: &c}
}

// signedInClient returns a client signed in with token, and its session's
// CSRF token.
func (b *bundle) signedInClient(t testing.TB, token string) (*browserless, string) {
	t.Helper()
	c := b.newClient(t)
	return c, c.signin(t, token)
}

// page is a finished exchange.
type reply struct {
	status int
	header http.Header
	body   string
}

func (c *browserless) do(t testing.TB, method, path string, form url.Values, header map[string]string) reply {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.b.srv.URL+path, body)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := c.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, header: res.Header, body: string(data)}
}

// sessionID returns the session ID of the client's cookie.
func (c *browserless) sessionID(t testing.TB) string {
	t.Helper()
	u, _ := url.Parse(c.b.srv.URL)
	for _, ck := range c.client.Jar.Cookies(u) {
		if ck.Name == sessionCookie {
			return ck.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of a page's forms.
func csrf(t testing.TB, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in page:\n%s", page)
	}
	return m[1]
}

// signedOut checks that c's session is over: the pending page sends it to
// sign-in, to location when that is not "". what names the moment, for the
// failure.
func (c *browserless) signedOut(t testing.TB, what, location string) {
	t.Helper()
	r := c.do(t, "GET", "/", nil, nil)
	if r.status != http.StatusSeeOther || location != "" && r.header.Get("Location") != location {
		t.Fatalf("%s: GET / answered %d %q, want a redirect to sign-in %s", what, r.status, r.header.Get("Location"), location)
	}
}

// signin signs the client in with token and returns the session's CSRF token.
func (c *browserless) signin(t testing.TB, token string) string {
	t.Helper()
	form := c.do(t, "GET", "/signin", nil, nil)
	r := c.do(t, "POST", "/signin", url.Values{"csrf": {csrf(t, form.body)}, "token": {token}, "next": {"/"}}, nil)
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign in: status %d:\n%s", r.status, r.body)
	}
	home := c.do(t, "GET", "/", nil, nil)
	if home.status != http.StatusOK {
		t.Fatalf("after sign-in, / answered %d", home.status)
	}
	return csrf(t, home.body)
}
