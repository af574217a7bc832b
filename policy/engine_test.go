package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"log/slog"
)

const allowLs = "rules:\n  - {name: ls, match: 'request.tool == \"ls\"', action: allow}\n"

// writeFile replaces the file at path with src in one step (a new file
// renamed over it), so a watcher polling every millisecond never reads
// it half written.
func writeFile(t *testing.T, path, src string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newEngine(t *testing.T, src string) (*Engine, string, chan error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writeFile(t, path, src)
	e, err := NewEngine(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	reloads := make(chan error, 10)
	e.reloaded = func(err error) { reloads <- err }
	return e, path, reloads
}

func TestStartRefusesABadFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writeFile(t, path, "rules:\n  - {name: ok, match: 'true', action: ask}\n  - name: broken\n    match: request.tool ==\n    action: deny\n")
	_, err := NewEngine(path, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `rule "broken" (rule 2, line 3, column 5)`) {
		t.Fatalf("NewEngine: %v, want the broken rule named with its place", err)
	}
}

// A reload that does not compile keeps the rules in force, and is logged
// and counted; a good one replaces them, and the counters of a rule that
// keeps its name go on. A verdict counts only when recorded.
func TestReload(t *testing.T) {
	t.Parallel()
	e, path, _ := newEngine(t, allowLs)
	old := e.Current()
	// Each verdict is recorded, as the provider records a new request's;
	// one more, not recorded (a replay's), must count nothing.
	evaluate := func() airlock.PolicyVerdict {
		v := e.Evaluate(t.Context(), toolCall("ls", `{}`))
		if v.Record == nil {
			t.Fatal("a verdict a rule decided has nothing to record")
		}
		v.Record()
		return v
	}
	if v := evaluate(); v.Initial == nil {
		t.Fatal("ls not allowed")
	}
	e.Evaluate(t.Context(), toolCall("ls", `{}`))
	writeFile(t, path, "rules:\n  - {name: ls, match: 'request.tool ==', action: allow}\n")
	if err := e.Reload(); err == nil || !strings.Contains(err.Error(), `rule "ls"`) {
		t.Fatalf("Reload of a bad file: %v", err)
	}
	if e.Current() != old {
		t.Fatal("a refused reload replaced the rules")
	}
	if v := evaluate(); v.Initial == nil || v.Initial.PolicyHash != old.Hash {
		t.Fatalf("after a refused reload: %+v, want the old rules deciding", v)
	}
	writeFile(t, path, "rules:\n  - {name: ls, match: 'request.tool == \"ls\"', action: deny}\n")
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := evaluate(); v.Initial == nil || v.Initial.Status != "denied" || v.Initial.PolicyHash == old.Hash {
		t.Fatalf("after a reload: %+v, want the new rule deciding", v)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	want := fmt.Sprintf(`
# HELP airlock_policy_reloads_total Policy reloads, by result: ok, or refused because the new file did not compile (the old rules stayed).
# TYPE airlock_policy_reloads_total counter
airlock_policy_reloads_total{result="ok"} 1
airlock_policy_reloads_total{result="refused"} 1
# HELP airlock_policy_rule_matches_total Requests a policy rule decided (its match was true and it is not a shadow), since start, by rule name.
# TYPE airlock_policy_rule_matches_total counter
airlock_policy_rule_matches_total{rule="ls"} 3
# HELP airlock_policy_info The policy file in force: its SHA-256 and how many rules it has.
# TYPE airlock_policy_info gauge
airlock_policy_info{sha256=%q} 1
`, e.Current().Hash)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"airlock_policy_reloads_total", "airlock_policy_rule_matches_total", "airlock_policy_info"); err != nil {
		t.Fatal(err)
	}
}

// Watch reloads on SIGHUP and when the file changes.
func TestWatch(t *testing.T) {
	t.Parallel()
	e, path, reloads := newEngine(t, allowLs)
	hup := make(chan os.Signal, 1)
	go e.Watch(t.Context(), time.Hour, hup)
	writeFile(t, path, "rules: []\n")
	hup <- syscall.SIGHUP
	if err := <-reloads; err != nil {
		t.Fatal(err)
	}
	if n := len(e.Current().Rules()); n != 0 {
		t.Fatalf("after SIGHUP: %d rules, want 0", n)
	}

	e2, path2, reloads2 := newEngine(t, allowLs)
	go e2.Watch(t.Context(), time.Millisecond, nil)
	writeFile(t, path2, "rules: [{name: a, match: 'false', action: deny}, {name: b, match: 'true', action: ask}]\n")
	if err := <-reloads2; err != nil {
		t.Fatal(err)
	}
	if n := len(e2.Current().Rules()); n != 2 {
		t.Fatalf("after a change: %d rules, want 2", n)
	}
	writeFile(t, path2, "rules: [{name: a, match: 'nope', action: deny}]\n")
	if err := <-reloads2; err == nil {
		t.Fatal("a bad file was accepted at reload")
	}
	if n := len(e2.Current().Rules()); n != 2 {
		t.Fatalf("after a bad change: %d rules, want the 2 in force", n)
	}
}

// BenchmarkDecide100 evaluates 100 compiled rules, none of which matches,
// against a typical request: the cost a policy adds to every create.
func BenchmarkDecide100(b *testing.B) {
	var src strings.Builder
	src.WriteString("rules:\n")
	for i := range 100 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&src, "  - {name: r%d, match: 'request.tool in [\"t%d\", \"u%d\"]', action: allow}\n", i, i, i)
		case 1:
			fmt.Fprintf(&src, "  - {name: r%d, match: 'request.tool == \"shell\" && request.arguments.command.contains(\"rm -rf %d\")', action: deny}\n", i, i)
		case 2:
			fmt.Fprintf(&src, "  - {name: r%d, match: 'agent.principal == \"p%d\" && request.kind == \"tool_call\"', action: allow}\n", i, i)
		default:
			fmt.Fprintf(&src, "  - {name: r%d, match: 'request.tool == \"refund\" && request.arguments.amount < %d', action: allow}\n", i, i)
		}
	}
	s, err := Compile([]byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	in := toolCall("shell", `{"command":"ls -la /srv/app","cwd":"/srv/app","env":{"CI":"1"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if out := s.Decide(b.Context(), in); out.Action != ActionAsk || out.Rule != "" {
			b.Fatalf("outcome %+v", out)
		}
	}
}

// TestDocumentsRead checks which of a request's JSON documents a rule may
// read (request is a typed object, so a field is named or the whole is
// used), and that a set decodes what its rules read: each rule below
// matches only if it saw the arguments or the context.
func TestDocumentsRead(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]documents{
		`request.tool == "shell"`:                                              {},
		`request.arguments.command.contains("rm")`:                             {arguments: true},
		`has(request.context.cwd)`:                                             {context: true},
		`request.arguments.exists(k, k == "x") && request.kind == "tool_call"`: {arguments: true},
		`[request].size() == 1`:                                                {arguments: true, context: true},
		`[1].exists(request, request > 0)`:                                     {arguments: true, context: true},
		`agent.name == "ci bot" && instance.name == "laptop"`:                  {},
	} {
		c, err := compile(Rule{Match: expr})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if c.reads != want {
			t.Errorf("%s reads %+v, want %+v", expr, c.reads, want)
		}
	}

	in := toolCall("shell", `{"command":"ls"}`)
	in.Request.Context = json.RawMessage(`{"cwd":"/srv"}`)
	for _, match := range []string{
		`request.arguments.command == "ls"`,
		`request.context.cwd == "/srv"`,
		`request.tool == "shell" && request.arguments.command == "ls"`,
	} {
		s, err := Compile([]byte("rules:\n  - {name: r, match: '" + match + "', action: deny}\n"))
		if err != nil {
			t.Fatalf("%s: %v", match, err)
		}
		if out := s.Decide(t.Context(), in); out.Rule != "r" || out.Action != ActionDeny {
			t.Errorf("%s: outcome %+v, want rule r to deny", match, out)
		}
	}
}
