package replicas

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/postgres"
	"github.com/jackc/pgx/v5"
)

// The test database: AIRLOCK_TEST_POSTGRES, or the PostgreSQL these
// machines run.
const (
	urlEnv     = "AIRLOCK_TEST_POSTGRES"
	defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

var reach struct {
	once sync.Once
	url  string
	err  error
}

// databaseURL returns the test database's URL once it is known to answer.
// When it does not, the test fails under CI (CI=true: the PostgreSQL tests
// are mandatory there) and is skipped elsewhere, naming the variable.
func databaseURL(t testing.TB) string {
	t.Helper()
	reach.once.Do(func() {
		reach.url = os.Getenv(urlEnv)
		if reach.url == "" {
			reach.url = defaultURL
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, reach.url)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		reach.err = err
	})
	if reach.err != nil {
		msg := fmt.Sprintf("PostgreSQL at %s does not answer: %v; set %s to the URL of a database these tests may create schemas in",
			redact(reach.url), reach.err, urlEnv)
		if inCI() {
			t.Fatalf("%s (CI=true: the PostgreSQL tests are mandatory under CI)", msg)
		}
		t.Skip(msg)
	}
	return reach.url
}

func inCI() bool { return os.Getenv("CI") == "true" }

// redact hides a URL's password.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unreadable URL)"
	}
	return u.Redacted()
}

// exec runs one statement on a connection of its own.
func execSQL(dbURL, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// freshSchema creates a schema, dropped with everything in it when t ends
// (after the replicas using it are killed: cleanups run last first), and
// returns its name.
func freshSchema(t testing.TB) string {
	t.Helper()
	base := databaseURL(t)
	var b [6]byte
	rand.Read(b[:])
	schema := "t_rep_" + hex.EncodeToString(b[:])
	if err := execSQL(base, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if err := execSQL(base, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// schemaURL returns the database URL that puts Airlock in schema, as an
// operator writes it for --db, with extra URL parameters (name, value
// pairs) set.
func schemaURL(t testing.TB, schema string, params ...string) string {
	t.Helper()
	u, err := url.Parse(databaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

var (
	buildOnce sync.Once
	buildErr  error
)

// binary builds the real airlock binary once per test run (with -race when
// the tests run with it) and returns its path.
func binary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(binDir, "airlock")
	buildOnce.Do(func() {
		args := []string{"build", "-o", bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "../../cmd/airlock")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// output collects what a process writes and lets a test wait for a line.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

var listeningRE = regexp.MustCompile(`Airlock listening on (http://\S+) `)

// adminToken is every replica's bootstrap admin token (--admin-token), so
// that replicas started together agree on it.
const adminToken = "replicas-admin-token-0123456789"

// replica is one real `airlock serve` process.
type replica struct {
	cmd    *exec.Cmd
	out    *output
	exited chan struct{} // closed once the process is reaped
	url    string
}

// startReplica runs `airlock serve` on db with the test flags plus extra,
// with this process's AIRLOCK_* variables removed, and waits until it
// listens. It is killed at the end of the test if still running.
func startReplica(t testing.TB, db string, extra ...string) *replica {
	t.Helper()
	r, problem := tryStartReplica(t, db, extra...)
	if problem != "" {
		t.Fatal(problem)
	}
	return r
}

// kill kills the process with SIGKILL (kill -9) and reaps it.
func (r *replica) kill() {
	r.cmd.Process.Kill()
	<-r.exited
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
	schema := freshSchema(t)
	cl := &cluster{schema: schema, db: schemaURL(t, schema, dbParams...), replicas: make([]*replica, n), flags: flags}
	binary(t) // build on the test's goroutine, where a failure may stop the test
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			// startReplica fails the test with Fatal, which must run on
			// the test's goroutine: start here, check there.
			r, err := tryStartReplica(t, cl.db, cl.flags...)
			if err != "" {
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
	cl.agent = cl.c.mintToken(t, cl.replicas[0].url, "agent")
	cl.reviewer = cl.c.mintToken(t, cl.replicas[0].url, "reviewer")
	return cl
}

// tryStartReplica is startReplica for any goroutine: it returns what went
// wrong instead of failing the test.
func tryStartReplica(t testing.TB, db string, extra ...string) (*replica, string) {
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--admin-token", adminToken,
		"--min-timeout", "1ms", "--rate-limit", "1000000", "--log-level", "warn"}, extra...)
	r := &replica{cmd: exec.Command(binary(t), args...), out: newOutput(), exited: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIRLOCK_") {
			r.cmd.Env = append(r.cmd.Env, kv)
		}
	}
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		return nil, err.Error()
	}
	go func() {
		r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(r.kill)
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for {
		r.out.mu.Lock()
		m := listeningRE.FindStringSubmatch(r.out.buf.String())
		changed := r.out.changed
		r.out.mu.Unlock()
		if m != nil {
			r.url = m[1]
			return r, ""
		}
		select {
		case <-changed:
		case <-r.exited:
			return nil, "a replica exited before listening:\n" + r.out.String()
		case <-timeout.C:
			return nil, "a replica did not listen within a minute:\n" + r.out.String()
		}
	}
}

// outputs returns every replica's output, for failure messages.
func (cl *cluster) outputs() string {
	var b strings.Builder
	for i, r := range cl.replicas {
		fmt.Fprintf(&b, "--- replica %d (%s):\n%s", i, r.url, r.out)
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

// allEvents reads the whole audit log.
func allEvents(t testing.TB, s *postgres.Store) []airlock.Event {
	t.Helper()
	var all []airlock.Event
	for after := int64(0); ; {
		es, err := s.ListEvents(context.Background(), after, 1000)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		if len(es) == 0 {
			return all
		}
		all = append(all, es...)
		after = es[len(es)-1].ID
	}
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
type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// str returns a string at a dotted path such as "decision.status".
func (r resp) str(path string) string {
	var v any = r.body
	for key := range strings.SplitSeq(path, ".") {
		m, _ := v.(map[string]any)
		v = m[key]
	}
	s, _ := v.(string)
	return s
}

// time returns a time at a dotted path, zero when absent.
func (r resp) time(path string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, r.str(path))
	return t
}

// has reports whether the body has a value at the top-level key.
func (r resp) has(key string) bool {
	_, ok := r.body[key]
	return ok
}

// do makes one request to base+path; body, when not empty, is sent as
// JSON. Extra headers come as name, value pairs. It returns transport
// errors, for callers that expect them (a killed replica).
func (c *client) do(ctx context.Context, method, base, path, token, body string, header ...string) (resp, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return resp{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, err
	}
	out := resp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	if strings.Contains(res.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			return resp{}, fmt.Errorf("decode %s: %v", raw, err)
		}
	}
	return out, nil
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
	if r.status != status {
		t.Errorf("%s: status %d, want %d; body %s", what, r.status, status, r.raw)
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
	return r.str("secret")
}

// instance registers an instance for the agent and returns its ID.
func (cl *cluster) instance(t testing.TB, name string) string {
	t.Helper()
	r := cl.c.call(t, "POST", cl.replicas[0].url, "/v1/instances", cl.agent, fmt.Sprintf(`{"name":%q}`, name))
	if !r.want(t, 201, "register an instance") {
		t.FailNow()
	}
	return r.str("id")
}
