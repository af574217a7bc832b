package hook_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/hook"
)

// fixture reads a documented payload from testdata; each names its source.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Source  string          `json:"source"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !strings.Contains(f.Source, "http") && !strings.Contains(f.Source, "/") {
		t.Fatalf("%s: the fixture must name where it comes from, got %q", name, f.Source)
	}
	return f.Payload
}

// TestFixturesAsk: every documented asking payload of the three agents
// becomes a call with the agent's tool name and input exactly, the session,
// and a key that a retried hook (the same payload) finds again.
func TestFixturesAsk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture, agent, tool, args, session string
	}{
		{"claude-code-pretooluse-bash.json", "claude-code", "Bash", `{"command":"npm test"}`, "abc123"},
		{"claude-code-pretooluse-write-real.json", "claude-code", "Write", `{"content":"hi","file_path":"/tmp/aq-spike-deny.4kpu/x.txt"}`, "8c35adc1-..."},
		{"claude-code-pretooluse-mcp.json", "claude-code", "mcp__memory__create_entities", "", "abc123"},
		{"codex-permissionrequest-bash.json", "codex", "Bash", `{"command":"rm -f /tmp/example"}`, "<session-id>"},
		{"gemini-beforetool-write-file.json", "gemini", "write_file", "", "abc123"},
		{"gemini-beforetool-shell.json", "gemini", "run_shell_command", "", "5f1c2a7e-0b7d-4d8e-9a4e-6f0c1d2e3f40"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			p, err := hook.ParsePayload(fixture(t, tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			ag := hook.Agents[tc.agent]
			call, err := ag.Call(p)
			if err != nil {
				t.Fatal(err)
			}
			if call.Tool != tc.tool || call.SessionID != tc.session || call.Agent != tc.agent {
				t.Errorf("call %+v", call)
			}
			if tc.args != "" && compact(t, call.Arguments) != tc.args {
				t.Errorf("arguments %s, want %s", call.Arguments, tc.args)
			}
			if string(call.Arguments) != string(p.ToolInput) {
				t.Error("arguments are not the tool input byte for byte")
			}
			again, _ := ag.Call(p)
			if again.Key != call.Key || !strings.HasPrefix(call.Key, tc.agent+":") || len(call.Key) > 200 {
				t.Errorf("key %q, again %q", call.Key, again.Key)
			}
			var ctx map[string]string
			if err := json.Unmarshal(call.Context, &ctx); err != nil || ctx["session_id"] != tc.session {
				t.Errorf("context %s", call.Context)
			}
			// Another agent's asking hook refuses this payload.
			for name, other := range hook.Agents {
				if name != tc.agent && other.Event != ag.Event {
					if _, err := other.Call(p); err == nil {
						t.Errorf("%s accepted a %s payload", name, tc.agent)
					}
				}
			}
		})
	}
}

// TestFixturesOther: the payloads that report and end sessions parse.
func TestFixturesOther(t *testing.T) {
	t.Parallel()
	p, err := hook.ParsePayload(fixture(t, "claude-code-posttooluse-write.json"))
	if err != nil || p.HookEventName != "PostToolUse" || compact(t, p.ToolResponse) != `{"filePath":"/path/to/file.txt","success":true}` {
		t.Fatalf("PostToolUse: %+v %v", p, err)
	}
	p, err = hook.ParsePayload(fixture(t, "claude-code-posttoolusefailure-bash.json"))
	if err != nil || p.Error != "Command exited with non-zero status code 1" || p.ToolUseID == "" {
		t.Fatalf("PostToolUseFailure: %+v %v", p, err)
	}
	p, err = hook.ParsePayload(fixture(t, "claude-code-sessionend.json"))
	if err != nil || p.HookEventName != "SessionEnd" || p.Reason != "other" || p.SessionID != "abc123" {
		t.Fatalf("SessionEnd: %+v %v", p, err)
	}
}

// TestAnswers: each agent's documented answer shape, for each verdict.
func TestAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		agent   hook.Agent
		verdict hook.Verdict
		want    string
	}{
		{hook.ClaudeCode, hook.Allow, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"why"}}`},
		{hook.ClaudeCode, hook.Deny, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"why"}}`},
		{hook.ClaudeCode, hook.Ask, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"why"}}`},
		{hook.Codex, hook.Allow, `{"hookSpecificOutput":{"decision":{"behavior":"allow"},"hookEventName":"PermissionRequest"}}`},
		{hook.Codex, hook.Deny, `{"hookSpecificOutput":{"decision":{"behavior":"deny","message":"why"},"hookEventName":"PermissionRequest"}}`},
		{hook.Codex, hook.Ask, `{"systemMessage":"why"}`},
		{hook.Gemini, hook.Allow, `{"decision":"allow","systemMessage":"why"}`},
		{hook.Gemini, hook.Deny, `{"decision":"deny","reason":"why","systemMessage":"why"}`},
		{hook.Gemini, hook.Ask, `{"systemMessage":"why"}`},
	}
	for _, tc := range cases {
		got := strings.TrimSpace(string(tc.agent.Encode(hook.Answer{Verdict: tc.verdict, Reason: "why"})))
		if got != tc.want {
			t.Errorf("%s %s:\n got %s\nwant %s", tc.agent.Name, tc.verdict, got, tc.want)
		}
	}
}

// TestBadPayloads: what the hook refuses, and why.
func TestBadPayloads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, says string }{
		{"empty", "  ", "empty"},
		{"not an object", `["Bash"]`, "not a JSON object"},
		{"duplicate key", `{"tool_name":"Read","tool_name":"Bash"}`, "duplicate"},
		{"case-variant key is not the field", `{"session_id":"s","hook_event_name":"PreToolUse","TOOL_NAME":"Bash","tool_use_id":"t","tool_input":{}}`, "no tool_name"},
		{"tool_input not an object", `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t","tool_input":"ls"}`, "must be a JSON object"},
		{"tool_name not a string", `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":1}`, "must be a string"},
		{"NUL", "{\"session_id\":\"a\\u0000b\"}", "NUL"},
	} {
		p, err := hook.ParsePayload([]byte(tc.in))
		if err == nil {
			_, err = hook.ClaudeCode.Call(p)
		}
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.says)
		}
	}
}

func TestParseFallbackRefusesAllow(t *testing.T) {
	t.Parallel()
	if _, err := hook.ParseFallback("allow"); err == nil {
		t.Fatal("--on-timeout allow accepted")
	}
	for _, ok := range []string{"ask", "deny"} {
		if v, err := hook.ParseFallback(ok); err != nil || string(v) != ok {
			t.Errorf("%s: %v %v", ok, v, err)
		}
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	globs := []string{"Bash", "mcp__github__*"}
	for tool, want := range map[string]bool{"Bash": true, "mcp__github__create_issue": true, "Write": false, "mcp__memory__x": false} {
		if hook.Match(globs, tool) != want {
			t.Errorf("Match(%v, %s) != %v", globs, tool, want)
		}
	}
	if !hook.Match(nil, "Anything") {
		t.Error("no globs must select every tool")
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestCodexApprovalContext: what Codex asks beyond its sandbox reaches the
// request's context (the sandbox override, the extra permissions, the
// model and permission mode), and the model's justification becomes the
// agent's reasoning, a claim, not a fact in the context.
func TestCodexApprovalContext(t *testing.T) {
	t.Parallel()
	p, err := hook.ParsePayload(fixture(t, "codex-permissionrequest-escalated.json"))
	if err != nil {
		t.Fatal(err)
	}
	call, err := hook.Codex.Call(p)
	if err != nil {
		t.Fatal(err)
	}
	var ctx struct {
		TurnID          string `json:"turn_id"`
		Model           string `json:"model"`
		PermissionMode  string `json:"permission_mode"`
		ApprovalContext struct {
			SandboxPermissions    string          `json:"sandbox_permissions"`
			AdditionalPermissions json.RawMessage `json:"additional_permissions"`
			Justification         *string         `json:"justification"`
		} `json:"approval_context"`
	}
	if err := json.Unmarshal(call.Context, &ctx); err != nil {
		t.Fatal(err)
	}
	ac := ctx.ApprovalContext
	if ac.SandboxPermissions != "require_escalated" || !strings.Contains(string(ac.AdditionalPermissions), `"/usr/local/bin"`) ||
		!strings.Contains(string(ac.AdditionalPermissions), `"enabled":true`) {
		t.Errorf("context %s does not show what Codex asks beyond the sandbox", call.Context)
	}
	if ctx.TurnID != "turn-7" || ctx.Model != "gpt-5-codex" || ctx.PermissionMode != "default" {
		t.Errorf("context %s lacks the turn, model or permission mode", call.Context)
	}
	if ac.Justification != nil || !strings.HasPrefix(call.AgentReasoning, "The installer needs network access") {
		t.Errorf("justification: context %s, reasoning %q; want it as the agent's reasoning only", call.Context, call.AgentReasoning)
	}

	// The same command asked inside the sandbox is another request.
	plain, err := hook.ParsePayload(bytes.Replace(fixture(t, "codex-permissionrequest-escalated.json"), []byte(`"require_escalated"`), []byte(`"use_default"`), 1))
	if err != nil {
		t.Fatal(err)
	}
	other, err := hook.Codex.Call(plain)
	if err != nil || other.Key == call.Key {
		t.Fatalf("keys %q and %q (%v): a different sandbox override must be a different request", call.Key, other.Key, err)
	}

	for _, bad := range []string{`"approval_context":"escalate"`, `"approval_context":{"justification":7,"sandbox_permissions":"use_default"}`} {
		data := bytes.Replace(fixture(t, "codex-permissionrequest-escalated.json"), []byte(`"model"`), []byte(bad+`,"x_model"`), 1)
		data = bytes.Replace(data, []byte(`"approval_context": {`), []byte(`"y_approval_context": {`), 1)
		p, err := hook.ParsePayload(data)
		if err == nil {
			_, err = hook.Codex.Call(p)
		}
		if err == nil || !strings.Contains(err.Error(), "approval_context") {
			t.Errorf("%s: %v, want an error naming approval_context", bad, err)
		}
	}
}
