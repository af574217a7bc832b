package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

// hookAnswer posts a Claude Code hook body and returns the decision.
func (b *bundle) hookAnswer(t *testing.T, token, query, body string, invalid ...bool) (decision, reason string) {
	t.Helper()
	r := b.do(t, req{method: "POST", path: "/v1/hooks/claude-code" + query, token: token, body: body, invalid: len(invalid) > 0})
	want(t, r, http.StatusOK, "")
	var out struct {
		HookSpecificOutput struct {
			PermissionDecision, PermissionDecisionReason string
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("answer %s: %v", r.body, err)
	}
	return out.HookSpecificOutput.PermissionDecision, out.HookSpecificOutput.PermissionDecisionReason
}

func preToolUse(session, toolUseID string) string {
	return fmt.Sprintf(`{"session_id":%q,"transcript_path":"/t.jsonl","cwd":"/w","permission_mode":"default",`+
		`"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"npm test"},"tool_use_id":%q}`, session, toolUseID)
}

// TestClaudeCodeHTTPHook: the HTTP hook gives the command hook's answers:
// allow after an approval it claimed, deny with the note, and the
// on_timeout verdict (never allow, always 200) for everything else.
func TestClaudeCodeHTTPHook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// The reviewer approves while the hook waits.
	done := make(chan [2]string, 1)
	go func() {
		d, r := b.hookAnswer(t, b.agentA, "?wait=30s", preToolUse("s1", "t1"))
		done <- [2]string{d, r}
	}()
	var id string
	for id == "" {
		page, err := b.svc.ListRequests(ctx, b.callers["reviewer"], providerPending())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Requests {
			if strings.Contains(string(r.Context), `"s1"`) {
				id = r.ID
			}
		}
		if id == "" {
			time.Sleep(10 * time.Millisecond) // polls the store for the hook's request
		}
	}
	if _, err := b.svc.Decide(ctx, b.callers["reviewer"], id, airlock.DecisionInput{Status: airlock.StateApproved, Note: "go"}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got[0] != "allow" || !strings.Contains(got[1], "go") {
		t.Fatalf("answer %v, want allow", got)
	}
	r, err := b.svc.Request(ctx, b.callers["reviewer"], id, 0)
	if err != nil || r.Execution == nil {
		t.Fatalf("execution not claimed before allow: %+v %v", r.Execution, err)
	}

	// PostToolUse reports the outcome on the same request.
	post := `{"session_id":"s1","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"npm test"},"tool_use_id":"t1","tool_response":{"stdout":"ok"}}`
	pr := b.do(t, req{method: "POST", path: "/v1/hooks/claude-code?event=post-tool-use", token: b.agentA, body: post})
	if pr.status != 200 || strings.TrimSpace(string(pr.body)) != "{}" {
		t.Fatalf("post-tool-use: %d %s", pr.status, pr.body)
	}
	if r, _ = b.svc.Request(ctx, b.callers["reviewer"], id, 0); r.Execution.Status != airlock.ExecSucceeded {
		t.Fatalf("execution %+v, want succeeded", r.Execution)
	}

	// Nobody decides: ask (or deny), never allow.
	if d, _ := b.hookAnswer(t, b.agentA, "?wait=1s", preToolUse("s1", "t2")); d != "ask" {
		t.Fatalf("no decision: %s", d)
	}
	if d, _ := b.hookAnswer(t, b.agentA, "?wait=1s&on_timeout=deny", preToolUse("s1", "t3")); d != "deny" {
		t.Fatalf("no decision, on_timeout=deny: %s", d)
	}

	// Refusals answer 200 with the fallback, never 401 or 400.
	for _, tc := range []struct {
		name, token, query, body, want string
		invalid                        bool // breaks the OpenAPI document on purpose
	}{
		{"no token", "", "", preToolUse("s2", "t"), "ask", false},
		{"revoked token", b.revoked, "?on_timeout=deny", preToolUse("s2", "t"), "deny", false},
		{"a reviewer's token", b.reviewer, "", preToolUse("s2", "t"), "ask", false},
		{"not JSON", b.agentA, "", `rm -rf /`, "ask", true},
		{"duplicate keys", b.agentA, "", `{"tool_name":"Read","tool_name":"Bash"}`, "ask", false},
		{"on_timeout=allow", b.agentA, "?on_timeout=allow", preToolUse("s2", "t"), "deny", true},
		{"a bad wait", b.agentA, "?wait=forever", preToolUse("s2", "t"), "deny", false},
	} {
		var invalid []bool
		if tc.invalid {
			invalid = append(invalid, true)
		}
		d, reason := b.hookAnswer(t, tc.token, tc.query, tc.body, invalid...)
		if d != tc.want || reason == "" {
			t.Errorf("%s: %s %q, want %s with a reason", tc.name, d, reason, tc.want)
		}
	}

	// SessionEnd deletes the session's instance.
	end := b.do(t, req{method: "POST", path: "/v1/hooks/claude-code?event=session-end", token: b.agentA,
		body: `{"session_id":"s1","hook_event_name":"SessionEnd","reason":"logout"}`})
	if end.status != 200 {
		t.Fatalf("session-end: %d", end.status)
	}
	list, err := b.svc.Instances(ctx, b.callers["agentA"])
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.Name == "claude-code session s1" && in.ClosedAt == nil {
			t.Fatalf("instance %s survived SessionEnd", in.ID)
		}
	}
}

func providerPending() provider.ListQuery { return provider.ListQuery{State: airlock.StatePending} }

// TestHTTPHookStoreOutage: with the store gone, the HTTP hook says the
// server cannot reach its database, not that the token was refused, and
// the answer stays ask; a refused token is still called refused, and a
// missing one names the header and variable to use.
func TestHTTPHookStoreOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.noScheduler = true })
	if d, reason := b.hookAnswer(t, b.revoked, "", preToolUse("s1", "t1")); d != "ask" || !strings.Contains(reason, "refused") {
		t.Fatalf("revoked token: %s %q, want ask saying it was refused", d, reason)
	}
	if d, reason := b.hookAnswer(t, "", "", preToolUse("s1", "t1")); d != "ask" || !strings.Contains(reason, "AIRLOCK_AGENT_TOKEN") {
		t.Fatalf("no token: %s %q, want ask naming AIRLOCK_AGENT_TOKEN", d, reason)
	}
	b.store.Close()
	d, reason := b.hookAnswer(t, b.agentA, "", preToolUse("s1", "t1"))
	if d != "ask" || !strings.Contains(reason, "cannot reach its database") || strings.Contains(reason, "refused") {
		t.Fatalf("store down: %s %q, want ask saying the server cannot reach its database", d, reason)
	}
	if errs := b.logs.Take(); len(errs) != 1 || !strings.Contains(errs[0], "check the token") {
		t.Fatalf("logged %q, want the failed check once", errs)
	}
}
