package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestAgentTokenEnv: the hook takes its token from AIRLOCK_AGENT_TOKEN;
// AIRLOCK_TOKEN still works, with one line on stderr saying it is
// deprecated (and never the token); with both set, the new name wins.
func TestAgentTokenEnv(t *testing.T) {
	t.Parallel()
	h := startHookSrv(t)
	const bad = "airlock_not_a_token_0123456789"
	for _, tc := range []struct {
		name   string
		env    []string
		reason string // what the ask answer says
		warns  bool
	}{
		{"the new name", []string{"AIRLOCK_AGENT_TOKEN=" + h.agent}, "no decision", false},
		{"the old name", []string{"AIRLOCK_AGENT_TOKEN=", "AIRLOCK_TOKEN=" + h.agent}, "no decision", true},
		{"both, the new one good", []string{"AIRLOCK_AGENT_TOKEN=" + h.agent, "AIRLOCK_TOKEN=" + bad}, "no decision", false},
		{"both, the new one bad", []string{"AIRLOCK_AGENT_TOKEN=" + bad, "AIRLOCK_TOKEN=" + h.agent}, "unauthorized", false},
		{"neither", []string{"AIRLOCK_AGENT_TOKEN="}, "set AIRLOCK_AGENT_TOKEN", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, _ := payload(t, "claude-code-pretooluse-bash.json")
			r := h.hook(t, tc.env, in, "claude-code", "--wait", "1s")
			d, reason := r.decision(t)
			if d != "ask" || !strings.Contains(reason, tc.reason) {
				t.Fatalf("answer %s %q, want ask saying %q; stderr %s", d, reason, tc.reason, r.stderr)
			}
			warned := strings.Count(r.stderr, "AIRLOCK_TOKEN is deprecated")
			if tc.warns && warned != 1 || !tc.warns && warned != 0 {
				t.Errorf("stderr %q: %d deprecation lines, want %v", r.stderr, warned, tc.warns)
			}
			if strings.Contains(r.stderr, h.agent) || strings.Contains(r.stdout, h.agent) {
				t.Errorf("the token was echoed: stdout %q stderr %q", r.stdout, r.stderr)
			}
		})
	}
}

// TestAgentCommandsNameTheirToken: the usage of every agent-side command
// names AIRLOCK_AGENT_TOKEN for --token; the CLI's commands keep
// AIRLOCK_TOKEN.
func TestAgentCommandsNameTheirToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  string
	}{
		{[]string{"help", "hook"}, "[$AIRLOCK_AGENT_TOKEN]"},
		{[]string{"help", "mcp"}, "[$AIRLOCK_AGENT_TOKEN]"},
		{[]string{"help", "gate"}, "[$AIRLOCK_AGENT_TOKEN]"},
		{[]string{"requests", "list", "-h"}, "[$AIRLOCK_TOKEN]"},
	} {
		var out bytes.Buffer
		app := &App{Stdout: &out, Stderr: &out}
		code := exitCode(app, app.Run(context.Background(), tc.args))
		if code != 0 || !strings.Contains(out.String(), tc.env) {
			t.Errorf("airlock %s: exit %d, usage does not name %s:\n%s", strings.Join(tc.args, " "), code, tc.env, out.String())
		}
	}
}
