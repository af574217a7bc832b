package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestCLIBatchDecide: `requests approve` with several ids is one batch.
// On a terminal it shows every call in full and asks once; y decides each
// id, a line per id. On a pipe it needs --yes; an id refused (here one
// already denied) gets its own line and the conflict's exit code, and the
// others are decided all the same.
func TestCLIBatchDecide(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	state := func(id string) string {
		return s.api.call("GET", "/v1/approval-requests/"+id, s.reviewer, "").want(t, 200, "read").Str("state")
	}

	t.Run("terminal", func(t *testing.T) {
		t.Parallel()
		a := s.create(t, `{"tool":"drop_table","arguments":{"table":"users"}}`)
		b := s.create(t, `{"tool":"send_email","arguments":{"to":"ops@example.com"}}`)
		p := startOnTerminal(t, s.url, s.reviewer, "requests", "approve", a, b, "--note", "both")
		p.out.WaitFor(t, regexp.MustCompile(`Approve these 2 requests, each as its own decision\? \[y/N\]: $`), p.exited)
		screen := strings.ReplaceAll(p.out.String(), "\r\n", "\n")
		for _, want := range []string{"1 of 2", "Tool:         drop_table", `"table": "users"`, "2 of 2", "Tool:         send_email", `"to": "ops@example.com"`} {
			if !strings.Contains(screen, want) {
				t.Errorf("the terminal does not show %q:\n%s", want, screen)
			}
		}
		if state(a) != "pending" || state(b) != "pending" {
			t.Fatal("recorded before the answer")
		}
		p.typeLine(t, "y")
		<-p.exited
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.out.String())
		}
		if state(a) != "approved" || state(b) != "approved" {
			t.Fatalf("after y: %s, %s", state(a), state(b))
		}
	})

	t.Run("pipe", func(t *testing.T) {
		t.Parallel()
		a, done, b := s.create(t, `{"tool":"t","arguments":{"n":1}}`), s.create(t, `{"tool":"t","arguments":{"n":2}}`), s.create(t, `{"tool":"t","arguments":{"n":3}}`)
		run := func(args ...string) (int, string) {
			cmd := exec.Command(binary(t), args...)
			cmd.Env = append(os.Environ(), "AIRLOCK_URL="+s.url, "AIRLOCK_TOKEN="+s.reviewer)
			cmd.Stdin = strings.NewReader("y\n")
			out, _ := cmd.CombinedOutput()
			return cmd.ProcessState.ExitCode(), string(out)
		}
		if code, out := run("requests", "deny", done, "--yes"); code != 0 {
			t.Fatalf("deny: %d %s", code, out)
		}
		if code, out := run("requests", "approve", a, done, b); code != exitUsage || !strings.Contains(out, "--yes") {
			t.Fatalf("a batch on a pipe without --yes: exit %d:\n%s", code, out)
		}
		if code, out := run("requests", "approve", a, done, "--grant", "1h", "--yes"); code != exitUsage || !strings.Contains(out, "one request at a time") {
			t.Fatalf("a batch with --grant: exit %d:\n%s", code, out)
		}
		if state(a) != "pending" {
			t.Fatal("a refused batch recorded something")
		}
		code, out := run("requests", "approve", a, done, b, "--yes")
		if code != exitConflict || !strings.Contains(out, "approved "+a) || !strings.Contains(out, "approved "+b) ||
			!strings.Contains(out, done+": not decided") || !strings.Contains(out, "1 of 3 requests were not decided") {
			t.Fatalf("batch: exit %d, want %d:\n%s", code, exitConflict, out)
		}
		if state(a) != "approved" || state(b) != "approved" || state(done) != "denied" {
			t.Fatalf("after the batch: %s %s %s", state(a), state(done), state(b))
		}
	})
}
