package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/cmd/airlock/internal/bench"
	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) {
	// `airlock bench`, run in-process by the tests, re-executes this test
	// binary as its server, as it does the airlock binary (main).
	if bench.IsChild() {
		os.Exit(bench.ChildMain())
	}
	testkit.Main(m)
}

// binary builds the real airlock binary once per test run (with -race when
// the tests run with it) and returns its path.
func binary(t testing.TB) string {
	t.Helper()
	return testkit.Airlock(t, testkit.Race)
}

// serveNew runs `airlock serve` in-process, as startApp does, on a new
// database in a temporary folder with testAdmin as the admin token and
// flags added, and returns it with an API client for it.
func serveNew(t *testing.T, flags ...string) (*running, *api) {
	t.Helper()
	srv := startApp(t, nil, append([]string{"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "airlock.db"),
		"--admin-token", testAdmin}, flags...)...)
	return srv, newAPI(t, srv.url)
}

// running is an App serving in-process.
type running struct {
	addr   string
	url    string
	out    *testkit.Output
	cancel context.CancelFunc
	exited chan struct{} // closed when Run returns
	err    error         // Run's error, once exited is closed
}

// startApp runs `airlock serve args...` in-process with the given
// environment and waits until it listens.
func startApp(t *testing.T, env map[string]string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{out: testkit.NewOutput(), cancel: cancel, exited: make(chan struct{})}
	app := &App{Stdout: r.out, Stderr: r.out, LookupEnv: mapEnv(withTextLogs(env))}
	go func() {
		defer close(r.exited)
		r.err = app.Run(ctx, append([]string{"serve"}, args...))
	}()
	t.Cleanup(func() { r.stop(t) })
	r.addr = r.out.WaitFor(t, testkit.ListeningRE, r.exited)[2]
	r.url = "http://" + r.addr
	return r
}

// stop ends the server as SIGINT would and returns Run's error and how
// long shutting down took. It fails the test when shutdown takes a minute.
func (r *running) stop(t *testing.T) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	r.cancel()
	select {
	case <-r.exited:
	case <-time.After(time.Minute):
		t.Fatalf("server did not shut down within a minute; output:\n%s", r.out)
	}
	return time.Since(start), r.err
}

func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// api is a small HTTP client for the REST API.
type api struct {
	t   testing.TB
	url string
	hc  *http.Client
}

func newAPI(t testing.TB, url string) *api {
	hc := &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}
	t.Cleanup(hc.CloseIdleConnections)
	return &api{t: t, url: url, hc: hc}
}

// resp is a decoded reply.
type resp struct{ testkit.Reply }

// call makes one request; body, when not empty, is sent as JSON. Extra
// headers come as name, value pairs. Transport errors fail the test.
func (a *api) call(method, path, token, body string, header ...string) resp {
	a.t.Helper()
	r, err := a.try(method, path, token, body, header...)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// try is call that returns transport errors, for callers that expect them.
func (a *api) try(method, path, token, body string, header ...string) (resp, error) {
	r, err := testkit.Call(context.Background(), a.hc, method, a.url+path, token, body, header...)
	return resp{r}, err
}

// want fails the test unless r has the given status.
func (r resp) want(t testing.TB, status int, what string) resp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.Status, status, r.Raw)
	}
	return r
}

// mintToken mints a token of role with the admin token and returns its secret.
func (a *api) mintToken(admin, name, role string) string {
	a.t.Helper()
	r := a.call("POST", "/v1/tokens", admin, fmt.Sprintf(`{"name":%q,"role":%q}`, name, role)).want(a.t, 201, "mint "+role)
	return r.Str("secret")
}

// inboxSession is a reviewer signed in to the web inbox.
type inboxSession struct {
	url, csrf string
	hc        *http.Client
}

// page is an answer of the inbox, its body read.
type page struct {
	*http.Response
	body string
}

// signIn signs in to the inbox with token, as a browser would.
func signIn(t *testing.T, base, token string) *inboxSession {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	s := &inboxSession{url: base, hc: &http.Client{Transport: tr, Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	form := s.do(t, "GET", "/signin", nil)
	s.do(t, "POST", "/signin", url.Values{"csrf": {csrfOf(t, form.body)}, "token": {token}, "next": {"/"}})
	home := s.do(t, "GET", "/", nil)
	if home.StatusCode != 200 {
		t.Fatalf("the inbox after signing in: %d\n%s", home.StatusCode, home.body)
	}
	s.csrf = csrfOf(t, home.body)
	return s
}

// decide posts the decision form of request id.
func (s *inboxSession) decide(t *testing.T, id, action string) page {
	t.Helper()
	return s.do(t, "POST", "/requests/"+id+"/decide", url.Values{"csrf": {s.csrf}, "action": {action}, "confirmed": {"yes"}})
}

func (s *inboxSession) do(t *testing.T, method, path string, form url.Values) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, err := s.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{res, string(b)}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf returns the CSRF token of a page's forms.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", body)
	}
	return m[1]
}

// withTextLogs is env with AIRLOCK_LOG_FORMAT=text unless it sets one: the
// tests read the server's notices and log lines as text, which a server
// writes by default only to a terminal (TestLogFormatDefault).
func withTextLogs(env map[string]string) map[string]string {
	if _, ok := env["AIRLOCK_LOG_FORMAT"]; ok {
		return env
	}
	out := map[string]string{"AIRLOCK_LOG_FORMAT": "text"}
	for k, v := range env {
		out[k] = v
	}
	return out
}
