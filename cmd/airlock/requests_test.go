package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/airlockhq/airlock/approvaltoken"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit"
)

// cliServer is a real `airlock serve` in-process, with an admin, an agent
// and a reviewer token, for the CLI's end-to-end tests.
type cliServer struct {
	*running
	api                    *api
	admin, agent, reviewer string
	instance               string
}

func startCLIServer(t *testing.T) *cliServer {
	t.Helper()
	srv, c := serveNew(t, "--min-timeout", "10ms")
	s := &cliServer{running: srv, api: c, admin: testAdmin}
	s.agent = c.mintToken(testAdmin, "cli agent", "agent")
	s.reviewer = c.mintToken(testAdmin, "cli reviewer", "reviewer")
	s.instance = c.call("POST", "/v1/instances", s.agent, `{"name":"laptop"}`).want(t, 201, "register").Str("id")
	return s
}

// create makes a pending tool call and returns its ID.
func (s *cliServer) create(t *testing.T, body string) string {
	t.Helper()
	return s.api.call("POST", "/v1/instances/"+s.instance+"/approval-requests", s.agent, body,
		"Idempotency-Key", fmt.Sprint(time.Now().UnixNano())).want(t, 201, "create").Str("id")
}

// cliRun is one finished CLI run.
type cliRun struct {
	exit           int
	stdout, stderr string
}

// cli runs `airlock args...` in-process with AIRLOCK_URL set to the server
// and AIRLOCK_TOKEN to token (when not empty).
func (s *cliServer) cli(t *testing.T, token string, args ...string) cliRun {
	t.Helper()
	env := map[string]string{"AIRLOCK_URL": s.url}
	if token != "" {
		env["AIRLOCK_TOKEN"] = token
	}
	return s.cliEnv(t, env, args...)
}

// cliEnv runs `airlock args...` in-process with the environment env.
func (s *cliServer) cliEnv(t *testing.T, env map[string]string, args ...string) cliRun {
	t.Helper()
	var stdout, stderr bytes.Buffer
	app := &App{Stdout: &stdout, Stderr: &stderr, LookupEnv: mapEnv(env)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := app.Run(ctx, args)
	return cliRun{exit: exitCode(app, err), stdout: stdout.String(), stderr: stderr.String()}
}

func (r cliRun) want(t *testing.T, exit int, what string) cliRun {
	t.Helper()
	if r.exit != exit {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.exit, exit, r.stdout, r.stderr)
	}
	return r
}

// TestCLIRequests: list, show, approve and deny against a real server, as
// tables and as JSON, with the documented exit codes.
func TestCLIRequests(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	args := `{"amount": 4900,  "to":"cus_1"}`
	id := s.create(t, `{"tool":"issue_refund","arguments":`+args+`,"timeout":"30m","agent_reasoning":"charged twice\u001b[2J\u001b[31m trust me\u202e"}`)

	out := s.cli(t, s.reviewer, "requests", "list").want(t, 0, "list").stdout
	if !strings.Contains(out, id) || !strings.Contains(out, "issue_refund") || !strings.HasPrefix(out, "ID") {
		t.Fatalf("list:\n%s", out)
	}
	var page struct {
		Items []struct {
			ID    string          `json:"id"`
			State string          `json:"state"`
			Args  json.RawMessage `json:"arguments"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(s.cli(t, s.reviewer, "requests", "list", "--json").want(t, 0, "list --json").stdout), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ID != id || page.Items[0].State != "pending" {
		t.Fatalf("list --json: %+v", page)
	}
	if out := s.cli(t, s.reviewer, "requests", "list", "--state", "denied").want(t, 0, "list denied").stdout; !strings.Contains(out, "No denied requests") {
		t.Fatalf("list --state denied:\n%s", out)
	}

	show := s.cli(t, s.reviewer, "requests", "show", id).want(t, 0, "show").stdout
	digest, _ := approvaltoken.ArgsDigest([]byte(args))
	for _, want := range []string{"The agent's claim (unverified):", "Instance:     laptop (" + s.instance + ")", "Agent:        cli agent", fmt.Sprintf("%d bytes; digest %s", len(args), digest), `"amount": 4900`, "⟨U+001B⟩[2J", "⟨U+202E⟩", "PENDING"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if strings.ContainsAny(show, "\x1b\u202e") {
		t.Error("show printed an escape or bidi character raw")
	}

	s.cli(t, s.agent, "requests", "approve", id, "--yes").want(t, exitAuth, "an agent approving")
	s.cli(t, "airlock_wrong", "requests", "list").want(t, exitAuth, "an unknown token")
	s.cli(t, s.reviewer, "requests", "show", "apr_nope").want(t, exitNotFound, "show an unknown request")
	approved := s.cli(t, s.reviewer, "requests", "approve", id, "--valid-for", "15m", "--note", "once", "--yes").want(t, 0, "approve").stdout
	if !strings.Contains(approved, "approved "+id+"; the call may start until") {
		t.Fatalf("approve said %q", approved)
	}
	again := s.cli(t, s.reviewer, "requests", "deny", id, "--yes").want(t, exitConflict, "deny an approved request")
	if !strings.Contains(again.stderr, "not_pending") || !strings.Contains(again.stderr, "approved") {
		t.Fatalf("the conflict does not say what holds: %s", again.stderr)
	}
	got := s.api.call("GET", "/v1/approval-requests/"+id, s.reviewer, "").want(t, 200, "read")
	if got.Str("decision.note") != "once" {
		t.Fatalf("note %q", got.Str("decision.note"))
	}
	// The decider by name, the token ID beside it.
	if show := s.cli(t, s.reviewer, "requests", "show", id).want(t, 0, "show decided").stdout; !strings.Contains(show, "by cli reviewer (tok_") {
		t.Errorf("show does not name the decider:\n%s", show)
	}

	id2 := s.create(t, `{"tool":"rm","arguments":{"path":"/"}}`)
	var denied struct {
		State    string `json:"state"`
		Decision struct {
			Note string `json:"note"`
		} `json:"decision"`
	}
	// Flags may follow the ID.
	if err := json.Unmarshal([]byte(s.cli(t, s.reviewer, "requests", "deny", id2, "--note", "never on /", "--json", "--yes").want(t, 0, "deny --json").stdout), &denied); err != nil {
		t.Fatal(err)
	}
	if denied.State != "denied" || denied.Decision.Note != "never on /" {
		t.Fatalf("deny --json: %+v", denied)
	}
}

// TestCLIUsage: mistakes in the command line are exit 2 and say what to do.
func TestCLIUsage(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	for _, tc := range []struct {
		token string
		args  []string
		says  string
	}{
		{s.reviewer, []string{"requests"}, "requests needs a subcommand"},
		{s.reviewer, []string{"requests", "frob"}, `unknown subcommand "frob"`},
		{s.reviewer, []string{"requests", "show"}, "requests show needs <id>"},
		{s.reviewer, []string{"requests", "show", "a", "b"}, "requests show needs <id>, got 2"},
		{s.reviewer, []string{"requests", "list", "extra"}, "takes no arguments"},
		{"", []string{"requests", "list"}, "no token: set AIRLOCK_TOKEN"},
		{s.reviewer, []string{"requests", "list", "--nope"}, "flag provided but not defined"},
		{s.admin, []string{"tokens", "create", "--name", "x"}, "needs --name and --role"},
		{s.reviewer, []string{"instances", "list", "--url", "ftp://x"}, "--url"},
	} {
		r := s.cli(t, tc.token, tc.args...)
		if r.exit != exitUsage || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", tc.args, r.exit, r.stderr, tc.says)
		}
	}
	for _, args := range [][]string{{"requests", "-h"}, {"requests", "approve", "-h"}, {"help", "tokens"}, {"help", "instances"}} {
		r := s.cli(t, s.reviewer, args...)
		if r.exit != 0 || !strings.Contains(r.stdout+r.stderr, "Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 conflict") {
			t.Errorf("%v: exit %d, output %q", args, r.exit, r.stdout+r.stderr)
		}
	}
}

// TestCLITokensAndInstances: an admin mints, lists and revokes tokens (a
// revoked token stops at once); instances are listed with their pending
// counts and deleted with their pending requests.
func TestCLITokensAndInstances(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	var created struct {
		ID     string   `json:"id"`
		Secret string   `json:"secret"`
		Role   string   `json:"role"`
		Scopes []string `json:"scopes"`
	}
	out := s.cli(t, s.admin, "tokens", "create", "--name", "deploy bot", "--role", "agent", "--scope", "work:write", "--json").want(t, 0, "create token").stdout
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Secret, "airlock_") || created.Role != "agent" || len(created.Scopes) != 1 {
		t.Fatalf("tokens create --json: %s (%v)", out, err)
	}
	text := s.cli(t, s.admin, "tokens", "create", "--name", "second", "--role", "reviewer").want(t, 0, "create token").stdout
	if !regexp.MustCompile(`Secret \(shown once; only its hash is stored\):\nairlock_\S+\n`).MatchString(text) {
		t.Fatalf("tokens create:\n%s", text)
	}
	list := s.cli(t, s.admin, "tokens", "list").want(t, 0, "list tokens").stdout
	if !strings.Contains(list, created.ID) || !strings.Contains(list, "deploy bot") || strings.Contains(list, created.Secret) {
		t.Fatalf("tokens list:\n%s", list)
	}
	s.cli(t, s.reviewer, "tokens", "list").want(t, exitAuth, "a reviewer listing tokens")
	s.cli(t, s.admin, "tokens", "create", "--name", "x", "--role", "boss").want(t, 1, "an invalid role")
	s.cli(t, created.Secret, "instances", "list").want(t, 0, "the new token works")
	s.cli(t, s.admin, "tokens", "revoke", created.ID).want(t, 0, "revoke")
	s.cli(t, created.Secret, "instances", "list").want(t, exitAuth, "a revoked token")
	s.cli(t, s.admin, "tokens", "revoke", "tok_nope").want(t, exitNotFound, "revoke an unknown token")

	s.create(t, `{"tool":"ls","arguments":{}}`)
	s.create(t, `{"tool":"ls","arguments":{"a":1}}`)
	out = s.cli(t, s.reviewer, "instances", "list").want(t, 0, "instances list").stdout
	if !regexp.MustCompile(regexp.QuoteMeta(s.instance) + `\s+laptop\s+2\s`).MatchString(out) {
		t.Fatalf("instances list:\n%s", out)
	}
	var insts struct {
		Items []struct {
			ID      string `json:"id"`
			Pending int    `json:"pending_count"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(s.cli(t, s.agent, "instances", "list", "--json").want(t, 0, "instances list --json").stdout), &insts); err != nil || len(insts.Items) != 1 || insts.Items[0].Pending != 2 {
		t.Fatalf("instances list --json: %+v %v", insts, err)
	}
	s.cli(t, s.reviewer, "instances", "delete", s.instance).want(t, exitAuth, "a reviewer deleting")
	if out := s.cli(t, s.admin, "instances", "delete", s.instance).want(t, 0, "delete").stdout; !strings.Contains(out, "cancelled 2 pending request(s)") {
		t.Fatalf("delete said %q", out)
	}
	s.cli(t, s.admin, "instances", "delete", "ins_nope").want(t, exitNotFound, "delete an unknown instance")
	if out := s.cli(t, s.reviewer, "requests", "list", "--state", "cancelled", "--json").stdout; strings.Count(out, `"state": "cancelled"`) != 2 {
		t.Fatalf("the deleted instance's requests are not cancelled:\n%s", out)
	}
}

// TestCLIWatch: --json streams new pending requests as JSON lines; with a
// reader of answers (--prompt, as on a terminal) each request is shown and
// decided as it comes: one pending before the watch, then new ones. Not
// parallel: it replaces watchInput.
func TestCLIWatch(t *testing.T) {
	s := startCLIServer(t)
	before := s.create(t, `{"tool":"deploy","arguments":{"service":"api"}}`)

	// --json
	out := testkit.NewOutput()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	app := &App{Stdout: out, Stderr: io.Discard, LookupEnv: mapEnv(map[string]string{"AIRLOCK_URL": s.url, "AIRLOCK_TOKEN": s.reviewer})}
	go func() { done <- app.Run(ctx, []string{"requests", "watch", "--json"}) }()
	out.WaitFor(t, regexp.MustCompile(`"id":"`+before+`"`), nil)
	fresh := s.create(t, `{"tool":"scale","arguments":{"replicas":3}}`)
	out.WaitFor(t, regexp.MustCompile(`"id":"`+fresh+`"`), nil)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch --json ended with %v", err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("not a JSON line: %q", line)
		}
	}

	// Interactive.
	answers, feed := io.Pipe()
	defer feed.Close()
	saved := watchInput
	watchInput = func() (io.Reader, bool) { return answers, false }
	defer func() { watchInput = saved }()
	out = testkit.NewOutput()
	app = &App{Stdout: out, Stderr: io.Discard, LookupEnv: mapEnv(map[string]string{"AIRLOCK_URL": s.url, "AIRLOCK_TOKEN": s.reviewer})}
	done = make(chan error, 1)
	go func() { done <- app.Run(context.Background(), []string{"requests", "watch", "--prompt"}) }()
	prompt := regexp.MustCompile(`Decide \[a\]pprove, \[d\]eny, \[s\]kip, \[q\]uit: `)
	waitPrompts := func(n int) {
		t.Helper()
		out.WaitFor(t, regexp.MustCompile(fmt.Sprintf(`(?s)(?:.*?%s){%d}`, prompt.String(), n)), nil)
	}
	waitPrompts(1)
	if !strings.Contains(out.String(), before) {
		t.Fatalf("the first prompt is not for the request pending before the watch:\n%s", out)
	}
	// Approving asks how long the call may start and for a note, then
	// confirms with all of it restated; only "y" records.
	fmt.Fprintln(feed, "a")
	out.WaitFor(t, regexp.MustCompile(`May start for how long \(such as 15m\) \[the server's default\]: $`), nil)
	fmt.Fprintln(feed, "10m")
	out.WaitFor(t, regexp.MustCompile(`Note for the agent \(optional\): $`), nil)
	fmt.Fprintln(feed, "ship it")
	out.WaitFor(t, regexp.MustCompile(`Approve deploy, which may start for 10m, with the note “ship it”\.\nRecord this\? \[y/N\]: $`), nil)
	fmt.Fprintln(feed, "y")
	out.WaitFor(t, regexp.MustCompile(`approved `+before), nil)
	// fresh is the next one; skip it, then deny a new one with a note.
	waitPrompts(2)
	fmt.Fprintln(feed, "s")
	third := s.create(t, `{"tool":"drop_table","arguments":{"table":"users"}}`)
	waitPrompts(3)
	if !strings.Contains(out.String(), third) {
		t.Fatalf("the third prompt is not for the new request:\n%s", out)
	}
	fmt.Fprintln(feed, "d")
	out.WaitFor(t, regexp.MustCompile(`Note for the agent \(optional\): $`), nil)
	fmt.Fprintln(feed, "no dropping users")
	out.WaitFor(t, regexp.MustCompile(`Record this\? \[y/N\]: $`), nil)
	fmt.Fprintln(feed, "y")
	out.WaitFor(t, regexp.MustCompile(`denied `+third), nil)

	// Declining the confirmation records nothing and asks again.
	fourth := s.create(t, `{"tool":"wire_money","arguments":{"amount":100}}`)
	waitPrompts(4)
	fmt.Fprintln(feed, "d")
	out.WaitFor(t, regexp.MustCompile(`Note for the agent \(optional\): $`), nil)
	fmt.Fprintln(feed, "")
	out.WaitFor(t, regexp.MustCompile(`Record this\? \[y/N\]: $`), nil)
	fmt.Fprintln(feed, "n")
	out.WaitFor(t, regexp.MustCompile(`Nothing recorded\.\n\n→ `+fourth), nil)
	waitPrompts(5)
	// Decided elsewhere while on screen: said at once, with who and the note.
	s.api.call("POST", "/v1/approval-requests/"+fourth+"/decision", s.reviewer, `{"status":"denied","note":"not today"}`).want(t, 200, "decide elsewhere")
	out.WaitFor(t, regexp.MustCompile(fourth+` was denied elsewhere by cli reviewer \(tok_\w+\) at [0-9:]+: “not today”\. Nothing was recorded here\.`), nil)
	if s := s.api.call("GET", "/v1/approval-requests/"+fourth, s.reviewer, "").Str("decision.note"); s != "not today" {
		t.Fatalf("the decision elsewhere was overwritten: note %q", s)
	}
	// q quits even while no request waits.
	fmt.Fprintln(feed, "q")
	if err := <-done; err != nil {
		t.Fatalf("watch ended with %v", err)
	}
	got := s.api.call("GET", "/v1/approval-requests/"+third, s.reviewer, "").want(t, 200, "read")
	if got.Str("state") != "denied" || got.Str("decision.note") != "no dropping users" {
		t.Fatalf("third: %s", got.Raw)
	}
	if s := s.api.call("GET", "/v1/approval-requests/"+fresh, s.reviewer, "").Str("state"); s != "pending" {
		t.Fatalf("the skipped request is %s", s)
	}
}

// TestCLIRequestsList: pending requests come soonest deadline first, with
// their instance's name, and the "More:" hint, run as printed, lists the
// next page with the same filters.
func TestCLIRequestsList(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	late := s.create(t, `{"tool":"late","arguments":{},"timeout":"50m"}`)
	soon := s.create(t, `{"tool":"soon","arguments":{},"timeout":"5m"}`)
	mid := s.create(t, `{"tool":"mid","arguments":{},"timeout":"20m"}`)
	s.cli(t, s.reviewer, "requests", "deny", mid, "--yes").want(t, 0, "deny mid")

	out := s.cli(t, s.reviewer, "requests", "list").want(t, 0, "list").stdout
	if i, j := strings.Index(out, soon), strings.Index(out, late); i < 0 || j < 0 || i > j {
		t.Fatalf("pending is not soonest deadline first (%s before %s):\n%s", soon, late, out)
	}
	if !strings.Contains(out, "laptop") || strings.Contains(out, s.instance) {
		t.Fatalf("the instance is not shown by its name:\n%s", out)
	}

	// Page through every state one at a time, running each hint as printed.
	args := []string{"requests", "list", "--state", "all", "--limit", "1"}
	var seen []string
	for range 5 {
		run := s.cli(t, s.reviewer, args...).want(t, 0, strings.Join(args, " "))
		for _, id := range []string{late, soon, mid} {
			if strings.Contains(run.stdout, id) {
				seen = append(seen, id)
			}
		}
		hint, ok := strings.CutPrefix(strings.TrimSpace(run.stderr), "More: airlock ")
		if !ok {
			break
		}
		if !strings.Contains(hint, "--state all") || !strings.Contains(hint, "--limit 1") || !strings.Contains(hint, "--cursor ") {
			t.Fatalf("the hint drops the flags: %q", run.stderr)
		}
		args = strings.Fields(hint)
	}
	if len(seen) != 3 || seen[0] != mid || seen[1] != soon || seen[2] != late {
		t.Fatalf("paging by the hints listed %v, want every request once, newest first [%s %s %s]", seen, mid, soon, late)
	}
}

// TestPrintRequestWarns: show warns of look-alike letters and says a
// work_move in plain words, as the inbox does.
func TestPrintRequestWarns(t *testing.T) {
	var b strings.Builder
	q := &client.ApprovalRequest{ID: "apr_1", State: "pending", Kind: "tool_call", Tool: "send_money",
		Arguments: json.RawMessage(`{"to":"pаypal.com"}`), CreatedAt: time.Now(), DeadlineAt: time.Now().Add(time.Minute)}
	printRequest(&b, q, nil, time.Now())
	if !strings.Contains(b.String(), "Warning:      “pаypal” mixes Latin and Cyrillic letters") {
		t.Fatalf("no look-alike warning:\n%s", b.String())
	}
	b.Reset()
	q = &client.ApprovalRequest{ID: "apr_2", State: "pending", Kind: "work_change", Tool: "work_move",
		Proposal: &client.Proposal{Mode: "command", Command: &client.Command{Method: "work_move",
			Input: json.RawMessage(`{"itemId":"wi_1","columnKey":"done"}`), Observed: json.RawMessage(`{"fromColumnKey":"doing","itemTitle":"Fix login"}`)}}}
	printRequest(&b, q, []airlock.Column{{Key: "doing", Name: "Doing"}, {Key: "done", Name: "Done", Items: []airlock.WorkItem{{ID: "wi_1", ColumnKey: "done"}}}}, time.Now())
	for _, want := range []string{"Command:      Move item “Fix login” from Doing to Done", "Warning:      The item has moved since the agent asked (it is now in Done)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	q = &client.ApprovalRequest{ID: "apr_3", State: "pending", Kind: "tool_call", Tool: "refund", CreatedAt: time.Now(), DeadlineAt: time.Now().Add(time.Minute),
		Reviewers: []string{"payments"}, Approvals: 2, EscalateTo: []string{"leads"},
		Votes: []client.Vote{{Principal: "ada", Name: "Ada", Status: airlock.StateApproved, Note: "fine", At: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}}}
	printRequest(&b, q, nil, time.Now())
	for _, want := range []string{"For:          payments (only members may decide)", "Escalates:    to leads if still pending",
		"Approvals:    1 of 2 approvals (Ada)", "Vote:         approved by Ada at 2030-01-02T03:04:05Z fine"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, b.String())
		}
	}
}

// TestShowLabelsAgentWords: `requests show` (and the restated line above a
// prompt) label an MCP request's title and description as the agent's
// claim and name the agent, with its session, never the default "mcp".
func TestShowLabelsAgentWords(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		session, who string
	}{{"", "release bot"}, {"ses_1", "release bot (session Release 2.4)"}} {
		q := &client.ApprovalRequest{ID: "apr_1", State: airlock.StatePending, Kind: airlock.KindWorkChange, Title: "Rotate the keys",
			Description: "Security asked for it.", InstanceID: "ins_1", InstanceName: "mcp", CreatedByName: "release bot",
			SessionID: tc.session, CreatedAt: now, DeadlineAt: now.Add(time.Hour)}
		if tc.session != "" {
			q.InstanceID, q.InstanceName = tc.session, "Release 2.4"
		}
		var b bytes.Buffer
		printRequest(&b, q, nil, now)
		out := b.String()
		for _, want := range []string{"The agent's claim (unverified), written by " + tc.who + ":\nTitle:        Rotate the keys\nDescription:  Security asked for it.", "Agent:        release bot"} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
		if got := restate(q, now); !strings.Contains(got, "from "+tc.who+"  deadline") {
			t.Errorf("restated as %q", got)
		}
	}
}

// TestShowPurged: `requests show` of a request whose payloads the
// retention purged says so where the arguments would be, never as if the
// call had none.
func TestShowPurged(t *testing.T) {
	t.Parallel()
	now := time.Now()
	purged := time.Date(2030, 4, 5, 6, 7, 8, 0, time.UTC)
	q := &client.ApprovalRequest{ID: "apr_1", State: airlock.StateDenied, Kind: airlock.KindToolCall, Tool: "refund",
		PurgedAt: &purged, CreatedAt: now, DeadlineAt: now.Add(time.Hour)}
	var b bytes.Buffer
	printRequest(&b, q, nil, now)
	if want := "Tool:         refund\nArguments:    purged on 2030-04-05T06:07:08Z, with the agent's reasoning and the adapter's context (payload retention)\n"; !strings.Contains(b.String(), want) {
		t.Fatalf("show of a purged request lacks %q:\n%s", want, b.String())
	}
}
