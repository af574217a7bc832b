package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/inbox"
)

// The API commands (requests, tokens, instances) talk to a running server
// over its REST API with the Go client. They print tables for people and,
// with --json, the API's own resources for scripts. Their exit codes:
//
//	0 success
//	1 any other failure (network, server error)
//	2 usage: a wrong command, flag or argument
//	3 not found (no such request, token or instance)
//	4 conflict: the request is no longer pending, or the decision cannot apply
//	5 authentication or permission: a missing, unknown, revoked or wrong-role token
const (
	exitNotFound = 3
	exitConflict = 4
	exitAuth     = 5
)

// exitError carries an exit code other than 1 for an error already worded
// for people.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// apiError words an API error for the terminal and picks its exit code.
func apiError(err error) error {
	var ce *client.Error
	code := airlock.ErrorCode(err)
	msg := err.Error()
	if errors.As(err, &ce) {
		msg = ce.Message
		if ce.Code != "" {
			msg += " (" + string(ce.Code) + ")"
		} else {
			msg += fmt.Sprintf(" (HTTP %d)", ce.Status)
		}
	}
	switch code {
	case airlock.CodeNotFound:
		return &exitError{exitNotFound, errors.New(msg)}
	case airlock.CodeNotPending, airlock.CodeDeadlinePassed, airlock.CodeIdempotencyConflict, airlock.CodeNotApproved,
		airlock.CodeApprovalExpired, airlock.CodeAlreadyExecuted, airlock.CodeCommandFailed:
		return &exitError{exitConflict, errors.New(msg)}
	case airlock.CodeUnauthorized, airlock.CodeForbidden:
		return &exitError{exitAuth, errors.New(msg)}
	}
	return errors.New(msg)
}

// remote is what every API command needs: where the server is, the token,
// and the output format.
type remote struct {
	url, token string
	json       bool
	out        io.Writer
}

// apiFlagSet returns the flag set of `airlock <cmd> <sub>`, with --url,
// --token and --json, and a usage that says which read the environment.
func (a *App) apiFlagSet(cmd, sub, synopsis, summary string) (*flag.FlagSet, *remote) {
	r := &remote{out: a.Stdout}
	fs := flag.NewFlagSet(cmd+" "+sub, flag.ContinueOnError)
	fs.SetOutput(a.Stderr)
	fs.StringVar(&r.url, "url", "http://127.0.0.1:8080", "the Airlock server [$AIRLOCK_URL]")
	fs.StringVar(&r.token, "token", "", "your bearer token [$AIRLOCK_TOKEN]; prefer the environment variable, since other users can read command lines")
	fs.BoolVar(&r.json, "json", false, "print JSON (the API's resources) for scripts instead of text for people")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: airlock %s %s %s\n\n%s\n\nFlags:\n", cmd, sub, synopsis, summary)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), exitCodesHelp)
	}
	return fs, r
}

const exitCodesHelp = `
Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 conflict (no longer pending, command failed), 5 auth (token missing, unknown, revoked or not allowed).
`

// parseAPIArgs fills --url and --token from AIRLOCK_URL and AIRLOCK_TOKEN
// (a flag wins), parses flags wherever they stand among the arguments, and
// checks the number of positional arguments (names says what they are).
func (a *App) parseAPIArgs(fs *flag.FlagSet, r *remote, args []string, names ...string) ([]string, error) {
	if v, ok := a.env("AIRLOCK_URL"); ok {
		r.url = v
	}
	if v, ok := a.env("AIRLOCK_TOKEN"); ok {
		r.token = v
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errFlagParse, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != len(names) {
		if len(names) == 0 {
			return nil, usageErrorf("%s takes no arguments, got %q", fs.Name(), pos)
		}
		return nil, usageErrorf("%s needs %s, got %d argument(s)", fs.Name(), strings.Join(names, " "), len(pos))
	}
	if r.token == "" {
		return nil, usageErrorf("no token: set AIRLOCK_TOKEN (or pass --token)")
	}
	return pos, nil
}

// client returns an API client for r.
// idCommand parses `airlock <cmd> <sub> [flags] <id>`, a subcommand of subs
// with only the common flags, and returns the id, the remote and its
// client.
func (a *App) idCommand(cmd string, subs []subcommand, sub string, args []string) (string, *remote, *client.Client, error) {
	syn, sum := subUsage(subs, sub)
	fs, r := a.apiFlagSet(cmd, sub, syn, sum)
	pos, err := a.parseAPIArgs(fs, r, args, "<id>")
	if err != nil {
		return "", nil, nil, err
	}
	c, err := r.client()
	if err != nil {
		return "", nil, nil, err
	}
	return pos[0], r, c, nil
}

func (r *remote) client() (*client.Client, error) {
	c, err := client.New(r.url, r.token, client.WithUserAgent("airlock-cli/"+version), client.WithTimeout(30*time.Second))
	if err != nil {
		return nil, &usageError{msg: "--url: " + err.Error()}
	}
	return c, nil
}

// printJSON writes v as indented JSON, with <, > and & as they are.
func (r *remote) printJSON(v any) error {
	enc := json.NewEncoder(r.out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns.
func table(w io.Writer, header string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

// clip shortens a one-line text for a table cell, after making its hidden
// characters visible.
func clip(s string, n int) string {
	s = inbox.Visible(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// since says how long ago t was, shortly.
func since(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// until says how long until t, shortly.
func until(now, t time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d <= 0:
		return "passed"
	case d < time.Hour:
		return fmt.Sprintf("in %dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("in %dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("in %dd", int(d.Hours()/24))
}

// subcommands runs the subcommand args[0] of cmd, or prints cmd's usage.
type subcommand struct {
	name, synopsis, summary string
	run                     func(ctx context.Context, a *App, args []string) error
}

func runSubcommand(ctx context.Context, a *App, cmd, summary string, subs []subcommand, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: airlock %s <subcommand> [flags] [arguments]\n\n%s\n\nSubcommands:\n", cmd, summary)
		for _, s := range subs {
			fmt.Fprintf(w, "  %-8s %s\n", s.name, s.summary)
		}
		fmt.Fprintf(w, "\nRun `airlock %s <subcommand> -h` for its flags.\n%s", cmd, exitCodesHelp)
	}
	if len(args) == 0 {
		usage(a.Stderr)
		return usageErrorf("%s needs a subcommand", cmd)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(a.Stderr)
		return flag.ErrHelp
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, a, args[1:])
		}
	}
	return usageErrorf("unknown subcommand %q of %s; run `airlock %s -h` for the list", args[0], cmd, cmd)
}

// ---- airlock requests ----

var requestsCommand = command{
	name:    "requests",
	args:    "list|show|approve|deny|watch [flags]",
	summary: "List, show, approve, deny and watch approval requests (reviewers) on a running server.",
	run:     runRequests,
}

func runRequests(ctx context.Context, a *App, args []string) error {
	return runSubcommand(ctx, a, "requests", "Approval requests on a running server, for reviewers.", requestSubcommands, args)
}

// requestSubcommands is filled in init: its functions read it for their
// usage, which a plain initializer would make a cycle.
var requestSubcommands []subcommand

func init() {
	requestSubcommands = []subcommand{
		{"list", "[--state S|all] [--kind K] [--tool T] [--instance ID] [--limit N] [--cursor C]", "list requests (pending by default), newest first", runRequestsList},
		{"show", "<id>", "show one request: what would run, exactly, and the agent's claim apart", runRequestsShow},
		{"approve", "<id> [--valid-for D] [--note N] [--answer A]", "approve a pending request (or answer its question)", runRequestsApprove},
		{"deny", "<id> [--note N]", "deny a pending request, with a note for the agent", runRequestsDeny},
		{"watch", "[--prompt]", "stream new pending requests; on a terminal, decide each one as it comes", runRequestsWatch},
	}
}

// subUsage returns a subcommand's synopsis and summary, for its usage.
func subUsage(subs []subcommand, name string) (string, string) {
	for _, s := range subs {
		if s.name == name {
			return s.synopsis, s.summary
		}
	}
	return "", ""
}

func runRequestsList(ctx context.Context, a *App, args []string) error {
	syn, sum := subUsage(requestSubcommands, "list")
	fs, r := a.apiFlagSet("requests", "list", syn, sum)
	state := fs.String("state", "pending", "pending, approved, denied, expired, cancelled, or all")
	kind := fs.String("kind", "", "only this kind: tool_call, work_change, memory_change, life_change, agent_request")
	tool := fs.String("tool", "", "only this tool (exact name)")
	instance := fs.String("instance", "", "only this instance or session ID")
	limit := fs.Int("limit", 50, "at most this many (1 to 200)")
	cursor := fs.String("cursor", "", "continue after a previous page (its next_cursor)")
	if _, err := a.parseAPIArgs(fs, r, args); err != nil {
		return err
	}
	opts := client.ListRequestsOptions{State: airlock.State(*state), Kind: airlock.Kind(*kind), Tool: *tool, InstanceID: *instance, Limit: *limit, Cursor: *cursor}
	if *state == "all" {
		opts.State = ""
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	page, err := c.ListRequests(ctx, opts)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		if page.Items == nil {
			page.Items = []client.ApprovalRequest{}
		}
		return r.printJSON(page)
	}
	if len(page.Items) == 0 {
		fmt.Fprintf(r.out, "No %s requests.\n", strings.ReplaceAll(*state, "all", "matching"))
		return nil
	}
	now := time.Now()
	var rows [][]string
	for _, q := range page.Items {
		when := "deadline " + until(now, q.DeadlineAt)
		if q.Decision != nil {
			when = "decided " + since(now, q.Decision.DecidedAt)
		}
		rows = append(rows, []string{q.ID, string(q.State), string(q.Kind), clip(headline(q), 48), q.InstanceID, since(now, q.CreatedAt), when})
	}
	table(r.out, "ID\tSTATE\tKIND\tTOOL / TITLE\tINSTANCE\tASKED\tWHEN", rows)
	if page.NextCursor != "" {
		fmt.Fprintf(a.Stderr, "More: airlock requests list --cursor %s\n", page.NextCursor)
	}
	return nil
}

// headline is a request's one-line name: its tool, or its title.
func headline(q client.ApprovalRequest) string {
	if q.Title != "" {
		return q.Title
	}
	return q.Tool
}

func runRequestsShow(ctx context.Context, a *App, args []string) error {
	id, r, c, err := a.idCommand("requests", requestSubcommands, "show", args)
	if err != nil {
		return err
	}
	q, err := c.GetRequest(ctx, id)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(q)
	}
	printRequest(r.out, q, time.Now())
	return nil
}

// printRequest shows a request as the inbox does: facts first, the
// agent's claim labelled and apart, every text with its hidden characters
// made visible (so no escape sequence reaches the terminal).
func printRequest(w io.Writer, q *client.ApprovalRequest, now time.Time) {
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "%-13s %s\n", label+":", value)
		}
	}
	fmt.Fprintf(w, "%s  %s  %s\n", q.ID, strings.ToUpper(string(q.State)), q.Kind)
	line("Title", inbox.Visible(q.Title))
	line("Description", inbox.VisibleText(q.Description))
	if q.TargetType != "" || q.TargetID != "" {
		line("Target", strings.TrimSpace(inbox.Visible(q.TargetType)+" "+inbox.Visible(q.TargetID)))
	}
	line("Tool", inbox.Visible(q.Tool))
	if len(q.Arguments) > 0 {
		sum := sha256.Sum256(q.Arguments)
		fmt.Fprintf(w, "Arguments (exactly as submitted; SHA-256 %s):\n%s\n", hex.EncodeToString(sum[:]), indent(inbox.VisibleText(indentJSON(q.Arguments))))
	}
	if p := q.Proposal; p != nil {
		line("Proposal", p.Mode)
	}
	if qu := q.Question; qu != nil {
		if len(qu.Choices) == 0 {
			line("Question", "free-text answer")
		} else {
			var cs []string
			for _, c := range qu.Choices {
				cs = append(cs, "“"+inbox.Visible(c)+"”")
			}
			line("Question", "answer one of "+strings.Join(cs, ", "))
		}
	}
	if q.AgentReasoning != "" {
		fmt.Fprintf(w, "The agent's claim (unverified):\n%s\n", indent(inbox.VisibleText(q.AgentReasoning)))
	}
	if len(q.Context) > 0 {
		fmt.Fprintf(w, "Context from the adapter:\n%s\n", indent(inbox.VisibleText(indentJSON(q.Context))))
	}
	line("Instance", q.InstanceID)
	line("Session", q.SessionID)
	line("Asked", q.CreatedAt.UTC().Format(time.RFC3339)+" ("+since(now, q.CreatedAt)+")")
	if q.State == airlock.StatePending {
		line("Deadline", q.DeadlineAt.UTC().Format(time.RFC3339)+" ("+until(now, q.DeadlineAt)+")")
	}
	if d := q.Decision; d != nil {
		by := d.DecidedBy
		if d.DecidedByName != "" && d.DecidedByName != d.DecidedBy {
			by = inbox.Visible(d.DecidedByName) + " (" + d.DecidedBy + ")"
		}
		line("Decided", fmt.Sprintf("%s %s by %s", d.Status, d.DecidedAt.UTC().Format(time.RFC3339), by))
		if d.ExpiresAt != nil {
			line("May start", "until "+d.ExpiresAt.UTC().Format(time.RFC3339))
		}
		line("Answer", inbox.VisibleText(d.Answer))
		line("Note", inbox.VisibleText(d.Note))
	}
	if cr := q.CommandResult; cr != nil {
		line("Command", cr.Status)
	}
	if e := q.Execution; e != nil {
		line("Execution", string(e.Status))
	}
}

// indentJSON indents a JSON document for reading; only whitespace
// between tokens changes.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func runRequestsApprove(ctx context.Context, a *App, args []string) error {
	syn, sum := subUsage(requestSubcommands, "approve")
	fs, r := a.apiFlagSet("requests", "approve", syn, sum)
	validFor := fs.String("valid-for", "", "how long the approved call may start, such as 15m (default: the server's, 5m)")
	note := fs.String("note", "", "a note for the agent")
	answer := fs.String("answer", "", "the answer, for a request that asks a question")
	pos, err := a.parseAPIArgs(fs, r, args, "<id>")
	if err != nil {
		return err
	}
	return decide(ctx, r, pos[0], client.DecisionInput{Status: airlock.StateApproved, ValidFor: *validFor, Note: *note, Answer: *answer})
}

func runRequestsDeny(ctx context.Context, a *App, args []string) error {
	syn, sum := subUsage(requestSubcommands, "deny")
	fs, r := a.apiFlagSet("requests", "deny", syn, sum)
	note := fs.String("note", "", "why, for the agent")
	pos, err := a.parseAPIArgs(fs, r, args, "<id>")
	if err != nil {
		return err
	}
	return decide(ctx, r, pos[0], client.DecisionInput{Status: airlock.StateDenied, Note: *note})
}

// decide records a decision and says what happened.
func decide(ctx context.Context, r *remote, id string, in client.DecisionInput) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	q, err := c.Decide(ctx, id, in)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(q)
	}
	fmt.Fprintln(r.out, outcome(q))
	return nil
}

// outcome says in one line what a decision did.
func outcome(q *client.ApprovalRequest) string {
	d := q.Decision
	switch {
	case d == nil:
		return fmt.Sprintf("%s is %s", q.ID, q.State)
	case d.Status == airlock.StateDenied:
		return fmt.Sprintf("denied %s", q.ID)
	case d.Answer != "":
		return fmt.Sprintf("answered %s: %s", q.ID, inbox.Visible(d.Answer))
	case q.CommandResult != nil:
		return fmt.Sprintf("approved %s; the command was %s", q.ID, q.CommandResult.Status)
	case d.ExpiresAt != nil:
		return fmt.Sprintf("approved %s; the call may start until %s", q.ID, d.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s %s", d.Status, q.ID)
}

// watchInput is where `requests watch` reads a reviewer's answers, and
// whether that is a terminal (only then does it prompt). Tests replace it.
var watchInput = func() (io.Reader, bool) {
	fi, err := os.Stdin.Stat()
	return os.Stdin, err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func runRequestsWatch(ctx context.Context, a *App, args []string) error {
	syn, sum := subUsage(requestSubcommands, "watch")
	fs, r := a.apiFlagSet("requests", "watch", syn, sum)
	prompt := fs.Bool("prompt", false, "ask for a decision on each request even when standard input is not a terminal")
	if _, err := a.parseAPIArgs(fs, r, args); err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	in, tty := watchInput()
	ask := (tty || *prompt) && !r.json
	// The stream replays the audit log from its start: a created event
	// whose request is still pending when sent is one to decide (so
	// requests pending before the watch began come first), and one
	// decided since is skipped.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	news := make(chan client.ApprovalRequest, 64)
	streamErr := make(chan error, 1)
	go func() {
		defer close(news)
		for ev, err := range c.Events(ctx, 0) {
			if err != nil {
				streamErr <- err
				return
			}
			if ev.Event.Type != airlock.EventRequestCreated || ev.Request == nil || ev.Request.State != airlock.StatePending {
				continue
			}
			select {
			case news <- *ev.Request:
			case <-ctx.Done():
				return
			}
		}
	}()
	lines := make(chan string)
	if ask {
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(in)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-ctx.Done():
					return
				}
			}
		}()
		fmt.Fprintln(a.Stderr, "Watching for requests. For each: a = approve, d = deny, s = skip, q = quit.")
	}
	var idle <-chan string // answers typed while no request is shown
	if ask {
		idle = lines
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-idle:
			if !ok {
				return nil // end of input: the reviewer is done
			}
			fmt.Fprintln(a.Stderr, "No request is waiting for you; new ones appear as they come.")
		case err := <-streamErr:
			return apiError(err)
		case q, ok := <-news:
			if !ok {
				select {
				case err := <-streamErr:
					return apiError(err)
				default:
					return nil
				}
			}
			switch {
			case r.json:
				enc := json.NewEncoder(r.out)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(q); err != nil {
					return err
				}
			case !ask:
				fmt.Fprintf(r.out, "%s  %s  %s  from %s  deadline %s\n", q.ID, q.Kind, clip(headline(q), 60), q.InstanceID, until(time.Now(), q.DeadlineAt))
			default:
				quit, err := a.decideInteractively(ctx, c, r, q, lines)
				if err != nil || quit {
					return err
				}
			}
		}
	}
}

// decideInteractively shows a request and asks what to do with it.
func (a *App) decideInteractively(ctx context.Context, c *client.Client, r *remote, q client.ApprovalRequest, lines <-chan string) (quit bool, err error) {
	// It may have been decided while earlier ones were on screen.
	fresh, err := c.GetRequest(ctx, q.ID)
	if err != nil {
		return false, apiError(err)
	}
	if fresh.State != airlock.StatePending {
		return false, nil
	}
	fmt.Fprintln(r.out)
	printRequest(r.out, fresh, time.Now())
	read := func(prompt string) (string, bool) {
		fmt.Fprint(r.out, prompt)
		select {
		case l, ok := <-lines:
			return strings.TrimSpace(l), ok
		case <-ctx.Done():
			return "", false
		}
	}
	for {
		choice, ok := read("Decide [a]pprove, [d]eny, [s]kip, [q]uit: ")
		if !ok {
			return true, nil
		}
		var in client.DecisionInput
		switch strings.ToLower(choice) {
		case "a", "approve":
			in.Status = airlock.StateApproved
			if qu := fresh.Question; qu != nil {
				for i, ch := range qu.Choices {
					fmt.Fprintf(r.out, "  %d) %s\n", i+1, inbox.Visible(ch))
				}
				ans, ok := read("Answer: ")
				if !ok {
					return true, nil
				}
				if n := choiceNumber(ans, len(qu.Choices)); n > 0 {
					ans = qu.Choices[n-1]
				}
				in.Answer = ans
			}
		case "d", "deny":
			in.Status = airlock.StateDenied
			note, ok := read("Note for the agent (optional): ")
			if !ok {
				return true, nil
			}
			in.Note = note
		case "s", "skip", "":
			return false, nil
		case "q", "quit":
			return true, nil
		default:
			fmt.Fprintln(r.out, "Type a, d, s or q.")
			continue
		}
		got, err := c.Decide(ctx, fresh.ID, in)
		if err != nil {
			// A conflict is news, not the end of the watch.
			fmt.Fprintf(r.out, "Nothing recorded: %v\n", apiError(err))
			return false, nil
		}
		fmt.Fprintln(r.out, outcome(got))
		return false, nil
	}
}

// choiceNumber reads "2" as the second of n choices; 0 when it is not one.
func choiceNumber(s string, n int) int {
	var k int
	if _, err := fmt.Sscanf(s, "%d", &k); err != nil || k < 1 || k > n || fmt.Sprint(k) != s {
		return 0
	}
	return k
}

// getJSON reads an API path the Go client has no method for, with the
// same authentication and error mapping.
func (r *remote) getJSON(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(r.url, "/")+path, nil)
	if err != nil {
		return &usageError{msg: "--url: " + err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("User-Agent", "airlock-cli/"+version)
	hc := &http.Client{Timeout: 30 * time.Second}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w (is the server running at %s?)", path, err, r.url)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		var p struct {
			Code   airlock.Code  `json:"code"`
			Detail string        `json:"detail"`
			State  airlock.State `json:"state"`
		}
		if json.Unmarshal(body, &p) == nil && p.Code != "" {
			return apiError(&client.Error{Code: p.Code, Status: res.StatusCode, State: p.State, Message: p.Detail, Method: "GET", Path: path})
		}
		return fmt.Errorf("GET %s: HTTP %d", path, res.StatusCode)
	}
	return json.Unmarshal(body, out)
}
