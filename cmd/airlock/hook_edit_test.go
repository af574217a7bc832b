package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestHookClaudeEdited (T37): a reviewer approves a Claude Code call with
// changed arguments. With --accept-edits the hook claims the replacement
// and answers allow with updatedInput, the reviewer's arguments; without
// it, deny naming the replacement, which stays unclaimed.
func TestHookClaudeEdited(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	in, session := payload(t, "claude-code-pretooluse-bash.json")
	edit := func(id string) string {
		r := h.api.call("POST", "/v1/approval-requests/"+id+"/decision", h.reviewer,
			`{"status":"approved","note":"unit tests only","arguments":{"command":"npm test -- --unit"}}`).want(t, 200, "edit")
		return r.Str("replacement.id")
	}

	run := h.startHook(t, nil, in, "claude-code", "--wait", "1m", "--accept-edits")
	orig := h.pending(t, session)
	newID := edit(orig.Str("id"))
	got := run.wait(t)
	var out struct {
		HookSpecificOutput struct {
			PermissionDecision string          `json:"permissionDecision"`
			Reason             string          `json:"permissionDecisionReason"`
			UpdatedInput       json.RawMessage `json:"updatedInput"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &out); err != nil {
		t.Fatalf("stdout %q: %v (stderr %s)", got.stdout, err, got.stderr)
	}
	o := out.HookSpecificOutput
	if o.PermissionDecision != "allow" || string(o.UpdatedInput) != `{"command":"npm test -- --unit"}` ||
		!strings.Contains(o.Reason, "Approved with changes") || !strings.Contains(o.Reason, newID) {
		t.Fatalf("answer %s; want allow with the reviewer's arguments as updatedInput", got.stdout)
	}
	if after := h.api.call("GET", "/v1/approval-requests/"+newID, h.reviewer, "").want(t, 200, "read"); after.Str("execution.status") != "claimed" {
		t.Fatalf("the replacement's execution %v; want claimed before allow", after.Body["execution"])
	}
	if after := h.api.call("GET", "/v1/approval-requests/"+orig.Str("id"), h.reviewer, "").want(t, 200, "read"); after.Body["execution"] != nil {
		t.Fatalf("the original was claimed: %v", after.Body["execution"])
	}

	// Without --accept-edits: deny, naming the replacement, unclaimed.
	next := bytes.ReplaceAll(in, []byte("toolu_01ABC123..."), []byte("toolu_02"))
	run = h.startHook(t, nil, next, "claude-code", "--wait", "1m")
	orig = h.pending(t, session)
	newID = edit(orig.Str("id"))
	d, reason := run.wait(t).decision(t)
	if d != "deny" || !strings.Contains(reason, newID) || !strings.Contains(reason, "--accept-edits") {
		t.Fatalf("answer %s %q; want deny naming %s", d, reason, newID)
	}
	if after := h.api.call("GET", "/v1/approval-requests/"+newID, h.reviewer, "").want(t, 200, "read"); after.Body["execution"] != nil {
		t.Fatalf("the replacement was claimed though the hook denied: %v", after.Body["execution"])
	}
}

// TestHookCodexEdited: Codex's answer carries no updated input, so an
// edited call is denied, naming the replacement, even with
// --accept-edits, and the replacement stays unclaimed.
func TestHookCodexEdited(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	in, session := payload(t, "codex-permissionrequest-bash.json")
	in = replaceSession(in, session)
	run := h.startHook(t, nil, in, "codex", "--wait", "1m", "--accept-edits")
	orig := h.pending(t, session)
	newID := h.api.call("POST", "/v1/approval-requests/"+orig.Str("id")+"/decision", h.reviewer,
		`{"status":"approved","arguments":{"command":"rm -f /tmp/example.txt"}}`).want(t, 200, "edit").Str("replacement.id")
	got := run.wait(t)
	var out struct {
		HookSpecificOutput struct {
			Decision struct {
				Behavior string `json:"behavior"`
				Message  string `json:"message"`
			} `json:"decision"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &out); err != nil {
		t.Fatalf("stdout %q: %v", got.stdout, err)
	}
	d := out.HookSpecificOutput.Decision
	if d.Behavior != "deny" || !strings.Contains(d.Message, newID) || !strings.Contains(d.Message, "cannot carry changed arguments") {
		t.Fatalf("answer %s; want deny naming %s", got.stdout, newID)
	}
	if after := h.api.call("GET", "/v1/approval-requests/"+newID, h.reviewer, "").want(t, 200, "read"); after.Body["execution"] != nil {
		t.Fatalf("the replacement was claimed: %v", after.Body["execution"])
	}
}

// TestHookGeminiEdited (T37): Gemini CLI's BeforeTool answer is allow or
// deny with a reason and cannot carry changed arguments, so a call a
// reviewer approved with changes is denied even with --accept-edits,
// naming the replacement, which stays unclaimed.
func TestHookGeminiEdited(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	in, session := payload(t, "gemini-beforetool-write-file.json")
	in = replaceSession(in, session)
	run := h.startHook(t, nil, in, "gemini", "--wait", "1m", "--accept-edits")
	orig := h.pending(t, session)
	newID := h.api.call("POST", "/v1/approval-requests/"+orig.Str("id")+"/decision", h.reviewer,
		`{"status":"approved","arguments":{"path":"/home/user/project/file.txt","content":"Hello."}}`).want(t, 200, "edit").Str("replacement.id")
	got := run.wait(t)
	var out struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &out); err != nil {
		t.Fatalf("stdout %q: %v", got.stdout, err)
	}
	if out.Decision != "deny" || !strings.Contains(out.Reason, newID) || !strings.Contains(out.Reason, "cannot carry changed arguments") {
		t.Fatalf("answer %s; want deny naming %s", got.stdout, newID)
	}
	if after := h.api.call("GET", "/v1/approval-requests/"+newID, h.reviewer, "").want(t, 200, "read"); after.Body["execution"] != nil {
		t.Fatalf("the replacement was claimed: %v", after.Body["execution"])
	}
}
