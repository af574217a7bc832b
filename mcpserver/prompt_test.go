package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// promptClient connects an SDK client that counts progress notifications.
func (b *bundle) promptClient(t *testing.T, progress *atomic.Int64) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := b.srv.Connect(t.Context(), st, b.agent)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "claude-code", Version: "test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	}).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// prompt calls approval_prompt as Claude Code does and returns the JSON of
// the first text content, which is what Claude Code parses.
func prompt(t *testing.T, cs *mcp.ClientSession, args string) (out map[string]any) {
	t.Helper()
	params := &mcp.CallToolParams{Name: ToolApprovalPrompt, Arguments: json.RawMessage(args)}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatalf("protocol error: %v", err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("result %+v: want a decision in the first text content", res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("first content %q is not JSON: %v", text, err)
	}
	return out
}

// pendingPrompt waits until approval_prompt's request is pending.
func (b *bundle) pendingPrompt(t *testing.T, tool string) airlock.Request {
	t.Helper()
	for {
		page, err := b.svc.ListRequests(t.Context(), b.reviewer, provider.ListQuery{State: airlock.StatePending, Tool: tool})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Requests) > 0 {
			return page.Requests[0]
		}
		time.Sleep(5 * time.Millisecond) // polls the store for the request the tool call makes
	}
}

// TestApprovalPrompt: Claude Code's --permission-prompt-tool contract.
// Approved: allow with the input unchanged, after the execution was
// claimed. Denied, cancelled: deny saying why. Bad input: deny, never an
// isError result Claude Code would not read as a decision.
func TestApprovalPrompt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var progress atomic.Int64
	cs := b.promptClient(t, &progress)
	const input = `{"command":"git push --force","description":"Push"}`

	done := make(chan map[string]any, 1)
	go func() { done <- prompt(t, cs, `{"tool_name":"Bash","input":`+input+`,"tool_use_id":"toolu_1"}`) }()
	r := b.pendingPrompt(t, "Bash")
	if string(r.Arguments) != input {
		t.Errorf("arguments %s, want the input exactly", r.Arguments)
	}
	if _, err := b.svc.Decide(t.Context(), b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out["behavior"] != "allow" {
		t.Fatalf("answer %v, want allow", out)
	}
	if got, _ := json.Marshal(out["updatedInput"]); string(got) != `{"command":"git push --force","description":"Push"}` {
		t.Errorf("updatedInput %s, want the input unchanged", got)
	}
	if after, _ := b.svc.Request(t.Context(), b.reviewer, r.ID, 0); after.Execution == nil {
		t.Error("allowed before the execution was claimed")
	}
	if progress.Load() == 0 {
		t.Error("no progress notification while waiting")
	}

	go func() {
		done <- prompt(t, cs, `{"tool_name":"Write","input":{"file_path":"/etc/hosts"},"tool_use_id":"toolu_2"}`)
	}()
	r = b.pendingPrompt(t, "Write")
	if _, err := b.svc.Decide(t.Context(), b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateDenied, Note: "not /etc"}); err != nil {
		t.Fatal(err)
	}
	if out := <-done; out["behavior"] != "deny" || !strings.Contains(out["message"].(string), "not /etc") {
		t.Fatalf("answer %v, want deny with the note", out)
	}

	go func() {
		done <- prompt(t, cs, `{"tool_name":"Edit","input":{"file_path":"a"},"tool_use_id":"toolu_3"}`)
	}()
	r = b.pendingPrompt(t, "Edit")
	if _, err := b.svc.Cancel(t.Context(), b.agent, r.ID); err != nil {
		t.Fatal(err)
	}
	if out := <-done; out["behavior"] != "deny" || !strings.Contains(out["message"].(string), "cancelled") {
		t.Fatalf("answer %v, want deny because cancelled", out)
	}

	// A retried call (same tool_use_id) finds the same, spent, approval.
	if out := prompt(t, cs, `{"tool_name":"Bash","input":`+input+`,"tool_use_id":"toolu_1"}`); out["behavior"] != "deny" {
		t.Fatalf("retried call: %v, want deny", out)
	}

	for _, bad := range []string{`{"tool_name":"Bash"}`, `{"tool_name":"Bash","input":"ls"}`, `{"tool_name":"Bash","tool_name":"Read","input":{}}`} {
		if out := prompt(t, cs, bad); out["behavior"] != "deny" || out["message"] == "" {
			t.Errorf("%s: %v, want deny saying why", bad, out)
		}
	}
}
