package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/creack/pty"
)

// ptyRun is the real binary running on a pseudo-terminal, as a reviewer
// runs it.
type ptyRun struct {
	tty    *os.File // the terminal's controlling side: what the reviewer types and sees
	out    *testkit.Output
	exited chan struct{}
	cmd    *exec.Cmd
}

func startOnTerminal(t *testing.T, url, token string, args ...string) *ptyRun {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIRLOCK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "AIRLOCK_URL="+url, "AIRLOCK_TOKEN="+token)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	p := &ptyRun{tty: tty, out: testkit.NewOutput(), exited: make(chan struct{}), cmd: cmd}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(p.out, tty) // ends with EIO once the process and its terminal are gone
	}()
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		tty.Close()
		<-copied
	})
	return p
}

// typeLine types a line at the terminal.
func (p *ptyRun) typeLine(t *testing.T, s string) {
	t.Helper()
	if _, err := p.tty.Write([]byte(s + "\r")); err != nil {
		t.Fatal(err)
	}
}

// TestCLIWatchOnTerminal: the real binary on a pseudo-terminal prompts by
// itself, restates the tool and arguments right above the prompt after a
// long claim, confirms before approving, and quits on q while nothing
// waits.
func TestCLIWatchOnTerminal(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	long := strings.Repeat("This refund is fine because the customer was charged twice. ", 70) // about 4 KB
	id := s.create(t, `{"tool":"issue_refund","arguments":{"amount":4900},"agent_reasoning":"`+long+`"}`)

	p := startOnTerminal(t, s.url, s.reviewer, "requests", "watch", "--valid-for", "2m")
	p.out.WaitFor(t, regexp.MustCompile(`Decide \[a\]pprove, \[d\]eny, \[s\]kip, \[q\]uit: $`), p.exited)
	screen := p.out.String()
	restated := strings.LastIndex(screen, "→ "+id+`  issue_refund {"amount":4900}`)
	if restated < 0 || restated < strings.LastIndex(screen, "charged twice") {
		t.Fatalf("the tool and arguments are not restated below the claim, above the prompt:\n%s", screen[max(0, len(screen)-600):])
	}
	p.typeLine(t, "a")
	p.out.WaitFor(t, regexp.MustCompile(`\[2m\]: $`), p.exited)
	p.typeLine(t, "")
	p.out.WaitFor(t, regexp.MustCompile(`\(optional\): $`), p.exited)
	p.typeLine(t, "")
	p.out.WaitFor(t, regexp.MustCompile(`Approve issue_refund, which may start for 2m, with no note\.\r?\nRecord this\? \[y/N\]: $`), p.exited)
	p.typeLine(t, "y")
	p.out.WaitFor(t, regexp.MustCompile(`approved `+id+`; the call may start until`), p.exited)
	p.typeLine(t, "q")
	<-p.exited
	if st := p.cmd.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Fatalf("watch exit: %v", st)
	}
	got := s.api.call("GET", "/v1/approval-requests/"+id, s.reviewer, "").want(t, 200, "read")
	if got.Str("state") != "approved" {
		t.Fatalf("state %s", got.Str("state"))
	}
}

// TestCLIJSONOnTerminal: --json on a terminal escapes bidi and zero-width
// characters, so they cannot reorder what the reviewer reads; the JSON
// still means exactly what the API said.
func TestCLIJSONOnTerminal(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	// Raw characters in the body, not JSON escapes: the arguments are kept
	// byte for byte as submitted.
	id := s.create(t, "{\"tool\":\"run\",\"arguments\":{\"file\":\"invoice\u202efdp.exe\",\"x\":\"a\u200bb😀\"}}")
	p := startOnTerminal(t, s.url, s.reviewer, "requests", "show", "--json", id)
	<-p.exited
	p.out.WaitFor(t, regexp.MustCompile(`\}\r?\n$`), nil)
	screen := strings.ReplaceAll(p.out.String(), "\r\n", "\n")
	if strings.ContainsAny(screen, "\u202e\u200b") {
		t.Fatalf("raw bidi or zero-width characters reached the terminal:\n%q", screen)
	}
	if !strings.Contains(screen, `invoice\u202efdp.exe`) || !strings.Contains(screen, "😀") {
		t.Fatalf("not escaped as \\u202e, or a visible character escaped too:\n%s", screen)
	}
	var shown, api struct {
		Arguments map[string]string `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(screen), &shown); err != nil {
		t.Fatalf("the terminal's JSON does not parse: %v\n%s", err, screen)
	}
	json.Unmarshal([]byte(s.api.call("GET", "/v1/approval-requests/"+id, s.reviewer, "").want(t, 200, "read").Raw), &api)
	if shown.Arguments["file"] != api.Arguments["file"] || shown.Arguments["x"] != api.Arguments["x"] || api.Arguments["file"] != "invoice\u202efdp.exe" {
		t.Fatalf("the JSON changed meaning: %q against %q", shown.Arguments, api.Arguments)
	}
}

// TestCLIDecideConfirms: on a terminal, `requests approve` and `deny` show
// the call (tool, arguments indented, the agent's claim labelled, the
// context) and ask y/N: y records, n records nothing. On a pipe they
// refuse without --yes, whatever the pipe says, and record with it.
func TestCLIDecideConfirms(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	body := `{"tool":"drop_table","arguments":{"db":{"name":"prod","table":"users"}},"agent_reasoning":"cleanup","context":{"cwd":"/srv/app"}}`
	state := func(id string) string {
		return s.api.call("GET", "/v1/approval-requests/"+id, s.reviewer, "").want(t, 200, "read").Str("state")
	}
	prompt := regexp.MustCompile(`Record this\? \[y/N\]: $`)

	for _, tc := range []struct {
		name, answer string
		args         []string
		exit         int
		state        string
	}{
		{"terminal, yes", "y", []string{"approve", "--valid-for", "2m", "--note", "once"}, 0, "approved"},
		{"terminal, no", "n", []string{"deny"}, 1, "pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := s.create(t, body)
			p := startOnTerminal(t, s.url, s.reviewer, append([]string{"requests", tc.args[0], id}, tc.args[1:]...)...)
			p.out.WaitFor(t, prompt, p.exited)
			screen := strings.ReplaceAll(p.out.String(), "\r\n", "\n")
			for _, want := range []string{"Tool:         drop_table", "\"db\": {\n", "      \"name\": \"prod\",", "The agent's claim (unverified):\n  cleanup",
				"Context from the adapter:", `"cwd": "/srv/app"`} {
				if !strings.Contains(screen, want) {
					t.Errorf("the terminal does not show %q:\n%s", want, screen)
				}
			}
			if tc.answer == "y" && !strings.Contains(screen, "Approve drop_table, which may start for 2m, with the note “once”.") {
				t.Errorf("the decision is not restated:\n%s", screen)
			}
			if got := state(id); got != "pending" {
				t.Fatalf("recorded %s before the answer", got)
			}
			p.typeLine(t, tc.answer)
			<-p.exited
			if code := p.cmd.ProcessState.ExitCode(); code != tc.exit {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.exit, p.out.String())
			}
			if tc.exit != 0 {
				// The process is gone, but its last line may still be on
				// its way from the terminal: wait for it, as for any output.
				p.out.WaitFor(t, regexp.MustCompile(`nothing was recorded`), nil)
			}
			if got := state(id); got != tc.state {
				t.Fatalf("state %s after %s, want %s", got, tc.answer, tc.state)
			}
		})
	}
	t.Run("pipe", func(t *testing.T) {
		t.Parallel()
		id := s.create(t, body)
		run := func(args ...string) (int, string) {
			cmd := exec.Command(binary(t), args...)
			cmd.Env = append(os.Environ(), "AIRLOCK_URL="+s.url, "AIRLOCK_TOKEN="+s.reviewer)
			cmd.Stdin = strings.NewReader("y\n")
			out, _ := cmd.CombinedOutput()
			return cmd.ProcessState.ExitCode(), string(out)
		}
		for _, verb := range []string{"approve", "deny"} {
			code, out := run("requests", verb, id)
			if code != exitUsage || !strings.Contains(out, "no terminal to ask on") || !strings.Contains(out, "--yes") {
				t.Errorf("%s on a pipe: exit %d, want %d saying to pass --yes:\n%s", verb, code, exitUsage, out)
			}
		}
		if got := state(id); got != "pending" {
			t.Fatalf("a pipe recorded %s without --yes", got)
		}
		if code, out := run("requests", "approve", id, "--yes"); code != 0 || !strings.Contains(out, "approved "+id) {
			t.Fatalf("approve --yes on a pipe: exit %d:\n%s", code, out)
		}
		if got := state(id); got != "approved" {
			t.Fatalf("state %s after --yes", got)
		}
	})
}
