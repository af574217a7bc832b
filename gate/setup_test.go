package gate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/testkit/apitest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// binaries builds, once, the binaries under test: the real airlock and the
// Go-SDK upstream server of testdata/upstream.
func binaries(t testing.TB) (airlock, upstream string) {
	t.Helper()
	return testkit.Airlock(t, false), testkit.Build(t, "./testdata/upstream", false)
}

// rawUpstream builds, once, the scripted upstream of testdata/rawupstream.
func rawUpstream(t testing.TB) string {
	t.Helper()
	return testkit.Build(t, "./testdata/rawupstream", false)
}

// server is a running Airlock (provider and REST API over a real SQLite
// file, in process) with an agent for the gate and a reviewer.
type server struct {
	url         string
	agent       *client.Client
	reviewer    *client.Client
	agentSecret string
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := apitest.Start(t, apitest.Config{})
	agent, agentSecret := s.Mint(t, "gate", airlock.RoleAgent, "alice")
	reviewer, _ := s.Mint(t, "reviewer", airlock.RoleReviewer, "carol")
	return &server{url: s.URL, agent: agent, reviewer: reviewer, agentSecret: agentSecret}
}

// pending waits until a pending request for tool appears and returns it.
func (s *server) pending(t *testing.T, tool string) *client.ApprovalRequest {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		page, err := s.reviewer.ListRequests(context.Background(), client.ListRequestsOptions{State: airlock.StatePending, Tool: tool})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) > 0 {
			return &page.Items[0]
		}
		time.Sleep(10 * time.Millisecond) // nothing to wait on across processes: poll with a deadline
	}
	t.Fatalf("no pending request for %s within 20s", tool)
	return nil
}

// waitState polls a request until it is in state.
func (s *server) waitState(t *testing.T, id string, state airlock.State) *client.ApprovalRequest {
	t.Helper()
	// A minute, not the request's deadline: a request left pending by a
	// bug fails the test now rather than when it expires.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := s.agent.WaitRequest(ctx, id, &client.WaitOptions{PollWait: 5 * time.Second})
	if err != nil || r.State != state {
		t.Fatalf("request %s: %+v %v, want %s", id, r, err, state)
	}
	return r
}

// gateProc is a running `airlock gate` with an MCP client session on it.
type gateProc struct {
	t        *testing.T
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	client   *mcp.Client
	cs       *mcp.ClientSession
	stderr   *testkit.Buffer
	badLines chan string // stdout lines that are not JSON-RPC
	progress chan *mcp.ProgressNotificationParams
	changed  chan struct{} // a tools/list_changed notification arrived
	log      string        // the upstream's record of runs
	init     string        // where rawupstream records the initialize params it got
	wire     *wire         // every message between the client and the gate, as sent
	done     chan struct{}
	exitErr  error
	stopOnce *sync.Once
}

// Stop stops the gate once (see stop).
func (g *gateProc) Stop() { g.stopOnce.Do(g.stop) }

// tools lists the gate's tools (the first page) and their names, in the
// order the gate gave them.
func (g *gateProc) tools(t *testing.T) ([]*mcp.Tool, []string) {
	t.Helper()
	res, err := g.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(res.Tools))
	for i, tl := range res.Tools {
		names[i] = tl.Name
	}
	return res.Tools, names
}

// gateOptions configures startGate.
type gateOptions struct {
	rules    string   // JSON rules, written to a file, or ""
	flags    []string // more flags for airlock gate
	upstream []string // the upstream command; default the Go-SDK upstream
	// upstreamURL, instead, is an HTTP upstream's endpoint, with headers
	// ("Name: value") for it.
	upstreamURL string
	headers     []string
	env         []string
	// client configures the MCP client (its capabilities and handlers);
	// startGate adds its progress and tool-list handlers when unset.
	client *mcp.ClientOptions
	// clientInfo is the MCP client's implementation (default
	// gate-test-client 1.0).
	clientInfo *mcp.Implementation
	// revision is the MCP revision the client offers first (default: the
	// SDK's newest, 2026-07-28).
	revision string
}

// startGate runs `airlock gate` (the real binary) in front of an upstream
// and connects a Go-SDK MCP client to its stdio. Every stdout line is
// checked to be a JSON-RPC message.
func (s *server) startGate(t *testing.T, o gateOptions) *gateProc {
	t.Helper()
	return s.startGateIn(t, o, "")
}

// startGateIn is startGate with the gate's --journal directory (default:
// a fresh one).
func (s *server) startGateIn(t *testing.T, o gateOptions, journal string) *gateProc {
	t.Helper()
	bin, up := binaries(t)
	dir := t.TempDir()
	if journal == "" {
		journal = filepath.Join(dir, "journal")
	}
	if o.upstream == nil && o.upstreamURL == "" {
		o.upstream = []string{up}
	}
	args := []string{"gate", "--url", s.url, "--journal", journal, "--progress-interval", "50ms", "--log-level", "info"}
	if o.rules != "" {
		args = append(args, "--rules", testkit.TempFile(t, "rules.json", o.rules))
	}
	args = append(args, o.flags...)
	if o.upstreamURL != "" {
		args = append(args, "--upstream-url", o.upstreamURL)
		for _, h := range o.headers {
			args = append(args, "--header", h)
		}
	} else {
		args = append(append(args, "--"), o.upstream...)
	}
	g := &gateProc{t: t, stderr: &testkit.Buffer{}, badLines: make(chan string, 100),
		progress: make(chan *mcp.ProgressNotificationParams, 1000), changed: make(chan struct{}, 10),
		log: filepath.Join(dir, "upstream.log"), init: filepath.Join(dir, "upstream-init.json"), wire: &wire{}, done: make(chan struct{})}
	g.cmd = exec.Command(bin, args...)
	g.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "AIRLOCK_AGENT_TOKEN=" + s.agentSecret, "UPSTREAM_LOG=" + g.log, "UPSTREAM_INIT=" + g.init}, o.env...)
	g.cmd.Stderr = g.stderr
	stdin, stdout := testkit.Pipes(t, g.cmd)
	g.stdin = stdin
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	checked, w := io.Pipe()
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var msg struct {
				JSONRPC string `json:"jsonrpc"`
			}
			if json.Unmarshal(line, &msg) != nil || msg.JSONRPC != "2.0" {
				g.badLines <- string(line)
			}
			g.wire.add(&g.wire.fromGate, line) // before the client reads it
			w.Write(append(line, '\n'))
		}
		w.Close()
	}()
	go func() {
		g.exitErr = g.cmd.Wait()
		close(g.done)
	}()
	var opts mcp.ClientOptions
	if o.client != nil {
		opts = *o.client
	}
	if opts.ProgressNotificationHandler == nil {
		opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			g.progress <- req.Params
		}
	}
	if opts.ToolListChangedHandler == nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case g.changed <- struct{}{}:
			default:
			}
		}
	}
	info := o.clientInfo
	if info == nil {
		info = &mcp.Implementation{Name: "gate-test-client", Version: "1.0"}
	}
	c := mcp.NewClient(info, &opts)
	g.client = c
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: checked, Writer: &recordingWriter{stdin, g.wire}}, &mcp.ClientSessionOptions{ProtocolVersion: o.revision})
	g.cs = cs
	if err != nil {
		g.cmd.Process.Kill()
		<-g.done
		t.Fatalf("connect to airlock gate: %v\nstderr:\n%s", err, g.stderr.String())
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(g.stop) })
	g.stopOnce = &once
	return g
}

// stop closes the client session (the gate's stdin), waits for the gate
// to exit and checks it exited cleanly with nothing but protocol on
// stdout.
func (g *gateProc) stop() {
	t := g.t
	t.Helper()
	// Close the gate's stdin as a client that goes away does: the SDK's
	// own Close would first wait for the calls in flight.
	g.stdin.Close()
	closed := make(chan struct{})
	go func() {
		<-g.done
		g.cs.Close()
		close(closed)
	}()
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		g.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, on stderr
		<-g.done
		<-closed
		t.Errorf("airlock gate did not exit within 30s of its client closing\nstderr:\n%s", g.stderr.String())
		return
	}
	<-closed
	if g.exitErr != nil {
		t.Errorf("airlock gate exited with %v\nstderr:\n%s", g.exitErr, g.stderr.String())
	}
	select {
	case line := <-g.badLines:
		t.Errorf("airlock gate wrote a non-JSON-RPC line to stdout: %q", line)
	default:
	}
}

// runs returns the upstream's record of tool runs.
func (g *gateProc) runs() []string {
	data, err := os.ReadFile(g.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		g.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// text joins a result's text content.
func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// wire records the messages between the MCP client and the gate, byte for
// byte, to compare what the gate forwards with what the upstream sent.
type wire struct {
	mu               sync.Mutex
	toGate, fromGate [][]byte
}

func (w *wire) add(to *[][]byte, msg []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*to = append(*to, bytes.Clone(bytes.TrimSpace(msg)))
}

// wireMessage is a JSON-RPC message with its parts raw.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func decodeWire(data []byte) wireMessage {
	var m wireMessage
	json.Unmarshal(data, &m)
	return m
}

// result returns the raw result the gate answered the client's last
// request of method with, byte for byte.
func (w *wire) result(t *testing.T, method string) json.RawMessage {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var id json.RawMessage
	for _, data := range w.toGate {
		if m := decodeWire(data); m.Method == method && m.ID != nil {
			id = m.ID
		}
	}
	if id == nil {
		t.Fatalf("the client sent no %s", method)
	}
	for _, data := range w.fromGate {
		if m := decodeWire(data); m.Method == "" && bytes.Equal(m.ID, id) {
			if m.Result == nil {
				t.Fatalf("the gate answered %s with %s", method, data)
			}
			return m.Result
		}
	}
	t.Fatalf("the gate did not answer %s (id %s)", method, id)
	return nil
}

// request returns the raw params of the last request of method the gate
// sent the client, byte for byte.
func (w *wire) request(t *testing.T, method string) json.RawMessage {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.fromGate) - 1; i >= 0; i-- {
		if m := decodeWire(w.fromGate[i]); m.Method == method && m.ID != nil {
			return m.Params
		}
	}
	t.Fatalf("the gate sent the client no %s", method)
	return nil
}

// recordingWriter records what the client writes to the gate.
type recordingWriter struct {
	io.WriteCloser
	wire *wire
}

func (r *recordingWriter) Write(p []byte) (int, error) {
	r.wire.add(&r.wire.toGate, p)
	return r.WriteCloser.Write(p)
}
