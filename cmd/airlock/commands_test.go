package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCommandTable holds the command table to the documentation both ways:
// every `airlock <command> [<subcommand>]` the README and docs/ show is in
// the table, and every command and subcommand of the table is shown
// there.
func TestCommandTable(t *testing.T) {
	t.Parallel()
	documented := documentedCommands(t)
	if len(documented) == 0 {
		t.Fatal("found no `airlock <command>` in README.md and docs/")
	}
	for name, places := range documented {
		cmd, sub, _ := strings.Cut(name, " ")
		c, ok := findCommand(cmd)
		switch {
		case !ok:
			t.Errorf("%s names `airlock %s`, which is not in the command table", places[0], cmd)
		case sub != "" && c.subs != nil:
			if _, ok := findSubcommand(cmd, sub); !ok {
				t.Errorf("%s names `airlock %s`, which is not in the command table", places[0], name)
			}
		}
	}
	shown := map[string]bool{} // the commands documented, with or without a second word
	for name := range documented {
		cmd, _, _ := strings.Cut(name, " ")
		shown[cmd] = true
	}
	for _, c := range commands() {
		if !shown[c.name] {
			t.Errorf("`airlock %s` is in the command table but neither README.md nor docs/ shows it", c.name)
		}
		for _, s := range c.subs {
			if _, ok := documented[c.name+" "+s.name]; !ok {
				t.Errorf("`airlock %s %s` is in the command table but neither README.md nor docs/ shows it", c.name, s.name)
			}
		}
	}
}

// TestEveryCommandHelps walks the command table: `airlock help X`,
// `airlock X -h` and `airlock X --help`, and the same for each
// subcommand, exit 0 with the usage naming the command on stdout and
// nothing on stderr, as main runs them.
func TestEveryCommandHelps(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		forms := [][]string{{"help", c.name}, {c.name, "-h"}, {c.name, "--help"}}
		names := []string{"airlock " + c.name, "airlock " + c.name, "airlock " + c.name}
		for _, s := range c.subs {
			forms = append(forms, []string{"help", c.name, s.name}, []string{c.name, s.name, "-h"}, []string{c.name, s.name, "--help"})
			names = append(names, "airlock "+c.name+" ", "airlock "+c.name+" ", "airlock "+c.name+" ")
		}
		for i, args := range forms {
			var stdout, stderr bytes.Buffer
			app := &App{Stdout: &stdout, Stderr: &stderr}
			code := exitCode(app, app.Run(t.Context(), args))
			if code != exitOK || !strings.HasPrefix(stdout.String(), "Usage: "+names[i]) || stderr.Len() > 0 {
				t.Errorf("airlock %s: exit %d, want 0 with the usage on stdout\nstdout: %s\nstderr: %s",
					strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
			if len(args) == 3 && args[0] != "help" && !strings.Contains(stdout.String(), args[1]) {
				t.Errorf("airlock %s: the usage does not name %s:\n%s", strings.Join(args, " "), args[1], stdout.String())
			}
		}
	}
}

// TestHookHelpNeverAnswers: with an agent named, `airlock hook` is an
// agent's hook command, and the agent reads stdout as its answer and exit
// 0 as no objection. Help asked for there prints nothing on stdout and
// exits 2, which every agent reads as "block"; the usage goes to stderr.
func TestHookHelpNeverAnswers(t *testing.T) {
	t.Parallel()
	payload := `{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1","cwd":"/tmp","transcript_path":"/tmp/t"}`
	for _, args := range [][]string{
		{"hook", "claude-code", "-h"},
		{"hook", "claude-code", "--help"},
		{"hook", "codex", "-h"},
		{"hook", "codex", "--url", "http://127.0.0.1:1", "-help"},
		{"hook", "gemini", "-h"},
		{"hook", "gemini", "--wait", "5s", "--help"},
	} {
		var stdout, stderr bytes.Buffer
		app := &App{Stdin: strings.NewReader(payload), Stdout: &stdout, Stderr: &stderr}
		code := exitCode(app, app.Run(t.Context(), args))
		if code != exitUsage || stdout.Len() > 0 || !strings.Contains(stderr.String(), "Usage: airlock hook ") ||
			!strings.Contains(stderr.String(), "blocking this call") {
			t.Errorf("airlock %s: exit %d, want 2 with nothing on stdout\nstdout: %s\nstderr: %s",
				strings.Join(args, " "), code, stdout.String(), stderr.String())
		}
	}
}

// documentedCommands returns every `airlock <command> [<word>]` that
// README.md and docs/ show in code (a code span or a line of a code
// block that starts with the command), with the files that show it.
func documentedCommands(t *testing.T) map[string][]string {
	t.Helper()
	files := []string{filepath.Join("..", "..", "README.md")}
	err := filepath.WalkDir(filepath.Join("..", "..", "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fence := regexp.MustCompile("(?s)```[^\n]*\n(.*?)```")
	span := regexp.MustCompile("`([^`\n]+)`")
	invocation := regexp.MustCompile(`^\s*(?:\$ )?(?:\./|go run \./cmd/)?airlock ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?`)
	found := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var code []string
		for _, m := range fence.FindAllStringSubmatch(string(b), -1) {
			code = append(code, strings.Split(m[1], "\n")...)
		}
		for _, m := range span.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
			code = append(code, m[1])
		}
		for _, line := range code {
			m := invocation.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			name := m[1]
			if m[2] != "" {
				name += " " + m[2]
			}
			if !slices.Contains(found[name], f) {
				found[name] = append(found[name], f)
			}
		}
	}
	return found
}
