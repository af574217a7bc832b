package replicas

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store/postgres"
)

// adminToken is every replica's bootstrap admin token (--admin-token), so
// that replicas started together agree on it.
const adminToken = "replicas-admin-token-0123456789"

// replica is one real `airlock serve` process.
type replica = testkit.Process

// startReplica runs `airlock serve` on db with the test flags plus extra,
// with this process's AIRLOCK_* variables removed, and waits until it
// listens. It is killed at the end of the test if still running.
func startReplica(t testing.TB, db string, extra ...string) *replica {
	t.Helper()
	r, err := tryStartReplica(t, db, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cluster is n replicas on one fresh schema, with an agent and a reviewer
// token minted.
type cluster struct {
	schema   string
	db       string // the --db URL every replica gets
	replicas []*replica
	agent    string
	reviewer string
	c        *client
	// flags are the extra serve flags every replica runs with.
	flags []string
}

// startCluster starts n replicas together on a fresh schema (they migrate
// it together, under the migration lock) and mints the tokens. dbParams
// are extra URL parameters (name, value pairs).
func startCluster(t testing.TB, n int, dbParams ...string) *cluster {
	t.Helper()
	return startClusterWith(t, n, nil, dbParams...)
}

// startClusterWith is startCluster with extra serve flags for every
// replica (cluster.flags, which restarts take too).
func startClusterWith(t testing.TB, n int, flags []string, dbParams ...string) *cluster {
	t.Helper()
	schema := testkit.CreateSchema(t, "t_rep_")
	cl := &cluster{schema: schema, db: testkit.SchemaURL(t, schema, dbParams...), replicas: make([]*replica, n), flags: flags}
	testkit.Airlock(t, testkit.Race) // build on the test's goroutine, where a failure may stop the test
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			// startReplica fails the test with Fatal, which must run on
			// the test's goroutine: start here, check there.
			r, err := tryStartReplica(t, cl.db, cl.flags...)
			if err != nil {
				errs <- err
				return
			}
			cl.replicas[i] = r
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	cl.c = newClient(t)
	cl.agent = cl.c.mintToken(t, cl.replicas[0].URL, "agent")
	cl.reviewer = cl.c.mintToken(t, cl.replicas[0].URL, "reviewer")
	return cl
}

// tryStartReplica is startReplica for any goroutine: it returns what went
// wrong instead of failing the test.
func tryStartReplica(t testing.TB, db string, extra ...string) (*replica, error) {
	return testkit.TryServe(t, testkit.Airlock(t, testkit.Race), "", nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db,
		"--admin-token", adminToken, "--min-timeout", "1ms", "--rate-limit", "1000000", "--log-level", "warn"}, extra...)...)
}

// outputs returns every replica's output, for failure messages.
func (cl *cluster) outputs() string {
	var b strings.Builder
	for i, r := range cl.replicas {
		fmt.Fprintf(&b, "--- replica %d (%s):\n%s", i, r.URL, r.Out)
	}
	return b.String()
}

// store opens the cluster's schema directly, for tests that read the audit
// log; closed when t ends.
func (cl *cluster) store(t testing.TB) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), cl.db, postgres.WithMaxConns(2))
	if err != nil {
		t.Fatalf("open the cluster's database: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is an HTTP client for the REST API of any replica. Its transport
// keeps enough idle connections per replica for the tests' concurrency.
type client struct {
	hc *http.Client
}

func newClient(t testing.TB) *client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{hc: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// resp is a decoded reply.
type resp struct{ testkit.Reply }

// time returns a time at a dotted path, zero when absent.
func (r resp) time(path string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, r.Str(path))
	return t
}

// has reports whether the body has a value at the top-level key.
func (r resp) has(key string) bool {
	_, ok := r.Body[key]
	return ok
}

// do makes one request to base+path; body, when not empty, is sent as
// JSON. Extra headers come as name, value pairs. It returns transport
// errors, for callers that expect them (a killed replica).
func (c *client) do(ctx context.Context, method, base, path, token, body string, header ...string) (resp, error) {
	r, err := testkit.Call(ctx, c.hc, method, base+path, token, body, header...)
	return resp{r}, err
}

// call is do for requests that must reach the server: transport errors
// fail the test (from any goroutine: Errorf, then a zero resp).
func (c *client) call(t testing.TB, method, base, path, token, body string, header ...string) resp {
	t.Helper()
	r, err := c.do(context.Background(), method, base, path, token, body, header...)
	if err != nil {
		t.Errorf("%s %s%s: %v", method, base, path, err)
	}
	return r
}

// want reports (with Errorf) unless r has the given status.
func (r resp) want(t testing.TB, status int, what string) bool {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: status %d, want %d; body %s", what, r.Status, status, r.Raw)
		return false
	}
	return true
}

// mintToken mints a token of role with the admin token and returns its
// secret.
func (c *client) mintToken(t testing.TB, base, role string) string {
	t.Helper()
	r := c.call(t, "POST", base, "/v1/tokens", adminToken, fmt.Sprintf(`{"name":"replicas %s","role":%q}`, role, role))
	if !r.want(t, 201, "mint "+role) {
		t.FailNow()
	}
	return r.Str("secret")
}

// instance registers an instance for the agent and returns its ID.
func (cl *cluster) instance(t testing.TB, name string) string {
	t.Helper()
	r := cl.c.call(t, "POST", cl.replicas[0].URL, "/v1/instances", cl.agent, fmt.Sprintf(`{"name":%q}`, name))
	if !r.want(t, 201, "register an instance") {
		t.FailNow()
	}
	return r.Str("id")
}
