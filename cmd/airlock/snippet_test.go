package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// settingsSnippet returns the first JSON block after heading in a
// Markdown file of the repository.
func settingsSnippet(t *testing.T, file, heading string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, heading)
	if i < 0 {
		t.Fatalf("%s has no %q", file, heading)
	}
	start := strings.Index(s[i:], "```json\n")
	if start < 0 {
		t.Fatalf("%s has no JSON block after %q", file, heading)
	}
	s = s[i+start+len("```json\n"):]
	end := strings.Index(s, "```\n")
	if end < 0 {
		t.Fatalf("%s: the JSON block after %q does not end", file, heading)
	}
	return s[:end]
}

// TestClaudeCodeSnippet: the README's Claude Code settings are the docs'
// settings, byte for byte; they are JSON Claude Code reads, gate the same
// tools before and after they run (MultiEdit, NotebookEdit and WebFetch
// among them), give each hook a timeout above its wait, and every command
// in them runs as printed: it answers with exit 0 and JSON on stdout.
func TestClaudeCodeSnippet(t *testing.T) {
	t.Parallel()
	readme := settingsSnippet(t, "README.md", "## Approve Claude Code's tool calls from your phone")
	docs := settingsSnippet(t, "docs/integrations/claude-code.md", "## The command hook")
	if readme != docs {
		t.Fatalf("the README's Claude Code settings differ from docs/integrations/claude-code.md's:\nREADME:\n%s\ndocs:\n%s", readme, docs)
	}
	var settings struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type      string  `json:"type"`
				Command   string  `json:"command"`
				Timeout   float64 `json:"timeout"`
				OnFailure string  `json:"onFailure"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	dec := json.NewDecoder(strings.NewReader(docs))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&settings); err != nil {
		t.Fatalf("the settings are not the JSON Claude Code reads: %v", err)
	}
	pre := settings.Hooks["PreToolUse"]
	if len(pre) != 1 {
		t.Fatalf("%d PreToolUse entries, want 1", len(pre))
	}
	for _, tool := range []string{"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "WebFetch", "mcp__github__create_issue"} {
		if !regexp.MustCompile("^(?:" + pre[0].Matcher + ")$").MatchString(tool) {
			t.Errorf("PreToolUse's matcher %q does not gate %s", pre[0].Matcher, tool)
		}
	}
	for _, ev := range []string{"PostToolUse", "PostToolUseFailure"} {
		if e := settings.Hooks[ev]; len(e) != 1 || e[0].Matcher != pre[0].Matcher {
			t.Errorf("%s does not report on the tools PreToolUse gates: %+v", ev, e)
		}
	}
	if len(settings.Hooks["SessionEnd"]) != 1 {
		t.Errorf("no SessionEnd hook")
	}

	inputs := map[string]string{
		"PreToolUse":         `{"session_id":"s","transcript_path":"/t.jsonl","cwd":"/w","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1"}`,
		"PostToolUse":        `{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1","tool_response":{"stdout":""}}`,
		"PostToolUseFailure": `{"session_id":"s","hook_event_name":"PostToolUseFailure","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1","error":"exit 1"}`,
		"SessionEnd":         `{"session_id":"s","hook_event_name":"SessionEnd","reason":"logout"}`,
	}
	down := "http://" + closedAddr(t)
	for ev, entries := range settings.Hooks {
		for _, e := range entries {
			for _, h := range e.Hooks {
				args := strings.Fields(strings.TrimSuffix(h.Command, " || exit 2"))
				if h.Type != "command" || len(args) < 3 || args[0] != "airlock" || args[1] != "hook" {
					t.Errorf("%s: %q is not an airlock hook command", ev, h.Command)
					continue
				}
				wait := DefaultHookWait
				for i, a := range args {
					if a == "--wait" && i+1 < len(args) {
						wait, _ = time.ParseDuration(args[i+1])
					}
				}
				if time.Duration(h.Timeout*float64(time.Second)) <= wait && ev == "PreToolUse" {
					t.Errorf("%s: timeout %vs is not above the wait %s", ev, h.Timeout, wait)
				}
				in, ok := inputs[ev]
				if !ok {
					t.Errorf("no input for %s", ev)
					continue
				}
				var out, errOut bytes.Buffer
				app := &App{Stdin: strings.NewReader(in), Stdout: &out, Stderr: &errOut,
					LookupEnv: mapEnv(map[string]string{"AIRLOCK_URL": down, "AIRLOCK_AGENT_TOKEN": "agent-token", "AIRLOCK_STATE_DIR": t.TempDir()})}
				code := exitCode(app, app.Run(context.Background(), args[1:]))
				if code != 0 || !json.Valid(out.Bytes()) || strings.Contains(out.String(), `"allow"`) {
					t.Errorf("%s: %q exited %d with %q; stderr %s", ev, h.Command, code, out.String(), errOut.String())
				}
			}
		}
	}
}
