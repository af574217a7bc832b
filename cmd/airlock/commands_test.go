package main

import (
	"bytes"
	"errors"
	"flag"
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
// there. Each one prints its usage for -h, so each is wired to a run
// function that reads its help from the table.
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

		var stdout, stderr bytes.Buffer
		app := &App{Stdout: &stdout, Stderr: &stderr}
		if err := app.Run(t.Context(), []string{"help", c.name}); err != nil || !strings.HasPrefix(stdout.String(), "Usage: airlock "+c.name+" ") {
			t.Errorf("airlock help %s: %v\n%s%s", c.name, err, stdout.String(), stderr.String())
		}
		for _, s := range c.subs {
			stderr.Reset()
			err := app.Run(t.Context(), []string{c.name, s.name, "-h"})
			if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(stderr.String(), "Usage: airlock "+c.name+" ") {
				t.Errorf("airlock %s %s -h: %v\n%s", c.name, s.name, err, stderr.String())
			}
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
