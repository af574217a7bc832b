package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func mustCompile(t testing.TB, src string) *Set {
	t.Helper()
	s, err := Compile([]byte(src))
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, src)
	}
	return s
}

func toolCall(tool, args string) airlock.PolicyInput {
	return airlock.PolicyInput{
		Request: airlock.Request{ID: "apr_1", Kind: airlock.KindToolCall, Tool: tool, Arguments: json.RawMessage(args)},
		Window:  15 * time.Minute,
		Agent:   airlock.Token{ID: "tok_a", Name: "ci bot", Principal: "alice", Scopes: []string{"work:write"}},
		Instance: func(context.Context) (airlock.Instance, error) {
			return airlock.Instance{ID: "ins_1", Name: "laptop", Metadata: json.RawMessage(`{"env":"prod"}`)}, nil
		},
	}
}

// The worked example of docs/policy.md, as it is written there.
const docsExample = `
rules:
  - name: read-only tools
    match: request.tool in ["list_files", "read_file"]
    action: allow
    valid_for: 2m
  - name: no recursive deletes
    match: request.tool == "shell" && request.arguments.command.contains("rm -rf")
    action: deny
    note: Recursive deletes are never allowed.
  - name: small refunds
    match: request.tool == "refund" && request.arguments.currency == "GBP" && request.arguments.amount < 50
    action: allow
  - name: production deploys wait less
    match: request.tool == "deploy" && instance.metadata.env == "prod"
    action: ask
    timeout: 5m
`

func TestDecide(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, docsExample)
	question := toolCall("read_file", `{}`)
	question.Request.Kind, question.Request.Question = airlock.KindAgentRequest, &airlock.Question{}
	command := toolCall("read_file", `{}`)
	command.Request.Proposal = &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{Method: "read_file", Input: json.RawMessage(`{}`)}}
	for _, tc := range []struct {
		name       string
		in         airlock.PolicyInput
		rule       string
		action     Action
		status     airlock.State // of the decision at creation; "" for none
		validity   time.Duration
		window     time.Duration
		whyContain string
	}{
		{"a read-only tool is allowed for 2m", toolCall("read_file", `{"path":"a"}`), "read-only tools", ActionAllow, airlock.StateApproved, 2 * time.Minute, 0, ""},
		{"rm -rf is denied", toolCall("shell", `{"command":"rm -rf /"}`), "no recursive deletes", ActionDeny, airlock.StateDenied, 0, 0, ""},
		{"another shell command is asked", toolCall("shell", `{"command":"ls"}`), "", ActionAsk, "", 0, 0, ""},
		{"a refund under 50 GBP is allowed", toolCall("refund", `{"amount":49.99,"currency":"GBP"}`), "small refunds", ActionAllow, airlock.StateApproved, 0, 0, ""},
		{"a refund of 50 GBP is asked", toolCall("refund", `{"amount":50,"currency":"GBP"}`), "", ActionAsk, "", 0, 0, ""},
		{"a production deploy is asked with 5m", toolCall("deploy", `{}`), "production deploys wait less", ActionAsk, "", 0, 5 * time.Minute, ""},
		{"a rule that errors asks", toolCall("shell", `{"cmd":"rm -rf /"}`), "no recursive deletes", ActionAsk, "", 0, 0, "failed to evaluate"},
		{"allow never approves a question", question, "read-only tools", ActionAsk, "", 0, 0, "never applies"},
		{"allow never approves a command", command, "read-only tools", ActionAsk, "", 0, 0, "never applies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := s.Decide(t.Context(), tc.in)
			if out.Rule != tc.rule || out.Action != tc.action || !strings.Contains(out.Why, tc.whyContain) || out.Verdict.Window != tc.window {
				t.Fatalf("outcome = %+v, want rule %q action %s window %s why ~%q", out, tc.rule, tc.action, tc.window, tc.whyContain)
			}
			d := out.Verdict.Initial
			switch {
			case tc.status == "" && d != nil:
				t.Fatalf("decided %+v at creation, want asked", d)
			case tc.status != "" && (d == nil || d.Status != tc.status || d.Validity != tc.validity ||
				d.DecidedBy != "policy:"+tc.rule || d.PolicyHash != s.Hash):
				t.Fatalf("decision = %+v, want %s by policy:%s valid %s with hash %s", d, tc.status, tc.rule, tc.validity, s.Hash)
			}
		})
	}
}

func TestShadow(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `
rules:
  - name: try deny shell
    match: request.tool == "shell"
    action: deny
    shadow: true
  - name: try broken
    match: request.arguments.nope == 1
    action: allow
    shadow: true
  - name: shell asks
    match: request.tool == "shell"
    action: ask
`)
	out := s.Decide(t.Context(), toolCall("shell", `{}`))
	if out.Rule != "shell asks" || out.Action != ActionAsk || out.Verdict.Initial != nil ||
		len(out.Shadowed) != 1 || out.Shadowed[0] != "try deny shell" || len(out.Errors) != 1 {
		t.Fatalf("outcome = %+v, want the shadow recorded, its error passed over, and the ask rule deciding", out)
	}
	// Deciding counts nothing until the outcome is counted (the engine
	// counts it once the provider stored the request).
	if got := s.rules[0].stats.shadowMatched.Load() + s.rules[1].stats.errors.Load() + s.rules[2].stats.matched.Load(); got != 0 {
		t.Fatalf("%d counted before the outcome was, want none", got)
	}
	out.count()
	if got := s.rules[0].stats.shadowMatched.Load(); got != 1 {
		t.Fatalf("shadow matches = %d, want 1", got)
	}
	if got := s.rules[1].stats.errors.Load(); got != 1 {
		t.Fatalf("errors = %d, want 1", got)
	}
	if got := s.rules[2].stats.matched.Load(); got != 1 {
		t.Fatalf("matches of the rule that decided = %d, want 1", got)
	}
}

func TestInstanceReadOnlyWhenUsed(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `
rules:
  - name: tool
    match: request.tool == "x"
    action: deny
  - name: inst
    match: instance.name == "laptop" && instance.name != ""
    action: allow
`)
	reads := 0
	in := toolCall("x", `{}`)
	in.Instance = func(context.Context) (airlock.Instance, error) { reads++; return airlock.Instance{Name: "laptop"}, nil }
	s.Decide(t.Context(), in)
	if reads != 0 {
		t.Fatalf("instance read %d times by rules that do not use it", reads)
	}
	in.Request.Tool = "y"
	if out := s.Decide(t.Context(), in); out.Action != ActionAllow || reads != 1 {
		t.Fatalf("outcome %+v after %d reads, want allow after one read", out, reads)
	}
	in.Instance = func(context.Context) (airlock.Instance, error) { return airlock.Instance{}, errors.New("store down") }
	if out := s.Decide(t.Context(), in); out.Action != ActionAsk || out.Rule != "inst" {
		t.Fatalf("outcome with the store down = %+v, want ask by inst", out)
	}
}

// Bad files are refused with a message that names the rule and where it
// is.
func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	bomb := "rules:\n  - &a {name: x, match: 'true', action: ask}\n  - *a\n"
	deep := "rules:\n  - name: deep\n    match: 'true'\n    action: ask\n    note: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n"
	many := "rules:\n" + strings.Repeat("  - {name: r, match: 'true', action: ask}\n", MaxRules+1)
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"not YAML", "rules: [", []string{"not valid YAML"}},
		{"empty", "", []string{"empty"}},
		{"an anchor and alias", bomb, []string{"anchors and aliases", "line 2"}},
		{"too deep", deep, []string{"nested more than"}},
		{"too many rules", many, []string{"at most 1000"}},
		{"too large", "rules: []\n#" + strings.Repeat("x", MaxFileBytes), []string{"at most"}},
		{"unknown top-level key", "rule: []", []string{`unknown key "rule"`, "line 1"}},
		{"unknown rule key", "rules:\n  - name: a\n    match: 'true'\n    action: ask\n    acton: deny\n", []string{`rule "a"`, `unknown key "acton"`, "line 5"}},
		{"duplicate key", "rules:\n  - name: a\n    name: b\n    match: 'true'\n    action: ask\n", []string{`appears twice`, "line 3"}},
		{"duplicate rule names", "rules:\n  - {name: a, match: 'true', action: ask}\n  - {name: a, match: 'false', action: ask}\n", []string{`rule "a" (rule 2, line 3`, "already used by rule 1"}},
		{"no match", "rules:\n  - {name: a, action: ask}\n", []string{`rule "a"`, "needs a match"}},
		{"bad action", "rules:\n  - {name: a, match: 'true', action: maybe}\n", []string{`action must be allow, deny or ask`}},
		{"does not compile", "rules:\n  - {name: ok, match: 'true', action: ask}\n  - name: bad\n    match: request.tol == 'x'\n    action: deny\n", []string{`rule "bad" (rule 2, line 3, column 5)`, "undefined field 'tol'"}},
		{"wrong types", "rules:\n  - {name: a, match: 'request.tool > 4', action: deny}\n", []string{`rule "a"`, "no matching overload"}},
		{"not boolean", "rules:\n  - {name: a, match: 'request.tool', action: deny}\n", []string{`rule "a"`, "must be a boolean expression, not string"}},
		{"dyn, not boolean", "rules:\n  - {name: a, match: 'request.arguments.x', action: deny}\n", []string{"must be a boolean expression"}},
		{"over the cost limit", "rules:\n  - {name: a, match: 'request.arguments.all(k, request.arguments.all(j, request.title.contains(k + j)))', action: deny}\n", []string{`rule "a"`, "over the limit"}},
		{"valid_for on deny", "rules:\n  - {name: a, match: 'true', action: deny, valid_for: 2m}\n", []string{"valid_for applies to allow only"}},
		{"timeout on allow", "rules:\n  - {name: a, match: 'true', action: allow, timeout: 2m}\n", []string{"timeout applies to ask only"}},
		{"bad duration", "rules:\n  - {name: a, match: 'true', action: allow, valid_for: soon}\n", []string{"valid_for"}},
		{"reviewers naming an unlisted group", "rules:\n  - {name: a, match: 'true', action: ask, reviewers: [bob]}\n", []string{`rule "a"`, `names group "bob"`, "does not list"}},
		{"approvals larger than the group", "groups: {payments: [ada, grace]}\nrules:\n  - {name: a, match: 'true', action: ask, reviewers: payments, approvals: 3}\n", []string{`rule "a"`, "approvals is 3, but its groups (payments) have 2 members"}},
		{"approvals over the limit", "rules:\n  - {name: a, match: 'true', action: ask, approvals: 21}\n", []string{"from 1 to 20"}},
		{"approvals of zero", "rules:\n  - {name: a, match: 'true', action: ask, approvals: 0}\n", []string{"from 1 to 20"}},
		{"reviewers on allow", "groups: {payments: [ada]}\nrules:\n  - {name: a, match: 'true', action: allow, reviewers: payments}\n", []string{"reviewers applies to ask only"}},
		{"approvals on deny", "rules:\n  - {name: a, match: 'true', action: deny, approvals: 2}\n", []string{"approvals applies to ask only"}},
		{"a group name with a control character", "groups: {\"pay\\x1bments\": [ada]}\nrules: []\n", []string{"has a control"}},
		{"a group name too long", "groups: {" + strings.Repeat("g", 101) + ": [ada]}\nrules: []\n", []string{"at most 100"}},
		{"a principal listed twice", "groups: {payments: [ada, ada]}\nrules: []\n", []string{`lists "ada" twice`}},
		{"a group that is not a list", "groups: {payments: ada}\nrules: []\n", []string{"must be a list of principals"}},
		{"escalate_to without escalate_after", "groups: {payments: [], sre: []}\nrules:\n  - {name: a, match: 'true', action: ask, reviewers: payments, escalate_to: sre}\n", []string{"go together"}},
		{"escalation without reviewers", "groups: {sre: []}\nrules:\n  - {name: a, match: 'true', action: ask, escalate_to: sre, escalate_after: 10m}\n", []string{"set reviewers too"}},
		{"escalation to an unlisted group", "groups: {payments: []}\nrules:\n  - {name: a, match: 'true', action: ask, reviewers: payments, escalate_to: sre, escalate_after: 10m}\n", []string{`escalate_to names group "sre"`}},
		{"escalation to a group already deciding", "groups: {payments: []}\nrules:\n  - {name: a, match: 'true', action: ask, reviewers: payments, escalate_to: payments, escalate_after: 10m}\n", []string{"already has"}},
		{"escalation too soon", "groups: {payments: [], sre: []}\nrules:\n  - {name: a, match: 'true', action: ask, reviewers: payments, escalate_to: sre, escalate_after: 10ms}\n", []string{"at least 1s"}},
		{"a reviewer group named twice", "groups: {payments: []}\nrules:\n  - {name: a, match: 'true', action: ask, reviewers: [payments, payments]}\n", []string{"twice"}},
		{"constructing a request", "rules:\n  - {name: a, match: 'airlock.Request{tool: \"x\"}.tool == \"x\"', action: allow}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile([]byte(tc.src))
			if err == nil {
				if tc.want == nil {
					return // refused or harmless; constructing is checked below
				}
				t.Fatalf("Compile accepted it, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Constructing one of the request's types in an expression yields an
// error at evaluation, which asks.
func TestConstructingAsks(t *testing.T) {
	t.Parallel()
	s, err := Compile([]byte("rules:\n  - {name: a, match: 'airlock.Request{tool: \"x\"}.tool == \"x\"', action: allow}\n"))
	if err != nil {
		return // refused at load: as good
	}
	if out := s.Decide(t.Context(), toolCall("x", `{}`)); out.Action != ActionAsk {
		t.Fatalf("outcome = %+v, want ask", out)
	}
}

func TestEmptyRulesAsk(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"rules: []", "rules:"} {
		s := mustCompile(t, src)
		if out := s.Decide(t.Context(), toolCall("x", `{}`)); out.Action != ActionAsk || out.Verdict.Initial != nil {
			t.Fatalf("%q: outcome %+v, want ask", src, out)
		}
	}
}

// A rule still running when the evaluation's time is up asks.
func TestEvalTimeoutAsks(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "rules:\n  - {name: a, match: 'request.arguments.l.all(x, x == 1)', action: allow}\n")
	long := toolCall("x", `{"l":[`+strings.Repeat("1,", 10_000)+`1]}`)
	s.evalTimeout = time.Hour // in time, however loaded the machine
	if out := s.Decide(t.Context(), long); out.Action != ActionAllow {
		t.Fatalf("in time: outcome = %+v, want allow", out)
	}
	s.evalTimeout = time.Nanosecond // over before the first check
	out := s.Decide(t.Context(), long)
	if out.Action != ActionAsk || out.Rule != "a" || len(out.Errors) != 1 {
		t.Fatalf("outcome = %+v, want ask after the time ran out", out)
	}
}

// The worked example of docs/policy.md compiles and does what the page
// says.
func TestDocsExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "```yaml\n")
	src, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("docs/policy.md has no yaml block")
	}
	s := mustCompile(t, src)
	prod := toolCall("deploy", `{}`)
	for _, tc := range []struct {
		in     airlock.PolicyInput
		action Action
	}{
		{toolCall("read_file", `{"path":"a"}`), ActionAllow},
		{toolCall("shell", `{"command":"rm -rf /tmp/build"}`), ActionDeny},
		{toolCall("refund", `{"amount":20,"currency":"GBP"}`), ActionAllow},
		{toolCall("refund", `{"amount":20,"currency":"EUR"}`), ActionAsk},
		{prod, ActionAsk},
		{toolCall("write_file", `{}`), ActionAsk},
	} {
		if out := s.Decide(t.Context(), tc.in); out.Action != tc.action {
			t.Errorf("%s %s: %+v, want %s", tc.in.Request.Tool, tc.in.Request.Arguments, out, tc.action)
		}
	}
	if out := s.Decide(t.Context(), prod); out.Verdict.Window != 10*time.Minute {
		t.Errorf("production deploy: window %s, want 10m", out.Verdict.Window)
	}
}

// Groups come from the file: an ask rule's reviewers and approvals reach
// the verdict, and the engine tells each principal's groups.
func TestGroupsAndRouting(t *testing.T) {
	t.Parallel()
	src := `groups:
  payments: [ada, grace, linus]
  sre: [grace]
  oncall: []
rules:
  - {name: pay, match: 'request.tool == "pay"', action: ask, reviewers: payments, approvals: 2}
  - {name: page, match: 'request.tool == "page"', action: ask, reviewers: [sre, oncall], approvals: 5}
`
	s, err := Compile([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.GroupsOf("grace"); !slices.Equal(got, []string{"payments", "sre"}) {
		t.Fatalf("GroupsOf(grace) = %q, want [payments sre]", got)
	}
	if got := s.GroupsOf("nobody"); got != nil {
		t.Fatalf("GroupsOf(nobody) = %q, want none", got)
	}
	for tool, want := range map[string]struct {
		reviewers []string
		approvals int
	}{
		"pay":  {[]string{"payments"}, 2},
		"page": {[]string{"sre", "oncall"}, 5}, // oncall's members come from sign-in: no size check
		"ls":   {nil, 0},
	} {
		out := s.Decide(t.Context(), airlock.PolicyInput{Request: airlock.Request{Tool: tool}})
		if out.Action != ActionAsk || !slices.Equal(out.Verdict.Reviewers, want.reviewers) || out.Verdict.Approvals != want.approvals {
			t.Errorf("%s: %s for %q needing %d; want ask for %q needing %d", tool, out.Action, out.Verdict.Reviewers, out.Verdict.Approvals, want.reviewers, want.approvals)
		}
	}
}
