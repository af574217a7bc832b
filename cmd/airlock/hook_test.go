package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// The hook is tested as the agents run it: the real binary as a process,
// the agent's payload on stdin, its answer read from stdout and the exit
// code, against a real `airlock serve`.

// hookSrv is a server the hook tests ask, with an agent and a reviewer.
type hookSrv struct {
	srv      *proc
	api      *api
	dir      string
	agent    string
	reviewer string
}

func startHookSrv(t *testing.T, extra ...string) *hookSrv {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"),
		"--admin-token", testAdmin, "--log-level", "error"}, extra...)
	h := &hookSrv{srv: startProcess(t, dir, nil, args...), dir: dir}
	h.api = newAPI(t, h.srv.URL)
	h.agent = h.api.mintToken(testAdmin, "claude agent", "agent")
	h.reviewer = h.api.mintToken(testAdmin, "phone reviewer", "reviewer")
	return h
}

var hookSessions atomic.Int64

// payload returns a fixture's payload (hook/testdata), with its session and
// tool-use IDs made unique to the test so tests sharing a server do not
// meet.
func payload(t *testing.T, name string) (data []byte, session string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "hook", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Source  string          `json:"source"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(raw, &f); err != nil || f.Source == "" {
		t.Fatalf("fixture %s: %v (every fixture names its source)", name, err)
	}
	session = fmt.Sprintf("sess-%s-%d", t.Name(), hookSessions.Add(1))
	session = strings.NewReplacer("/", "-", " ", "-").Replace(session)
	return bytes.ReplaceAll(f.Payload, []byte(`"abc123"`), []byte(`"`+session+`"`)), session
}

// hookRun is one finished run of the hook.
type hookRun struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// answer decodes the Claude Code answer on stdout.
func (r hookRun) decision(t *testing.T) (decision, reason string) {
	t.Helper()
	var out struct {
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if r.code != 0 {
		t.Fatalf("hook exited %d, want 0; stderr: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("stdout is not one JSON answer: %v\n%q", err, r.stdout)
	}
	if out.HookSpecificOutput.HookEventName != "PreToolUse" {
		t.Fatalf("answer %s has no PreToolUse hookSpecificOutput", r.stdout)
	}
	return out.HookSpecificOutput.PermissionDecision, out.HookSpecificOutput.PermissionDecisionReason
}

// bgHook is the hook running as a child process.
type bgHook struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	start          time.Time
	done           chan struct{}
	err            error
}

func (h *hookSrv) startHook(t *testing.T, env []string, stdin []byte, args ...string) *bgHook {
	t.Helper()
	b := &bgHook{cmd: exec.Command(binary(t), append([]string{"hook"}, args...)...), done: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIRLOCK_") {
			b.cmd.Env = append(b.cmd.Env, kv)
		}
	}
	url := "http://127.0.0.1:1" // nothing listens there
	if h != nil {
		url = h.srv.URL
		b.cmd.Env = append(b.cmd.Env, "AIRLOCK_AGENT_TOKEN="+h.agent)
	}
	b.cmd.Env = append(b.cmd.Env, "AIRLOCK_URL="+url, "AIRLOCK_STATE_DIR="+t.TempDir())
	b.cmd.Env = append(b.cmd.Env, env...)
	b.cmd.Stdin = bytes.NewReader(stdin)
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	b.start = time.Now()
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		<-b.done
	})
	return b
}

// wait waits for the hook to exit (a minute at most) and returns the run.
func (b *bgHook) wait(t *testing.T) hookRun {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(time.Minute):
		t.Fatalf("the hook did not answer within a minute; stderr: %s", b.stderr.String())
	}
	r := hookRun{stdout: b.stdout.String(), stderr: b.stderr.String(), took: time.Since(b.start)}
	var xe *exec.ExitError
	switch {
	case errors.As(b.err, &xe):
		r.code = xe.ExitCode()
	case b.err != nil:
		t.Fatalf("hook: %v", b.err)
	}
	return r
}

func (h *hookSrv) hook(t *testing.T, env []string, stdin []byte, args ...string) hookRun {
	t.Helper()
	return h.startHook(t, env, stdin, args...).wait(t)
}

// pending waits until the session has a pending request and returns it.
func (h *hookSrv) pending(t *testing.T, session string) resp {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		list := h.api.call("GET", "/v1/approval-requests?state=pending", h.reviewer, "").want(t, 200, "list")
		items, _ := list.Body["items"].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			ctx, _ := m["context"].(map[string]any)
			if ctx["session_id"] == session {
				return h.api.call("GET", "/v1/approval-requests/"+m["id"].(string), h.reviewer, "").want(t, 200, "read")
			}
		}
		time.Sleep(20 * time.Millisecond) // polls the server; the hook's progress is what is awaited
	}
	t.Fatalf("no pending request of session %s within 30s", session)
	return resp{}
}

func (h *hookSrv) decide(t *testing.T, id, status, note string) {
	t.Helper()
	h.api.call("POST", "/v1/approval-requests/"+id+"/decision", h.reviewer,
		fmt.Sprintf(`{"status":%q,"note":%q}`, status, note)).want(t, 200, status)
}

// TestHookClaudeApproved: the reviewer approves on their phone; the hook
// claims the execution and answers allow; PostToolUse reports the outcome.
// The request carries tool_name and tool_input exactly, the observed
// context, and lives on the session's instance.
func TestHookClaudeApproved(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	in, session := payload(t, "claude-code-pretooluse-bash.json")
	run := h.startHook(t, nil, in, "claude-code", "--wait", "1m")
	r := h.pending(t, session)
	if r.Str("tool") != "Bash" {
		t.Errorf("tool %q, want Bash", r.Str("tool"))
	}
	args, _ := json.Marshal(r.Body["arguments"])
	if string(args) != `{"command":"npm test"}` {
		t.Errorf("arguments %s, want tool_input exactly", args)
	}
	ctx, _ := r.Body["context"].(map[string]any)
	for k, want := range map[string]string{"session_id": session, "cwd": "/home/user/my-project",
		"tool_use_id": "toolu_01ABC123...", "transcript_path": "/home/user/.claude/projects/.../transcript.jsonl"} {
		if ctx[k] != want {
			t.Errorf("context.%s = %v, want %q", k, ctx[k], want)
		}
	}
	inst := h.api.call("GET", "/v1/instances/"+r.Str("instance_id"), h.reviewer, "").want(t, 200, "instance")
	if inst.Str("name") != "claude-code session "+session {
		t.Errorf("instance name %q", inst.Str("name"))
	}
	h.decide(t, r.Str("id"), "approved", "tests only")
	got := run.wait(t)
	if d, reason := got.decision(t); d != "allow" || !strings.Contains(reason, "tests only") {
		t.Fatalf("answer %s %q, want allow with the note", d, reason)
	}
	after := h.api.call("GET", "/v1/approval-requests/"+r.Str("id"), h.reviewer, "").want(t, 200, "read")
	if after.Str("execution.status") != "claimed" {
		t.Fatalf("execution %v, want claimed before allow", after.Body["execution"])
	}

	// The same session's next call reuses the instance.
	next := bytes.ReplaceAll(in, []byte("toolu_01ABC123..."), []byte("toolu_02"))
	run2 := h.startHook(t, nil, next, "claude-code", "--wait", "1m")
	r2 := h.pending(t, session)
	if r2.Str("instance_id") != r.Str("instance_id") {
		t.Errorf("second call on instance %s, first on %s: want one instance per session", r2.Str("instance_id"), r.Str("instance_id"))
	}
	h.decide(t, r2.Str("id"), "denied", "not now")
	if d, _ := run2.wait(t).decision(t); d != "deny" {
		t.Errorf("second call: %s, want deny", d)
	}

	// PostToolUse reports how the approved call ran.
	post, _ := payload(t, "claude-code-posttooluse-write.json")
	post = bytes.Replace(replaceSession(post, session), []byte(`"Write"`), []byte(`"Bash"`), 1)
	pr := h.hook(t, nil, post, "claude-code", "--event", "post-tool-use")
	if pr.code != 0 || strings.TrimSpace(pr.stdout) != "{}" {
		t.Fatalf("post-tool-use: exit %d, stdout %q, stderr %s", pr.code, pr.stdout, pr.stderr)
	}
	after = h.api.call("GET", "/v1/approval-requests/"+r.Str("id"), h.reviewer, "").want(t, 200, "read")
	if after.Str("execution.status") != "succeeded" || !strings.Contains(after.Str("execution.detail"), "success") {
		t.Fatalf("execution after PostToolUse: %v", after.Body["execution"])
	}
}

// replaceSession points a fixture at session.
func replaceSession(b []byte, session string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	return bytes.Replace(b, m["session_id"], []byte(`"`+session+`"`), 1)
}

// TestHookClaudeNoDecision: every ending without an approval answers the
// --on-timeout verdict, never allow.
func TestHookClaudeNoDecision(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)

	t.Run("denied with the reviewer's note", func(t *testing.T) {
		in, session := payload(t, "claude-code-pretooluse-mcp.json")
		run := h.startHook(t, nil, in, "claude-code", "--wait", "1m")
		h.decide(t, h.pending(t, session).Str("id"), "denied", "use the staging memory server")
		d, reason := run.wait(t).decision(t)
		if d != "deny" || !strings.Contains(reason, "use the staging memory server") {
			t.Fatalf("answer %s %q", d, reason)
		}
	})
	t.Run("no decision within --wait asks and withdraws the request", func(t *testing.T) {
		in, session := payload(t, "claude-code-pretooluse-bash.json")
		run := h.startHook(t, nil, in, "claude-code", "--wait", "1s")
		id := h.pending(t, session).Str("id")
		if d, _ := run.wait(t).decision(t); d != "ask" {
			t.Fatalf("answer %s, want ask", d)
		}
		if s := h.api.call("GET", "/v1/approval-requests/"+id, h.reviewer, "").Str("state"); s != "cancelled" && s != "expired" {
			t.Fatalf("request left %s; want it withdrawn", s)
		}
	})
	t.Run("--on-timeout deny", func(t *testing.T) {
		in, _ := payload(t, "claude-code-pretooluse-bash.json")
		if d, _ := h.hook(t, nil, in, "claude-code", "--wait", "1s", "--on-timeout", "deny").decision(t); d != "deny" {
			t.Fatalf("answer %s, want deny", d)
		}
	})
	t.Run("expired (the server shortens the window below the wait)", func(t *testing.T) {
		short := startHookSrv(t, "--max-timeout", "2s", "--default-timeout", "2s")
		in, _ := payload(t, "claude-code-pretooluse-bash.json")
		got := short.hook(t, nil, in, "claude-code", "--wait", "30s")
		if d, reason := got.decision(t); d != "ask" || !strings.Contains(reason, "expired") {
			t.Fatalf("answer %s %q, want ask because expired", d, reason)
		}
	})
	t.Run("cancelled by the session's end", func(t *testing.T) {
		in, session := payload(t, "claude-code-pretooluse-bash.json")
		run := h.startHook(t, nil, in, "claude-code", "--wait", "1m")
		r := h.pending(t, session)
		end, _ := payload(t, "claude-code-sessionend.json")
		er := h.hook(t, nil, replaceSession(end, session), "claude-code", "--event", "session-end")
		if er.code != 0 || strings.TrimSpace(er.stdout) != "{}" {
			t.Fatalf("session-end: exit %d stdout %q stderr %s", er.code, er.stdout, er.stderr)
		}
		if d, reason := run.wait(t).decision(t); d != "ask" || !strings.Contains(reason, "cancelled") {
			t.Fatalf("answer %s %q, want ask because cancelled", d, reason)
		}
		h.api.call("GET", "/v1/instances/"+r.Str("instance_id"), h.agent, "").want(t, 404, "the session's instance after SessionEnd")
	})
	t.Run("approved twice is allowed once", func(t *testing.T) {
		in, session := payload(t, "claude-code-pretooluse-bash.json")
		run := h.startHook(t, nil, in, "claude-code", "--wait", "1m")
		id := h.pending(t, session).Str("id")
		h.decide(t, id, "approved", "")
		if d, _ := run.wait(t).decision(t); d != "allow" {
			t.Fatalf("first: %s", d)
		}
		// The call failed: PostToolUseFailure reports it so.
		failed, _ := payload(t, "claude-code-posttoolusefailure-bash.json")
		if r := h.hook(t, nil, replaceSession(failed, session), "claude-code", "--event", "post-tool-use"); r.code != 0 {
			t.Fatalf("post-tool-use: exit %d, stderr %s", r.code, r.stderr)
		}
		ex := h.api.call("GET", "/v1/approval-requests/"+id, h.reviewer, "").want(t, 200, "read")
		if ex.Str("execution.status") != "failed" || !strings.Contains(ex.Str("execution.detail"), "non-zero status") {
			t.Fatalf("execution after PostToolUseFailure: %v", ex.Body["execution"])
		}
		// The agent retries the same call (same tool_use_id): it finds the
		// same request, whose one execution is spent.
		if d, reason := h.hook(t, nil, in, "claude-code", "--wait", "1m").decision(t); d != "ask" || !strings.Contains(reason, "already claimed") {
			t.Fatalf("retry: %s %q, want ask", d, reason)
		}
	})
}

// TestHookClaudeRetried: the hook is killed while waiting (kill -9, as an
// agent's timeout or an OOM kill would); the retried hook finds the same
// request and answers once it is approved.
func TestHookClaudeRetried(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	in, session := payload(t, "claude-code-pretooluse-write-real.json")
	in = replaceSession(in, session)
	state := t.TempDir()
	env := []string{"AIRLOCK_STATE_DIR=" + state}
	first := h.startHook(t, env, in, "claude-code", "--wait", "1m")
	r := h.pending(t, session)
	first.cmd.Process.Kill()
	if got := first.wait(t); strings.Contains(got.stdout, "allow") {
		t.Fatalf("a killed hook printed %q", got.stdout)
	}
	second := h.startHook(t, env, in, "claude-code", "--wait", "1m")
	if again := h.pending(t, session); again.Str("id") != r.Str("id") {
		t.Fatalf("the retried hook made request %s; the first was %s", again.Str("id"), r.Str("id"))
	}
	h.decide(t, r.Str("id"), "approved", "")
	if d, _ := second.wait(t).decision(t); d != "allow" {
		t.Fatalf("retried hook: %s, want allow", d)
	}
}

// TestHookServerRestartsMidWait: the server is killed while the hook waits
// and comes back on the same address and database; the hook keeps waiting
// and answers the decision made after the restart.
func TestHookServerRestartsMidWait(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	in, session := payload(t, "claude-code-pretooluse-bash.json")
	run := h.startHook(t, nil, in, "claude-code", "--wait", "1m")
	id := h.pending(t, session).Str("id")
	// The request exists once the server has committed it, which can be
	// before the hook has its answer: a kill then tests the hook's create,
	// which gives up quickly by design. Kill once the hook is waiting.
	testkit.Eventually(t, 30*time.Second, "the hook's long-poll to reach the server", func() bool {
		return strings.Contains(h.api.call("GET", "/metrics", "", "").Raw, "\nairlock_long_polls_waiting 1\n")
	})
	h.srv.Kill()
	args := []string{"serve", "--addr", h.srv.Addr, "--db", filepath.Join(h.dir, "airlock.db"), "--admin-token", testAdmin, "--log-level", "error"}
	h.srv = startProcess(t, h.dir, nil, args...)
	h.decide(t, id, "approved", "after the restart")
	if d, reason := run.wait(t).decision(t); d != "allow" || !strings.Contains(reason, "after the restart") {
		t.Fatalf("answer %s %q, want allow", d, reason)
	}
}

// TestHookNeverFailsOpen: bad input, bad flags, a missing token, a server
// that is down and a panic each end in an answer that is not allow (exit
// 0) or a reason on stderr with exit 2, which Claude Code reads as a block.
func TestHookNeverFailsOpen(t *testing.T) {
	t.Parallel()
	good, _ := payload(t, "claude-code-pretooluse-bash.json")
	huge := append([]byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t","tool_input":{"command":"`),
		bytes.Repeat([]byte("a"), 10<<20)...)
	huge = append(huge, `"}}`...)
	answers := []struct {
		name   string
		stdin  []byte
		env    []string
		args   []string
		want   string // the decision, or "exit 2"
		stderr string
	}{
		{"not JSON", []byte("rm -rf /"), nil, nil, "ask", "not a JSON object"},
		{"empty stdin", nil, nil, nil, "ask", "empty"},
		{"another event", bytes.Replace(good, []byte(`"PreToolUse"`), []byte(`"UserPromptSubmit"`), 1), nil, nil, "ask", "UserPromptSubmit"},
		{"missing tool_use_id", bytes.Replace(good, []byte(`"tool_use_id"`), []byte(`"tool_use"`), 1), nil, nil, "ask", "no tool_use_id"},
		{"duplicate keys", []byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Read","tool_name":"Bash","tool_use_id":"t","tool_input":{}}`), nil, nil, "ask", "duplicate"},
		{"10 MB stdin", huge, nil, nil, "ask", "over"},
		{"10 MB stdin, --on-timeout deny", huge, nil, []string{"--on-timeout", "deny"}, "deny", "over"},
		{"no token", good, []string{"AIRLOCK_AGENT_TOKEN="}, nil, "ask", "no agent token"},
		{"server down", good, nil, []string{"--url", "http://" + closedAddr(t)}, "ask", "could not ask"},
		{"server down, --on-timeout deny", good, nil, []string{"--url", "http://" + closedAddr(t), "--on-timeout", "deny"}, "deny", "could not ask"},
		{"a bad flag", good, nil, []string{"--bogus"}, "exit 2", "bogus"},
		{"--on-timeout allow", good, nil, []string{"--on-timeout", "allow"}, "exit 2", "refused"},
		{"--wait 0", good, nil, []string{"--wait", "0s"}, "exit 2", "--wait"},
		{"a bad glob", good, nil, []string{"--match", "[Bash"}, "exit 2", "glob"},
		{"an unknown event flag", good, nil, []string{"--event", "stop"}, "exit 2", "stop"},
		{"a panic", good, []string{hookFaultEnv + "=panic"}, nil, "exit 2", "internal error"},
	}
	h := &hookSrv{srv: &proc{URL: "http://" + closedAddr(t)}, agent: "agent-token"}
	for _, tc := range answers {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := h.hook(t, tc.env, tc.stdin, append([]string{"claude-code", "--wait", "2s"}, tc.args...)...)
			if strings.Contains(r.stdout, "allow") {
				t.Fatalf("stdout %q allows", r.stdout)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.stderr)
			}
			if tc.want == "exit 2" {
				if r.code != 2 || r.stdout != "" {
					t.Fatalf("exit %d, stdout %q; want exit 2 and nothing on stdout", r.code, r.stdout)
				}
				return
			}
			if d, _ := r.decision(t); d != tc.want {
				t.Fatalf("answer %s, want %s", d, tc.want)
			}
			if r.took > 30*time.Second {
				t.Errorf("took %s to answer", r.took)
			}
		})
	}
	t.Run("an unknown agent", func(t *testing.T) {
		t.Parallel()
		r := h.hook(t, nil, good, "cursor")
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "unknown agent") {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// TestHookMatch: tools the --match globs do not select get an answer that
// decides nothing, and no request is made.
func TestHookMatch(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	in, _ := payload(t, "claude-code-pretooluse-write-real.json")
	r := h.hook(t, nil, in, "claude-code", "--match", "Bash,mcp__*")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "{}" {
		t.Fatalf("exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
	list := h.api.call("GET", "/v1/approval-requests", h.reviewer, "").want(t, 200, "list")
	if items, _ := list.Body["items"].([]any); len(items) != 0 {
		t.Fatalf("an unselected tool made %d requests", len(items))
	}
}

// closedAddr returns an address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestHookCodexGemini: the Codex and Gemini CLI hooks answer in their own
// documented shapes: allow only after approval, deny with the note, and
// no decision (their own prompt) or deny when nobody decides.
func TestHookCodexGemini(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	decode := func(t *testing.T, r hookRun) map[string]any {
		t.Helper()
		var m map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil {
			t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
		}
		return m
	}
	t.Run("codex", func(t *testing.T) {
		in, session := payload(t, "codex-permissionrequest-bash.json")
		in = replaceSession(in, session)
		run := h.startHook(t, nil, in, "codex", "--wait", "1m")
		r := h.pending(t, session)
		if r.Str("tool") != "Bash" || r.Body["context"].(map[string]any)["turn_id"] != "<turn-id>" {
			t.Errorf("request %s", r.Raw)
		}
		h.decide(t, r.Str("id"), "approved", "")
		out := decode(t, run.wait(t))
		hso, _ := out["hookSpecificOutput"].(map[string]any)
		if hso["hookEventName"] != "PermissionRequest" || hso["decision"].(map[string]any)["behavior"] != "allow" {
			t.Fatalf("answer %v", out)
		}
		other := bytes.Replace(in, []byte("rm -f /tmp/example"), []byte("rm -rf /"), 1)
		run = h.startHook(t, nil, other, "codex", "--wait", "1m")
		h.decide(t, h.pending(t, session).Str("id"), "denied", "no")
		hso, _ = decode(t, run.wait(t))["hookSpecificOutput"].(map[string]any)
		if d := hso["decision"].(map[string]any); d["behavior"] != "deny" || !strings.Contains(d["message"].(string), "no") {
			t.Fatalf("deny answer %v", hso)
		}
		third := bytes.Replace(in, []byte("rm -f /tmp/example"), []byte("ls"), 1)
		out = decode(t, h.hook(t, nil, third, "codex", "--wait", "1s"))
		if _, decided := out["hookSpecificOutput"]; decided || out["systemMessage"] == nil {
			t.Fatalf("no decision: %v, want only a systemMessage", out)
		}
	})
	t.Run("gemini", func(t *testing.T) {
		in, session := payload(t, "gemini-beforetool-write-file.json")
		run := h.startHook(t, nil, in, "gemini", "--wait", "1m")
		r := h.pending(t, session)
		if r.Str("tool") != "write_file" {
			t.Errorf("request %s", r.Raw)
		}
		h.decide(t, r.Str("id"), "approved", "")
		if out := decode(t, run.wait(t)); out["decision"] != "allow" {
			t.Fatalf("answer %v", out)
		}
		shell, _ := payload(t, "gemini-beforetool-shell.json")
		out := decode(t, h.hook(t, nil, shell, "gemini", "--wait", "1s"))
		if _, decided := out["decision"]; decided {
			t.Fatalf("no decision: %v", out)
		}
		out = decode(t, h.hook(t, nil, shell, "gemini", "--wait", "1s", "--on-timeout", "deny"))
		if out["decision"] != "deny" || out["reason"] == "" {
			t.Fatalf("on-timeout deny: %v", out)
		}
		// Gemini CLI has no post-tool-use here: a wrong --event blocks.
		if r := h.hook(t, nil, shell, "gemini", "--event", "post-tool-use"); r.code != 2 {
			t.Fatalf("gemini --event post-tool-use: exit %d", r.code)
		}
	})
}

// TestHookCodexApprovalContext: a Codex command asking to run outside its
// sandbox reaches the reviewer saying so: the request's context carries
// approval_context (the sandbox override and the extra permissions), the
// model and the permission mode, and the model's justification is the
// agent's reasoning.
func TestHookCodexApprovalContext(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	in, session := payload(t, "codex-permissionrequest-escalated.json")
	run := h.startHook(t, nil, in, "codex", "--wait", "1m")
	r := h.pending(t, session)
	ctx, _ := r.Body["context"].(map[string]any)
	ac, _ := ctx["approval_context"].(map[string]any)
	if ac["sandbox_permissions"] != "require_escalated" || ac["additional_permissions"] == nil || ctx["permission_mode"] != "default" {
		t.Errorf("context %v does not show what Codex asks beyond the sandbox", ctx)
	}
	if reason, _ := r.Body["agent_reasoning"].(string); !strings.HasPrefix(reason, "The installer needs") {
		t.Errorf("agent_reasoning %q, want Codex's justification", reason)
	}
	h.decide(t, r.Str("id"), "denied", "not outside the sandbox")
	if out := run.wait(t); !strings.Contains(out.stdout, `"deny"`) {
		t.Fatalf("answer %q, want deny", out.stdout)
	}
}
