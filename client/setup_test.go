package client_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/testkit/apitest"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(gateHelper())
	}
	testkit.Main(m)
}

// bundle is one test's running Airlock: a real SQLite file, the provider
// with its expiry scheduler, and the REST API behind an httptest server;
// plus clients for an admin, an agent (with a registered instance) and a
// reviewer, all made with the client under test.
type bundle struct {
	url      string
	hc       *http.Client
	clock    *shiftedClock // nil for a server binary
	admin    *client.Client
	agent    *client.Client
	reviewer *client.Client
	// agentSecret is the agent's token, for clients a test builds itself.
	agentSecret string
	instance    string
	// pid is the server's process, for a server binary (0 otherwise).
	pid int
}

// setup starts a server in process and populates it.
func setup(t testing.TB) *bundle {
	t.Helper()
	return setupWith(t, apitest.Config{})
}

// setupWith is setup with the server adjusted by cfg (its clock is the
// bundle's).
func setupWith(t testing.TB, cfg apitest.Config) *bundle {
	t.Helper()
	clock := &shiftedClock{}
	cfg.Clock = clock
	s := apitest.Start(t, cfg)
	b := &bundle{url: s.URL, hc: s.HTTP, clock: clock}
	b.populate(t)
	return b
}

// adminSecret is the bootstrap admin token of every test server.
const adminSecret = apitest.AdminSecret

// populate mints the agent and reviewer and registers the agent's instance.
func (b *bundle) populate(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	b.admin = b.client(t, adminSecret)
	agent := b.mint(t, "agent", airlock.RoleAgent, "alice")
	b.agentSecret = agent.Secret
	b.agent = b.client(t, agent.Secret)
	b.reviewer = b.client(t, b.mint(t, "reviewer", airlock.RoleReviewer, "carol").Secret)
	in, err := b.agent.RegisterInstance(ctx, "client test", nil)
	if err != nil {
		t.Fatalf("register instance: %v", err)
	}
	b.instance = in.ID
}

// client returns a client of the bundle's server with secret.
func (b *bundle) client(t testing.TB, secret string, opts ...client.Option) *client.Client {
	t.Helper()
	opts = append([]client.Option{client.WithHTTPClient(b.hc), client.WithRetry(client.Retry{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})}, opts...)
	c, err := client.New(b.url, secret, opts...)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}

// mint creates a token as the admin.
func (b *bundle) mint(t testing.TB, name string, role airlock.Role, principal string) *client.CreatedToken {
	t.Helper()
	tok, err := b.admin.CreateToken(context.Background(), client.CreateTokenInput{Name: name, Role: role, Principal: principal})
	if err != nil {
		t.Fatalf("mint %s: %v", name, err)
	}
	return tok
}

// create asks for approval of a refund as the agent.
func (b *bundle) create(t testing.TB, key, args string) *client.ApprovalRequest {
	t.Helper()
	r, _, err := b.agent.CreateRequest(context.Background(), b.instance, key, client.CreateRequestInput{
		Tool: "issue_refund", Arguments: []byte(args), Timeout: "10m",
	})
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return r
}

// approved creates a request and approves it as the reviewer.
func (b *bundle) approved(t testing.TB, key string) *client.ApprovalRequest {
	t.Helper()
	r := b.create(t, key, `{"amount":4900}`)
	r, err := b.reviewer.Approve(context.Background(), r.ID, "")
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	return r
}

// shiftedClock is the real clock moved by an offset a test can change, so
// deadlines and expires_at can be passed without sleeping while the
// scheduler and long polls run on real time.
type shiftedClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *shiftedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset).UTC().Truncate(time.Microsecond)
}

// Advance moves the clock forward by d.
func (c *shiftedClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// faultyTransport wraps a RoundTripper and fails chosen requests: before
// sending (the server never sees them) or after the server answered (the
// answer is lost).
type faultyTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	// rules are tried in order; each fails up to n matching requests.
	rules []*fault
}

type fault struct {
	method, pathSuffix string
	after              bool // drop the answer (the server acted)
	n                  int
	hits               int
}

func (f *faultyTransport) add(method, pathSuffix string, after bool, n int) *fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &fault{method: method, pathSuffix: pathSuffix, after: after, n: n}
	f.rules = append(f.rules, r)
	return r
}

func (f *faultyTransport) match(req *http.Request) *fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.hits < r.n && req.Method == r.method && strings.HasSuffix(req.URL.Path, r.pathSuffix) {
			r.hits++
			return r
		}
	}
	return nil
}

func (f *faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := f.match(req)
	if r == nil {
		return f.next.RoundTrip(req)
	}
	if !r.after {
		return nil, &netErr{"injected: connection refused before sending"}
	}
	res, err := f.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return nil, &netErr{"injected: connection reset after the server answered"}
}

type netErr struct{ msg string }

func (e *netErr) Error() string { return e.msg }

// faulty returns an agent client whose transport fails as the test says.
func (b *bundle) faulty(t testing.TB, secret string) (*client.Client, *faultyTransport) {
	t.Helper()
	ft := &faultyTransport{next: b.hc.Transport}
	c, err := client.New(b.url, secret,
		client.WithHTTPClient(&http.Client{Transport: ft}),
		client.WithRetry(client.Retry{Attempts: 4, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	return c, ft
}
