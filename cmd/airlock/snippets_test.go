package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// goSnippet is one ```go block of README.md or docs/ marked to run.
type goSnippet struct {
	where, name, code string
}

var (
	snippetMark = regexp.MustCompile(`^<!-- snippet: (.+?)(?: \(run by [^)]*\))? -->$`)
	notRunMark  = regexp.MustCompile(`^<!-- not run: .+ -->$`)
)

// goSnippets returns the ```go blocks of README.md and docs/**/*.md by the
// name on the `<!-- snippet: NAME -->` line before each. A block marked
// neither so nor `<!-- not run: WHY -->` fails the test: every Go snippet
// the docs print must run.
func goSnippets(t *testing.T) map[string]goSnippet {
	t.Helper()
	files := []string{"../../README.md"}
	err := filepath.WalkDir("../../docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]goSnippet{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			if lines[i] != "```go" {
				continue
			}
			end := i + 1
			for end < len(lines) && lines[end] != "```" {
				end++
			}
			where := strings.TrimPrefix(f, "../../") + ":" + strconv.Itoa(i+1)
			var before string
			if i > 0 {
				before = lines[i-1]
			}
			switch m := snippetMark.FindStringSubmatch(before); {
			case m != nil:
				if prev, ok := found[m[1]]; ok {
					t.Errorf("%s and %s are both marked %q", prev.where, where, m[1])
				}
				found[m[1]] = goSnippet{where: where, name: m[1], code: strings.Join(lines[i+1:end], "\n") + "\n"}
			case !notRunMark.MatchString(before):
				t.Errorf("%s: a Go block no test runs; mark it <!-- snippet: NAME --> and run it here, or <!-- not run: WHY -->", where)
			}
			i = end
		}
	}
	return found
}

// TestDocsGoSnippets builds each Go snippet of the docs as printed, as a
// program of its own against this module, and runs it against a real
// server with the environment it reads (AIRLOCK_URL, AIRLOCK_AGENT_TOKEN),
// while a reviewer approves what it asks. The gate's snippet runs twice in
// the same folder: the second run finds its instance by name and the
// call's outcome in its journal, asks nothing and runs nothing again.
func TestDocsGoSnippets(t *testing.T) {
	t.Parallel()
	snippets := goSnippets(t)
	for _, want := range []string{"go client", "go gate"} {
		if _, ok := snippets[want]; !ok {
			t.Fatalf("no Go block is marked <!-- snippet: %s --> in README.md or docs/", want)
		}
	}
	srv, a := serveNew(t)
	agent := a.mintToken(testAdmin, "snippet agent", "agent")
	reviewer, err := client.New(srv.url, a.mintToken(testAdmin, "snippet reviewer", "reviewer"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(srv.url, testAdmin)
	if err != nil {
		t.Fatal(err)
	}

	build := func(s goSnippet) string {
		t.Helper()
		dir := t.TempDir()
		src := filepath.Join(dir, "main.go")
		if err := os.WriteFile(src, []byte(s.code), 0o600); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "snippet")
		cmd := exec.Command("go", "build", "-o", bin, src)
		cmd.Dir = "../.." // this module, so the snippet imports this checkout's packages
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s (%q) does not build: %v\n%s", s.where, s.name, err, out)
		}
		return bin
	}
	// run starts bin in work, approves every request pending while it runs,
	// and returns what it printed and how many requests it approved.
	run := func(s goSnippet, bin, work string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, bin)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "AIRLOCK_URL="+srv.url, "AIRLOCK_AGENT_TOKEN="+agent)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		approved := map[string]bool{}
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			page, err := reviewer.ListRequests(ctx, client.ListRequestsOptions{State: airlock.StatePending})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Items {
				if !approved[r.ID] {
					approved[r.ID] = true
					if _, err := reviewer.Approve(ctx, r.ID, "fine"); err != nil {
						t.Fatal(err)
					}
				}
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("%s (%q) failed: %v\n%s", s.where, s.name, err, out.String())
				}
				return out.String(), len(approved)
			case <-tick.C:
			}
		}
	}

	cs := snippets["go client"]
	out, approvals := run(cs, build(cs), t.TempDir())
	if !strings.Contains(out, "created: true decided: approved") || approvals != 1 {
		t.Errorf("%s printed %q after %d approvals; want the approved request, after one", cs.where, out, approvals)
	}

	gs := snippets["go gate"]
	bin, work := build(gs), t.TempDir()
	out, approvals = run(gs, bin, work)
	if !strings.Contains(out, `refunded {"payment_id":"payment_123","amount":4900}`) || approvals != 1 {
		t.Errorf("%s printed %q after %d approvals; want the refund, after one", gs.where, out, approvals)
	}
	out, approvals = run(gs, bin, work)
	if strings.Contains(out, "refunded") || !strings.Contains(out, "already done; not run again") || approvals != 0 {
		t.Errorf("%s run again printed %q after %d approvals; want it already done, nothing asked", gs.where, out, approvals)
	}
	list, err := admin.ListInstances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, in := range list {
		if in.Name == "billing agent" {
			named = append(named, in.ID)
		}
	}
	if len(named) != 1 {
		t.Fatalf("instances named %q: %v; want the one the first run registered", "billing agent", named)
	}
	page, err := admin.ListRequests(context.Background(), client.ListRequestsOptions{InstanceID: named[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].Execution == nil || page.Items[0].Execution.Status != airlock.ExecSucceeded {
		t.Errorf("the gate's instance has requests %+v; want one, run once and succeeded", page.Items)
	}
}
