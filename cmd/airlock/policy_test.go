package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const e2ePolicy = `
rules:
  - name: read-only tools
    match: request.tool in ["read_file", "list_files"] || request.kind == "agent_request"
    action: allow
    valid_for: 2m
  - name: no recursive deletes
    match: request.tool == "shell" && request.arguments.command.contains("rm -rf")
    action: deny
    note: Recursive deletes are never allowed.
  - name: laptop only
    match: instance.name == "laptop" && request.arguments.broken == 1
    action: allow
`

// A server with --policy decides by its rules at creation, names the rule
// in decided_by and the file's hash on the event, never approves a
// question, and tells an MCP agent who decided.
func TestServePolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte(e2ePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	const admin = "admin-secret-for-policy-tests"
	srv := startApp(t, nil, "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "a.db"), "--admin-token", admin, "--policy", file)
	c := newAPI(t, srv.url)
	agent := c.mintToken(admin, "agent", "agent")
	reviewer := c.mintToken(admin, "reviewer", "reviewer")
	inst := c.call("POST", "/v1/instances", agent, `{"name":"laptop"}`).want(t, 201, "instance").Str("id")
	create := func(key, body string) resp {
		return c.call("POST", "/v1/instances/"+inst+"/approval-requests", agent, body, "Idempotency-Key", key).want(t, 201, "create")
	}

	r := create("k1", `{"tool":"read_file","arguments":{"path":"README.md"}}`)
	if r.Str("state") != "approved" || r.Str("decision.decided_by") != "policy:read-only tools" {
		t.Fatalf("read_file: %s", r.Raw)
	}
	c.call("POST", "/v1/approval-requests/"+r.Str("id")+"/execution", agent, `{}`).want(t, 200, "claim the policy's approval")
	r = create("k2", `{"tool":"shell","arguments":{"command":"rm -rf /"}}`)
	if r.Str("state") != "denied" || r.Str("decision.decided_by") != "policy:no recursive deletes" || r.Str("decision.note") != "Recursive deletes are never allowed." {
		t.Fatalf("rm -rf: %s", r.Raw)
	}
	// The third rule errors (no such key) for this request: ask.
	r = create("k3", `{"tool":"shell","arguments":{"command":"ls"}}`)
	if r.Str("state") != "pending" {
		t.Fatalf("ls: %s, want pending", r.Raw)
	}
	// The event stream: read until the policy's approval event, which
	// must carry the file's hash.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, "GET", srv.url+"/v1/events?after=0", nil)
	hreq.Header.Set("Authorization", "Bearer "+reviewer)
	hres, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	withHash := regexp.MustCompile(`"actor":"policy:read-only tools"[^}]*"policy_sha256":"[0-9a-f]{64}"`)
	lines := bufio.NewScanner(hres.Body)
	for found := false; !found; {
		if !lines.Scan() {
			t.Fatalf("event stream ended without the policy's approval with its hash: %v", lines.Err())
		}
		found = withHash.MatchString(lines.Text())
	}
	hres.Body.Close()

	// MCP: a question matches the allow rule, and is asked all the same;
	// an advisory request is approved, and the agent is told by whom.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t27", Version: "v0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: srv.url + "/mcp", HTTPClient: &http.Client{Transport: mcpsdk.Bearer{Token: agent, Next: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(args map[string]any) map[string]any {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "approval_request", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("approval_request: %v %v", err, res)
		}
		return res.StructuredContent.(map[string]any)
	}
	q := call(map[string]any{"kind": "agent_request", "title": "Deploy?", "proposal": map[string]any{"mode": "advisory"},
		"question": map[string]any{"choices": []string{"yes", "no"}}, "idempotencyKey": "q1"})
	if q["status"] != "pending" {
		t.Fatalf("a question was decided by the policy: %v", q)
	}
	a := call(map[string]any{"kind": "agent_request", "title": "Read the logs", "proposal": map[string]any{"mode": "advisory"}, "idempotencyKey": "a1"})
	d, _ := a["decision"].(map[string]any)
	if a["status"] != "approved" || d["decidedBy"] != "policy:read-only tools" || !strings.Contains(a["next"].(string), "policy approved it") {
		t.Fatalf("advisory request: %v", a)
	}

	// Replays (the same Idempotency-Key and body) answer with the
	// originals and are new requests to no rule: the counters stay.
	for _, k := range []struct{ key, body, state string }{
		{"k1", `{"tool":"read_file","arguments":{"path":"README.md"}}`, "approved"},
		{"k2", `{"tool":"shell","arguments":{"command":"rm -rf /"}}`, "denied"},
		{"k3", `{"tool":"shell","arguments":{"command":"ls"}}`, "pending"},
	} {
		r := c.call("POST", "/v1/instances/"+inst+"/approval-requests", agent, k.body, "Idempotency-Key", k.key).want(t, 200, "replay")
		if r.Str("state") != k.state {
			t.Fatalf("replay of %s: %s, want %s", k.key, r.Raw, k.state)
		}
	}
	if again := call(map[string]any{"kind": "agent_request", "title": "Read the logs", "proposal": map[string]any{"mode": "advisory"}, "idempotencyKey": "a1"}); again["status"] != "approved" {
		t.Fatalf("MCP replay: %v", again)
	}

	metrics := c.call("GET", "/metrics", "", "").Raw
	for _, want := range []string{
		`airlock_policy_rule_matches_total{rule="read-only tools"} 3`, // the question too: matched, and asked
		`airlock_policy_rule_matches_total{rule="no recursive deletes"} 1`,
		`airlock_policy_rule_errors_total{rule="laptop only"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A policy file that does not compile stops serve with exit code 2 and
// the rule's name and place.
func TestServeRefusesABadPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte("rules:\n  - name: typo\n    match: request.tol == 'x'\n    action: deny\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := testkit.NewOutput()
	app := &App{Stdout: out, Stderr: out, LookupEnv: mapEnv(nil)}
	err := app.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "a.db"), "--policy", file})
	if code := exitCode(app, err); code != 2 || !strings.Contains(out.String(), `rule "typo" (rule 1, line 2, column 5)`) {
		t.Fatalf("exit %d, output %q; want 2 naming the rule", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.db")); err == nil {
		t.Fatal("the database was created although the policy was refused")
	}
}

// policy check and policy test, with their exit codes.
func TestPolicyCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad, req := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "req.json")
	os.WriteFile(good, []byte(e2ePolicy), 0o600)
	os.WriteFile(bad, []byte("rules:\n  - {name: x, match: 'request.tool', action: deny}\n"), 0o600)
	os.WriteFile(req, []byte(`{"tool":"shell","arguments":{"command":"rm -rf /tmp"}}`), 0o600)
	run := func(args ...string) (int, string) {
		out := testkit.NewOutput()
		app := &App{Stdout: out, Stderr: out, LookupEnv: mapEnv(nil)}
		return exitCode(app, app.Run(t.Context(), args)), out.String()
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"policy", "check", good}, 0, "3 rules (0 shadow), sha256 "},
		{[]string{"policy", "check", bad}, 1, `rule "x" (rule 1, line 2, column 5): match must be a boolean expression`},
		{[]string{"policy", "check"}, 2, "one file"},
		{[]string{"policy", "test", good, req}, 0, "rule: no recursive deletes\noutcome: deny: denied at creation, decided_by \"policy:no recursive deletes\""},
		{[]string{"policy", "test", "--expect", "deny", good, req}, 0, "outcome: deny"},
		{[]string{"policy", "test", "--expect", "allow", good, req}, 1, "expected allow, the policy would deny"},
		{[]string{"policy", "test", bad, req}, 1, `rule "x"`},
		{[]string{"policy", "test", good, filepath.Join(dir, "missing.json")}, 2, "missing.json"},
	} {
		code, out := run(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("airlock %s: exit %d, output %q; want %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
		}
	}
}
