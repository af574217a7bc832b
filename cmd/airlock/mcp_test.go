package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServer starts the real binary's `airlock serve` on a free port with a
// known admin token and flags added, and mints an agent and a reviewer
// token.
type mcpServer struct {
	*proc
	api                    *api
	admin, agent, reviewer string
}

func startMCPServer(t *testing.T, flags ...string) *mcpServer {
	t.Helper()
	dir := t.TempDir()
	admin := "admin-secret-for-mcp-tests"
	p := startProcess(t, dir, nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"), "--admin-token", admin}, flags...)...)
	a := newAPI(t, p.URL)
	return &mcpServer{proc: p, api: a, admin: admin,
		agent: a.mintToken(admin, "mcp agent", "agent"), reviewer: a.mintToken(admin, "mcp reviewer", "reviewer")}
}

// bridge returns `airlock mcp` against s, with the agent token in the
// environment and only the environment's non-AIRLOCK_ variables.
func (s *mcpServer) bridge(t *testing.T, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"mcp"}, extra...)...)
	cmd.Env = append(testkit.CleanEnv(), "AIRLOCK_URL="+s.URL, "AIRLOCK_AGENT_TOKEN="+s.agent)
	return cmd
}

// TestMCPStdioSDK is T16 driven by the official Go SDK client over
// CommandTransport, at 2026-07-28 (its default) and pinned to 2025-11-25:
// `airlock mcp` relays to the real server's /mcp, itself at 2026-07-28; a
// reviewer's REST decision reaches the session's heartbeat; closing stdin
// ends the process cleanly (exit 0).
func TestMCPStdioSDK(t *testing.T) {
	t.Parallel()
	s := startMCPServer(t)
	for _, revision := range []string{mcpserver.Revision2026, "2025-11-25"} {
		t.Run(revision, func(t *testing.T) {
			cmd := s.bridge(t, "--log-level", "info")
			stderr := testkit.NewOutput()
			cmd.Stderr = stderr
			var opts *mcp.ClientSessionOptions
			if revision != mcpserver.Revision2026 {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: revision}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t16", Version: "v0"}, nil).
				Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, opts)
			if err != nil {
				t.Fatalf("connect: %v\nstderr:\n%s\nserver:\n%s", err, stderr, s.Out)
			}
			if got := cs.InitializeResult().ProtocolVersion; got != revision {
				t.Errorf("negotiated %s over stdio, want %s", got, revision)
			}
			tools, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools.Tools) != len(mcpserver.ToolNames) {
				t.Errorf("%d tools over stdio, want %d", len(tools.Tools), len(mcpserver.ToolNames))
			}

			call := func(name string, args map[string]any) map[string]any {
				t.Helper()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if res.IsError {
					t.Fatalf("%s: %v", name, res.Content[0].(*mcp.TextContent).Text)
				}
				var out map[string]any
				b, _ := json.Marshal(res.StructuredContent)
				json.Unmarshal(b, &out)
				return out
			}
			sid := call("session_open", map[string]any{"name": "stdio session"})["sessionId"].(string)
			req := call("approval_request", map[string]any{
				"kind": "agent_request", "title": "Deploy on Friday?", "proposal": map[string]any{"mode": "advisory"},
				"sessionId": sid, "question": map[string]any{"choices": []string{"yes", "no"}}, "idempotencyKey": "t16-" + revision,
			})
			id := req["approvalId"].(string)
			if req["status"] != "pending" {
				t.Errorf("approval_request over stdio: %v", req)
			}
			s.api.call("POST", "/v1/approval-requests/"+id+"/decision", s.reviewer, `{"status":"approved","answer":"no"}`).want(t, 200, "decide")
			hb := call("session_heartbeat", map[string]any{"sessionId": sid})
			if ins, _ := hb["instructions"].([]any); len(ins) != 1 || ins[0].(map[string]any)["answer"] != "no" {
				t.Errorf("heartbeat over stdio: %v", hb)
			}
			if st := call("approval_status", map[string]any{"approvalId": id}); st["status"] != "approved" {
				t.Errorf("approval_status over stdio: %v", st)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "approval_request", Arguments: map[string]any{"kind": "nope"}})
			if err != nil || !res.IsError {
				t.Errorf("an invalid call over stdio: %v %v", err, res)
			}
			other := call("approval_request", map[string]any{
				"kind": "agent_request", "title": "Or on Monday?", "proposal": map[string]any{"mode": "advisory"}, "idempotencyKey": "t16-cancel-" + revision,
			})["approvalId"].(string)
			if st := call("approval_cancel", map[string]any{"approvalId": other}); st["status"] != "cancelled" {
				t.Errorf("approval_cancel over stdio: %v", st)
			}
			if board := call("work_list", map[string]any{}); board["columns"] == nil {
				t.Errorf("work_list over stdio: %v", board)
			}
			if closed := call("session_close", map[string]any{"sessionId": sid}); closed["status"] != "closed" {
				t.Errorf("session_close over stdio: %v", closed)
			}

			if err := cs.Close(); err != nil {
				t.Errorf("closing stdin: airlock mcp did not exit cleanly: %v\nstderr:\n%s", err, stderr)
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit code %d after EOF, want 0", code)
			}
			if !strings.Contains(stderr.String(), "relaying MCP over stdio") || !strings.Contains(stderr.String(), "revision="+mcpserver.Revision2026) {
				t.Errorf("stderr lacks the bridge's log naming the revision it speaks to the server:\n%s", stderr)
			}
		})
	}
}

// TestMCPStdioWire is T16 on the wire: every line airlock mcp writes to
// stdout is one JSON-RPC message, malformed input gets a protocol error
// without ending the session, logs go only to stderr, and it exits 0 when
// stdin ends.
func TestMCPStdioWire(t *testing.T) {
	t.Parallel()
	s := startMCPServer(t)
	cmd := s.bridge(t, "--log-level", "debug")
	stdin, stdout := testkit.Pipes(t, cmd)
	stderr := testkit.NewOutput()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	// await reads stdout lines until the response with id arrives (id -1:
	// the next error with id null).
	await := func(id int) map[string]any {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("stdout ended before the response to %d; stderr:\n%s", id, stderr)
				}
				seen = append(seen, line)
				var msg map[string]any
				if err := json.Unmarshal([]byte(line), &msg); err != nil {
					t.Fatalf("stdout line is not JSON: %q", line)
				}
				if msg["id"] == float64(id) || (id == -1 && msg["id"] == nil && msg["error"] != nil) {
					return msg
				}
			case <-timeout:
				t.Fatalf("no response to %d within a minute; stdout so far:\n%s\nstderr:\n%s", id, strings.Join(seen, "\n"), stderr)
			}
		}
	}
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wire","version":"0"}}}`)
	if init := await(1); fmt.Sprint(get(init, "result.protocolVersion")) != "2025-06-18" {
		t.Errorf("initialize: %v", init)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if tools, _ := get(await(2), "result.tools").([]any); len(tools) != len(mcpserver.ToolNames) {
		t.Errorf("tools/list: %d tools", len(tools))
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"approval_request","arguments":{"kind":"agent_request","title":"t","proposal":{"mode":"advisory"},"idempotencyKey":"w1","expiresInMinutes":1}}}`)
	if res := await(3); get(res, "result.isError") != true || !strings.Contains(fmt.Sprint(get(res, "result.content")), "expiresInMinutes must be between 5 and 10080") {
		t.Errorf("an invalid call: %v", res)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"work_list","arguments":{}}}`)
	if res := await(4); get(res, "result.structuredContent.columns") == nil {
		t.Errorf("work_list: %v", res)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"no_such_method"}`)
	if res := await(5); get(res, "error.code") != float64(-32601) {
		t.Errorf("an unknown method: %v, want a -32601 protocol error", res)
	}
	// Malformed JSON-RPC gets a protocol error, and the session goes on.
	for _, bad := range []struct {
		line string
		id   int // -1: answered with id null
		code float64
	}{
		{`{"jsonrpc":"2.0","id":`, -1, -32700},
		{`[{"jsonrpc":"2.0","id":6,"method":"ping"}]`, -1, -32600},
		{`{"id":7,"method":"ping"}`, 7, -32600},
		{`{"jsonrpc":"2.0","id":10,"params":{}}`, 10, -32600}, // neither a request nor a response
	} {
		send(bad.line)
		if res := await(bad.id); get(res, "error.code") != bad.code {
			t.Errorf("%s: %v, want error %v", bad.line, res, bad.code)
		}
	}
	send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":"approval_request"}`)
	if res := await(8); get(res, "error.code") != float64(-32602) {
		t.Errorf("tools/call with params not an object: %v, want -32602", res)
	}
	send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if res := await(9); res["result"] == nil {
		t.Errorf("ping after the protocol errors: %v", res)
	}

	stdin.Close()
	for line := range lines {
		seen = append(seen, line)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("airlock mcp after EOF: %v (want exit 0); stderr:\n%s", err, stderr)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
		t.Fatal("airlock mcp did not exit within a minute of EOF")
	}
	for _, line := range seen {
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.JSONRPC != "2.0" || (msg.ID == nil && msg.Method == "") {
			t.Errorf("stdout line is not a JSON-RPC message: %q", line)
		}
	}
	if len(seen) < 5 {
		t.Errorf("only %d lines on stdout", len(seen))
	}
	if !strings.Contains(stderr.String(), "level=INFO") {
		t.Errorf("no logs on stderr at debug level:\n%s", stderr)
	}
}

// TestMCPStdioFailures: without a token, with a bad URL or token, airlock
// mcp fails at once with a message on stderr, and writes nothing to stdout.
func TestMCPStdioFailures(t *testing.T) {
	t.Parallel()
	s := startMCPServer(t)
	tests := []struct {
		name   string
		env    []string
		args   []string
		exit   int
		stderr string
	}{
		{"no token", []string{"AIRLOCK_URL=" + s.URL}, nil, exitUsage, "no token: set AIRLOCK_AGENT_TOKEN"},
		{"a URL with a query", nil, []string{"--url", s.URL + "/?token=x", "--token", s.agent}, exitUsage, "must not carry a query"},
		{"not a URL", nil, []string{"--url", "ftp://x", "--token", s.agent}, exitUsage, "is not an http(s) URL"},
		{"a revoked or unknown token", []string{"AIRLOCK_URL=" + s.URL, "AIRLOCK_AGENT_TOKEN=airlock_unknown"}, nil, exitFailure, "connect to Airlock at " + s.URL + "/mcp"},
		{"nothing listening", nil, []string{"--url", "http://127.0.0.1:1", "--token", s.agent}, exitFailure, "is `airlock serve` running there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binary(t), append([]string{"mcp"}, tt.args...)...)
			cmd.Env = append(testkit.CleanEnv(), tt.env...)
			var stdout strings.Builder
			stderr := testkit.NewOutput()
			cmd.Stdout, cmd.Stderr = &stdout, stderr
			cmd.Stdin = strings.NewReader("")
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.exit || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.exit, tt.stderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout is not empty: %q", stdout.String())
			}
		})
	}
}

// get reads a value at a dotted path of a decoded JSON object.
func get(m map[string]any, path string) any {
	var v any = m
	for key := range strings.SplitSeq(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[key]
	}
	return v
}
