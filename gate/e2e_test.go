package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// e2eRules: fail gets a short window, so nobody decides it in time;
// drop_table is refused outright.
const e2eRules = `{
  "rules": [
    {"tool": "fail", "action": "gate", "timeout": "300ms"},
    {"tool": "drop_*", "action": "deny"},
    {"tool": "enable_extra", "action": "allow"}
  ]
}`

// TestGateEndToEnd drives the real airlock gate binary with the Go SDK's
// MCP client, in front of the Go-SDK upstream of testdata/upstream, while
// a reviewer decides over REST.
func TestGateEndToEnd(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	g := s.startGate(t, gateOptions{rules: e2eRules})
	ctx := context.Background()

	t.Run("mirrors tools, resources, templates and prompts", func(t *testing.T) {
		tools, names := g.tools(t)
		for _, tl := range tools {
			if tl.Name == "echo" && (tl.Annotations == nil || !tl.Annotations.ReadOnlyHint) {
				t.Errorf("echo lost its readOnlyHint: %+v", tl.Annotations)
			}
			if tl.Name == "write_note" && !strings.Contains(string(mustJSON(t, tl.InputSchema)), `"note"`) {
				t.Errorf("write_note's input schema was not mirrored: %s", mustJSON(t, tl.InputSchema))
			}
		}
		slices.Sort(names)
		if want := []string{"drop_table", "echo", "enable_extra", "fail", "getenv", "write_note"}; !reflect.DeepEqual(names, want) {
			t.Fatalf("tools %v, want %v", names, want)
		}
		res, err := g.cs.ListResources(ctx, nil)
		if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "note://readme" {
			t.Fatalf("resources: %+v %v", res, err)
		}
		read, err := g.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "note://readme"})
		if err != nil || read.Contents[0].Text != "hello from upstream" {
			t.Fatalf("read: %+v %v", read, err)
		}
		tmpls, err := g.cs.ListResourceTemplates(ctx, nil)
		if err != nil || len(tmpls.ResourceTemplates) != 1 {
			t.Fatalf("templates: %+v %v", tmpls, err)
		}
		read, err = g.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "note://notes/42"})
		if err != nil || read.Contents[0].Text != "note 42" {
			t.Fatalf("read through a template: %+v %v", read, err)
		}
		prompt, err := g.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}})
		if err != nil || prompt.Messages[0].Content.(*mcp.TextContent).Text != "Hello, Ada" {
			t.Fatalf("prompt: %+v %v", prompt, err)
		}
		comp, err := g.cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
			Argument: mcp.CompleteParamsArgument{Name: "name", Value: "b"}})
		if err != nil || !reflect.DeepEqual(comp.Completion.Values, []string{"bob", "bella"}) {
			t.Fatalf("complete: %+v %v", comp, err)
		}
	})

	t.Run("read-only tools pass straight through", func(t *testing.T) {
		before := countRequests(t, s)
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError || text(res) != "hi" {
			t.Fatalf("echo: %+v %v", res, err)
		}
		if after := countRequests(t, s); after != before {
			t.Fatalf("a read-only call asked for approval: %d requests, were %d", after, before)
		}
	})

	t.Run("a change of the upstream's tools reaches the client", func(t *testing.T) {
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "enable_extra", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("enable_extra: %+v %v", res, err)
		}
		for {
			select {
			case <-g.changed:
			case <-time.After(20 * time.Second):
				t.Fatal("no tools/list_changed within 20s")
			}
			tools, err := g.cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "extra" }) {
				break
			}
		}
		res, err = g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "extra", Arguments: map[string]any{}})
		if err != nil || text(res) != "extra" {
			t.Fatalf("the new tool: %+v %v", res, err)
		}
	})

	t.Run("the upstream never sees the agent's token", func(t *testing.T) {
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "getenv", Arguments: map[string]any{"name": "AIRLOCK_AGENT_TOKEN"}})
		if err != nil || text(res) != "" {
			t.Fatalf("AIRLOCK_AGENT_TOKEN upstream: %q %v", text(res), err)
		}
		res, err = g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "getenv", Arguments: map[string]any{"name": "UPSTREAM_LOG"}})
		if err != nil || text(res) != g.log {
			t.Fatalf("UPSTREAM_LOG upstream: %q %v", text(res), err)
		}
	})

	t.Run("approved: the exact call runs once, with progress while waiting", func(t *testing.T) {
		args := json.RawMessage(`{"note":"ship <it> & \"tell\" them"}`)
		params := &mcp.CallToolParams{Name: "write_note", Arguments: args}
		params.SetProgressToken("p-approve")
		type answer struct {
			res *mcp.CallToolResult
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := g.cs.CallTool(ctx, params)
			done <- answer{res, err}
		}()
		r := s.pending(t, "write_note")
		if r.Tool != "write_note" || !jsonEqual(t, r.Arguments, args) {
			t.Fatalf("requested %s %s, want write_note %s exactly as called", r.Tool, r.Arguments, args)
		}
		if len(g.runs()) != 1 { // the echo above
			t.Fatalf("the gated call ran before approval: %v", g.runs())
		}
		var last float64
		for range 3 {
			p := <-g.progress
			if p.ProgressToken != "p-approve" || p.Progress <= last || !strings.Contains(p.Message, r.ID) {
				t.Fatalf("progress while waiting: %+v (last %v)", p, last)
			}
			last = p.Progress
		}
		if _, err := s.reviewer.Approve(ctx, r.ID, "go ahead"); err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.err != nil || a.res.IsError || text(a.res) != `wrote ship <it> & "tell" them` {
			t.Fatalf("approved call: %+v %v", a.res, a.err)
		}
		if runs := g.runs(); len(runs) != 2 || runs[1] != `write_note ship <it> & "tell" them` {
			t.Fatalf("upstream runs %q", runs)
		}
		// The upstream's own progress comes through, still increasing. The
		// client's SDK may hand a notification to its handler after the
		// call's result, so wait for it rather than drain what is there.
		upstream := time.After(10 * time.Second)
		for sawUpstream := false; !sawUpstream; {
			select {
			case p := <-g.progress:
				if p.Progress <= last {
					t.Fatalf("progress went back: %v after %v", p.Progress, last)
				}
				last = p.Progress
				sawUpstream = p.Message == "writing"
			case <-upstream:
				t.Fatal("the upstream's progress notifications did not reach the client")
			}
		}
		got := s.waitState(t, r.ID, airlock.StateApproved)
		if got.Execution == nil || got.Execution.Status != airlock.ExecSucceeded {
			t.Fatalf("execution %+v, want succeeded", got.Execution)
		}
	})

	t.Run("denied: isError with the reviewer's note, nothing runs", func(t *testing.T) {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"note": "rm -rf"}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		r := s.pending(t, "write_note")
		if _, err := s.reviewer.Deny(ctx, r.ID, "not on a Friday"); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res == nil || !res.IsError || !strings.Contains(text(res), "denied") || !strings.Contains(text(res), "not on a Friday") {
			t.Fatalf("denied call: %+v", res)
		}
		if n := len(g.runs()); n != 2 {
			t.Fatalf("a denied call ran: %v", g.runs())
		}
	})

	t.Run("expired: isError saying nobody decided", func(t *testing.T) {
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "nobody decided") {
			t.Fatalf("expired call: %+v %v", res, err)
		}
		if n := len(g.runs()); n != 2 {
			t.Fatalf("an expired call ran: %v", g.runs())
		}
	})

	t.Run("the rules deny a tool outright", func(t *testing.T) {
		before := countRequests(t, s)
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "drop_table", Arguments: map[string]any{"table": "users"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "rules block") {
			t.Fatalf("denied by rules: %+v %v", res, err)
		}
		if countRequests(t, s) != before || len(g.runs()) != 2 {
			t.Fatal("a tool the rules deny asked for approval or ran")
		}
	})

	t.Run("the client's cancellation cancels the request", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := g.cs.CallTool(cctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"note": "never"}})
			done <- err
		}()
		r := s.pending(t, "write_note")
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call returned %v", err)
		}
		got := s.waitState(t, r.ID, airlock.StateCancelled)
		if got.Decision == nil || got.Decision.Status != airlock.StateCancelled {
			t.Fatalf("decision %+v", got.Decision)
		}
		if _, err := s.reviewer.Approve(ctx, r.ID, ""); !client.IsCode(err, airlock.CodeNotPending) {
			t.Fatalf("approving the cancelled request: %v", err)
		}
		if n := len(g.runs()); n != 2 {
			t.Fatalf("a cancelled call ran: %v", g.runs())
		}
	})

	t.Run("exit deletes the instance, cancelling what is pending", func(t *testing.T) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"note": "left behind"}})
		}()
		r := s.pending(t, "write_note")
		g.Stop()
		<-done
		s.waitState(t, r.ID, airlock.StateCancelled)
		if n := len(g.runs()); n != 2 {
			t.Fatalf("a call pending at exit ran: %v", g.runs())
		}
	})
}

// countRequests counts the agent's requests.
func countRequests(t *testing.T, s *server) int {
	t.Helper()
	n := 0
	for _, err := range s.agent.AllRequests(context.Background(), client.ListRequestsOptions{Limit: 200}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonEqual compares two JSON documents by meaning.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestGateUpstreamFailures: an approved call whose tool fails returns the
// upstream's own isError result and is reported failed; when the upstream
// server exits, the gate exits with an error.
func TestGateUpstreamFailures(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	g := s.startGate(t, gateOptions{})
	ctx := context.Background()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	r := s.pending(t, "fail")
	if _, err := s.reviewer.Approve(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || !res.IsError || !strings.Contains(text(res), "boom") {
		t.Fatalf("failed tool: %+v", res)
	}
	got := s.waitState(t, r.ID, airlock.StateApproved)
	if got.Execution == nil || got.Execution.Status != airlock.ExecFailed || !strings.Contains(got.Execution.Detail, "boom") {
		t.Fatalf("execution %+v, want failed with the tool's error", got.Execution)
	}
	if runs := g.runs(); len(runs) != 1 || runs[0] != "fail" {
		t.Fatalf("upstream runs %q", runs)
	}
}

// TestGateUpstreamExits: when the upstream server dies, the gate exits
// non-zero and deletes its instance. The gate initializes the upstream
// when its client initializes (or, at 2026-07-28, discovers), so that
// request gets the error. At 2026-07-28 the SDK's client then falls back
// to initialize, which finds the gate gone: its error is the fallback's.
func TestGateUpstreamExits(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			bin, _ := binaries(t)
			cmd := exec.Command(bin, "gate", "--url", s.url, "--journal", t.TempDir(), "--", "sh", "-c", "exit 3")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AIRLOCK_AGENT_TOKEN=" + s.agentSecret}
			stderr := &testkit.Buffer{}
			cmd.Stderr = stderr
			stdin, stdout := testkit.Pipes(t, cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			c := mcp.NewClient(&mcp.Implementation{Name: "gate-test-client", Version: "1.0"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
			if err == nil {
				cs.Close()
				t.Fatal("initialize through a gate whose upstream exited succeeded")
			}
			if rev != "2026-07-28" && !strings.Contains(err.Error(), "upstream MCP server") {
				t.Errorf("initialize failed with %v, want the upstream named", err)
			}
			stdin.Close()
			var ee *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "upstream MCP server") {
				t.Fatalf("gate in front of a dead upstream: %v\n%s", err, stderr.String())
			}
			if n := countRequests(t, s); n != 0 {
				t.Fatalf("%d requests", n)
			}
			if insts, err := s.agent.ListInstances(context.Background()); err != nil || len(insts) != 0 {
				t.Fatalf("the gate's instance is still there: %+v %v", insts, err)
			}
		})
	}
}

// TestGateSettlesDeadGatesJournals: at start, airlock gate settles the
// journal a dead gate left under --journal: a call that was claimed and
// never finished is reported unknown (never run again), and the settled
// journal is removed. The dead gate is simulated in process: a client.Gate
// whose call has started, whose journal lock is then released.
func TestGateSettlesDeadGatesJournals(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := context.Background()
	base := t.TempDir()
	inst, err := s.agent.RegisterInstance(ctx, "dead gate", nil)
	if err != nil {
		t.Fatal(err)
	}
	old, err := client.NewGate(client.GateConfig{Client: s.agent, InstanceID: inst.ID, JournalDir: filepath.Join(base, inst.ID)})
	if err != nil {
		t.Fatal(err)
	}
	started, release, ran := make(chan string), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ran)
		var id string
		old.Run(ctx, client.Call{Tool: "write_note", Arguments: []byte(`{"note":"x"}`), OnPending: func(r *client.ApprovalRequest) {
			if id == "" {
				id = r.ID
				if _, err := s.reviewer.Approve(ctx, r.ID, ""); err != nil {
					t.Error(err)
				}
			}
		}}, func(context.Context) error {
			started <- id
			<-release
			return nil
		})
	}()
	id := <-started
	old.Close() // the process "dies": its lock is gone, its journal says claimed

	g := s.startGateIn(t, gateOptions{}, base)
	got, err := s.agent.GetRequest(ctx, id)
	if err != nil || got.Execution == nil || got.Execution.Status != airlock.ExecUnknown {
		t.Fatalf("the dead gate's call: %+v %v, want reported unknown", got, err)
	}
	if _, err := os.Stat(filepath.Join(base, inst.ID)); !os.IsNotExist(err) {
		t.Fatalf("the settled journal is still there: %v", err)
	}
	g.Stop()
	close(release)
	<-ran
}
