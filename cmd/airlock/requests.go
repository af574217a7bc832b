package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/airlockhq/airlock/approvaltoken"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/display"
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
		airlock.CodeApprovalExpired, airlock.CodeAlreadyExecuted, airlock.CodeCommandFailed, airlock.CodeAlreadyUsed:
		return &exitError{exitConflict, errors.New(msg)}
	case airlock.CodeUnauthorized, airlock.CodeForbidden:
		return &exitError{exitAuth, errors.New(msg)}
	}
	return errors.New(msg)
}

// defaultURL is where the API commands look for the server: serve's
// default address.
const defaultURL = "http://127.0.0.1:8080"

// remote is what every API command needs: where the server is, the token,
// and the output format.
type remote struct {
	url, token string
	json       bool
	out        io.Writer
	tty        bool // out is a terminal: escape what would reorder or hide text
}

// apiFlagSet returns the flag set of `airlock <cmd> <sub>`, with --url,
// --token and --json, and a usage (sub's synopsis and summary in the
// command table) that says which read the environment.
func (a *App) apiFlagSet(cmd, sub string) (*flag.FlagSet, *remote) {
	s, _ := findSubcommand(cmd, sub)
	synopsis, summary := s.synopsis, s.summary
	r := &remote{out: a.Stdout, tty: isTerminal(a.Stdout)}
	fs := flag.NewFlagSet(cmd+" "+sub, flag.ContinueOnError)
	fs.StringVar(&r.url, "url", defaultURL, "the Airlock server [$AIRLOCK_URL]")
	fs.StringVar(&r.token, "token", "", "your bearer token [$AIRLOCK_TOKEN]; prefer the environment variable, since other users can read command lines")
	fs.BoolVar(&r.json, "json", false, "print JSON (the API's resources) for scripts instead of text for people")
	a.setSubcommandUsage(fs, cmd+" "+sub, synopsis, summary, exitCodesHelp)
	return fs, r
}

// setSubcommandUsage sets fs's usage: `airlock <name>` with its synopsis
// and summary, the flags, then exits (a paragraph on the exit codes).
func (a *App) setSubcommandUsage(fs *flag.FlagSet, name, synopsis, summary, exits string) {
	a.setUsage(fs, func(w io.Writer) {
		fmt.Fprintf(w, "Usage: airlock %s %s\n\n%s\n\nFlags:\n", name, synopsis, summary)
		// PrintDefaults writes to the flag set's output; point it at w
		// for the moment.
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
		fmt.Fprint(w, exits)
	})
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
	if n := len(names); n > 0 && strings.HasSuffix(names[n-1], "...") && len(pos) >= n {
		// The last name takes one or more: `<id>...`.
	} else if len(pos) != len(names) {
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

// idCommand parses `airlock <cmd> <sub> [flags] <id>`, a subcommand with
// only the common flags, and returns the id, the remote and its client.
func (a *App) idCommand(cmd, sub string, args []string) (string, *remote, *client.Client, error) {
	fs, r := a.apiFlagSet(cmd, sub)
	pos, c, err := a.clientArgs(fs, r, args, "<id>")
	if err != nil {
		return "", nil, nil, err
	}
	return pos[0], r, c, nil
}

// clientArgs parses args as parseAPIArgs does and returns the positional
// arguments with a client for r: what a subcommand that checks nothing of
// its own before calling the API needs.
func (a *App) clientArgs(fs *flag.FlagSet, r *remote, args []string, names ...string) ([]string, *client.Client, error) {
	pos, err := a.parseAPIArgs(fs, r, args, names...)
	if err != nil {
		return nil, nil, err
	}
	c, err := r.client()
	if err != nil {
		return nil, nil, err
	}
	return pos, c, nil
}

// idAction runs `airlock <cmd> <sub> <id>`: it calls the API on the id
// and prints the result, as JSON with --json, otherwise as text writes it.
func idAction[T any](ctx context.Context, a *App, cmd, sub string, args []string,
	call func(c *client.Client, id string) (T, error), text func(w io.Writer, id string, v T)) error {
	id, r, c, err := a.idCommand(cmd, sub, args)
	if err != nil {
		return err
	}
	v, err := call(c, id)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(v)
	}
	text(r.out, id, v)
	return nil
}

// listAction runs `airlock <cmd> list` (flags adds its own flags): it
// calls the API and prints the items it gets, {"items": […]} with --json,
// otherwise a table with header's columns and a row per item. row is
// given the time the list was read, for ages.
func listAction[T any](a *App, cmd string, args []string, flags func(*flag.FlagSet),
	call func(c *client.Client) ([]T, error), header string, row func(it T, now time.Time) []string) error {
	fs, r := a.apiFlagSet(cmd, "list")
	if flags != nil {
		flags(fs)
	}
	_, c, err := a.clientArgs(fs, r, args)
	if err != nil {
		return err
	}
	items, err := call(c)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		if items == nil {
			items = []T{}
		}
		return r.printJSON(map[string]any{"items": items})
	}
	now := time.Now()
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		rows = append(rows, row(it, now))
	}
	table(r.out, header, rows)
	return nil
}

// client returns an API client for r.
func (r *remote) client() (*client.Client, error) {
	c, err := client.New(r.url, r.token, client.WithUserAgent("airlock-cli/"+userAgentVersion()), client.WithTimeout(30*time.Second))
	if err != nil {
		return nil, &usageError{msg: "--url: " + err.Error()}
	}
	return c, nil
}

// printJSON writes v as indented JSON, with <, > and & as they are. On a
// terminal, every character the inbox would show as a marker (bidi
// controls, zero-width, …) is written as a \uXXXX escape instead: the
// terminal shows what is there, and the JSON means exactly the same.
func (r *remote) printJSON(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	out := b.Bytes()
	if r.tty {
		out = escapeHidden(out)
	}
	_, err := r.out.Write(out)
	return err
}

// escapeHidden rewrites the hidden characters of a JSON document as
// \uXXXX escapes (surrogate pairs above U+FFFF). Outside strings a JSON
// document holds only ASCII, so every one it finds is inside a string,
// where the escape stands for the same character.
func escapeHidden(doc []byte) []byte {
	var b bytes.Buffer
	for _, r := range string(doc) {
		if r < utf8.RuneSelf || !display.Hidden(r, true) {
			b.WriteRune(r)
			continue
		}
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.Bytes()
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
	s = display.Visible(s)
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

// ---- airlock requests ----

func runRequestsList(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("requests", "list")
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
	if opts.State == airlock.StatePending {
		// What needs a decision soonest comes first, as in the inbox.
		slices.SortStableFunc(page.Items, func(a, b client.ApprovalRequest) int { return a.DeadlineAt.Compare(b.DeadlineAt) })
	}
	now := time.Now()
	var rows [][]string
	for _, q := range page.Items {
		when := "deadline " + until(now, q.DeadlineAt)
		if q.Decision != nil {
			when = "decided " + since(now, q.Decision.DecidedAt)
		}
		rows = append(rows, []string{q.ID, string(q.State), string(q.Kind), clip(headline(q), 48), clip(requester(&q), 24), since(now, q.CreatedAt), when})
	}
	table(r.out, "ID\tSTATE\tKIND\tTOOL / TITLE\tFROM\tASKED\tWHEN", rows)
	if page.NextCursor != "" {
		fmt.Fprintf(a.Stderr, "More: %s\n", nextPageCommand(fs, page.NextCursor))
	}
	return nil
}

// nextPageCommand is the command that lists the page after this one: the
// same flags as given (but --cursor, --url, --token and --json), and the
// next cursor.
func nextPageCommand(fs *flag.FlagSet, cursor string) string {
	cmd := "airlock requests list"
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "cursor", "url", "token", "json":
			return
		}
		cmd += " --" + f.Name + " " + shellQuote(f.Value.String())
	})
	return cmd + " --cursor " + shellQuote(cursor)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// requester names who asked for q (airlock.Requester): a tool call's
// instance, an MCP request's agent, with its session.
func requester(q *client.ApprovalRequest) string {
	instance := cmp.Or(q.InstanceName, q.InstanceID) // a deleted instance's name is gone
	return airlock.Requester(q.Kind, instance, cmp.Or(q.CreatedByName, instance), q.SessionID != "")
}

// headline is a request's one-line name: its tool, or its title.
func headline(q client.ApprovalRequest) string {
	if q.Title != "" {
		return q.Title
	}
	return q.Tool
}

func runRequestsShow(ctx context.Context, a *App, args []string) error {
	id, r, c, err := a.idCommand("requests", "show", args)
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
	printRequest(r.out, q, boardFor(ctx, c, q), time.Now())
	return nil
}

// boardFor reads the board when q proposes a work_move, so that it can be
// said in plain words with the columns' names; nil otherwise, or when it
// cannot be read.
func boardFor(ctx context.Context, c *client.Client, q *client.ApprovalRequest) []airlock.Column {
	if q.Proposal == nil || q.Proposal.Command == nil || q.Proposal.Command.Method != airlock.MethodWorkMove {
		return nil
	}
	b, err := c.Board(ctx)
	if err != nil {
		return nil
	}
	cols := []airlock.Column{}
	for _, col := range b.Columns {
		items := make([]airlock.WorkItem, 0, len(col.Items))
		for _, it := range col.Items {
			items = append(items, airlock.WorkItem{ID: it.ID, Title: it.Title, ColumnKey: it.ColumnKey})
		}
		cols = append(cols, airlock.Column{Key: col.Key, Name: col.Name, Items: items})
	}
	return cols
}

// printRequest shows a request as the inbox does: facts first, look-alike
// letters warned of, a work_move in plain words (board is the board as read
// now, or nil), the agent's claim labelled and apart, every text with its
// hidden characters made visible (so no escape sequence reaches the
// terminal).
func printRequest(w io.Writer, q *client.ApprovalRequest, board []airlock.Column, now time.Time) {
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "%-13s %s\n", label+":", value)
		}
	}
	fmt.Fprintf(w, "%s  %s  %s\n", q.ID, strings.ToUpper(string(q.State)), q.Kind)
	var warned []string
	for _, s := range []string{q.Title, q.TargetType, q.TargetID, q.Tool, string(q.Arguments), string(q.Context)} {
		if warn := display.LookAlike(s); warn != "" && !slices.Contains(warned, warn) {
			warned = append(warned, warn)
			fmt.Fprintf(w, "Warning:      %s\n", warn)
		}
	}
	if q.Kind.AgentWrote() {
		// The title, description and question are the agent's words.
		fmt.Fprintf(w, "%s, written by %s:\n", airlock.AgentClaim, display.Visible(requester(q)))
	}
	line("Title", display.Visible(q.Title))
	line("Description", display.VisibleText(q.Description))
	if q.TargetType != "" || q.TargetID != "" {
		line("Target", strings.TrimSpace(display.Visible(q.TargetType)+" "+display.Visible(q.TargetID)))
	}
	line("Tool", display.Visible(q.Tool))
	if q.PurgedAt != nil {
		// Purged, never "no arguments".
		fmt.Fprintf(w, "Arguments:    purged on %s, with the agent's reasoning and the adapter's context (payload retention)\n", q.PurgedAt.UTC().Format(time.RFC3339))
	} else if len(q.Arguments) > 0 {
		// The size and the digest an approval token carries (args_digest)
		// come first, as in the inbox: one value to compare with a tool
		// server's.
		digest, err := approvaltoken.ArgsDigest(q.Arguments)
		if err != nil {
			digest = "none (" + err.Error() + ")"
		}
		fmt.Fprintf(w, "Arguments (exactly as submitted; %d bytes; digest %s):\n%s\n", len(q.Arguments), digest, indent(display.VisibleText(indentJSON(q.Arguments))))
	}
	if p := q.Proposal; p != nil {
		line("Proposal", p.Mode)
		if cmd := p.Command; cmd != nil && cmd.Method == airlock.MethodWorkMove {
			text, note := display.WorkMove(cmd.Input, cmd.Observed, board)
			line("Command", display.Visible(text))
			line("Warning", note)
		} else if cmd != nil {
			line("Command", display.Visible(cmd.Method))
		}
	}
	if qu := q.Question; qu != nil {
		if len(qu.Choices) == 0 {
			line("Question", "free-text answer")
		} else {
			var cs []string
			for _, c := range qu.Choices {
				cs = append(cs, "“"+display.Visible(c)+"”")
			}
			line("Question", "answer one of "+strings.Join(cs, ", "))
		}
	}
	if q.AgentReasoning != "" {
		fmt.Fprintf(w, "%s:\n%s\n", airlock.AgentClaim, indent(display.VisibleText(q.AgentReasoning)))
	}
	if len(q.Context) > 0 {
		fmt.Fprintf(w, "Context from the adapter:\n%s\n", indent(display.VisibleText(indentJSON(q.Context))))
	}
	if q.Preview != nil || q.Reversibility != "" {
		fmt.Fprintf(w, "%s:\n", airlock.AdapterClaim)
		if q.Reversibility != "" {
			fmt.Fprintf(w, "  Reversibility: %s\n", display.Visible(q.Reversibility))
		}
		if p := q.Preview; p != nil {
			fmt.Fprintf(w, "  Preview (%s):\n%s\n", display.Visible(p.Type), indent(indent(display.VisibleText(strings.TrimSuffix(p.Content, "\n")))))
		}
	}
	if q.DerivedFrom != "" {
		line("Edited from", q.DerivedFrom+" ("+strings.ToLower(airlock.ApprovedWithChanges)+"; that request was denied)")
	}
	line("Instance", display.Visible(instanceLabel(q)))
	if q.CreatedByName != "" {
		line("Agent", display.Visible(q.CreatedByName))
	}
	line("Session", q.SessionID)
	line("Asked", q.CreatedAt.UTC().Format(time.RFC3339)+" ("+since(now, q.CreatedAt)+")")
	if len(q.Reviewers) > 0 {
		line("For", display.Visible(strings.Join(q.Reviewers, ", "))+" (only members may decide)")
	}
	if len(q.EscalateTo) > 0 {
		if q.EscalatedAt != nil {
			line("Escalated", "to "+display.Visible(strings.Join(q.EscalateTo, ", "))+" at "+q.EscalatedAt.UTC().Format(time.RFC3339))
		} else if q.State == airlock.StatePending {
			line("Escalates", "to "+display.Visible(strings.Join(q.EscalateTo, ", "))+" if still pending")
		}
	}
	if q.Approvals > 1 {
		var approvedBy []string
		for _, v := range q.Votes {
			if v.Status == airlock.StateApproved {
				approvedBy = append(approvedBy, display.Visible(v.Name))
			}
		}
		line("Approvals", airlock.QuorumProgress(q.Approvals, approvedBy))
		for _, v := range q.Votes {
			line("Vote", strings.TrimSpace(fmt.Sprintf("%s by %s at %s %s", v.Status, display.Visible(v.Name),
				v.At.UTC().Format(time.RFC3339), display.Visible(v.Note))))
		}
	}
	if q.State == airlock.StatePending {
		line("Deadline", q.DeadlineAt.UTC().Format(time.RFC3339)+" ("+until(now, q.DeadlineAt)+")")
	}
	if d := q.Decision; d != nil {
		line("Decided", fmt.Sprintf("%s %s by %s", d.Status, d.DecidedAt.UTC().Format(time.RFC3339), display.Visible(decider(d))))
		if d.ExpiresAt != nil {
			line("May start", "until "+d.ExpiresAt.UTC().Format(time.RFC3339))
		}
		line("Answer", display.VisibleText(d.Answer))
		line("Note", display.VisibleText(d.Note))
		if d.ReplacedBy != "" {
			line("Replaced by", d.ReplacedBy+" ("+strings.ToLower(airlock.ApprovedWithChanges)+": the call with the reviewer's arguments; this one never runs)")
		}
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
	fs, r := a.apiFlagSet("requests", "approve")
	validFor := fs.String("valid-for", "", "how long the approved call may start, such as 15m (default: the server's, 5m)")
	note := fs.String("note", "", "a note for the agent")
	answer := fs.String("answer", "", "the answer, for a request that asks a question")
	grant := fs.String("grant", "", "also approve the same call, for this long (such as 1h): a grant (docs/policy.md)")
	grantUses := fs.Int("grant-uses", 0, "with --grant: how many calls it may approve (default: no limit until it expires)")
	grantScope := fs.String("grant-scope", "", "with --grant: instance (the default: calls on this request's instance) or agent (the agent's calls on any instance)")
	grantMatch := fs.String("grant-match", "", "with --grant: a CEL expression the calls must match, instead of the same arguments")
	edit := fs.Bool("edit", false, "approve with changed arguments: open $VISUAL or $EDITOR on the exact arguments; the request is denied and a new one with yours approved (docs/protocol.md, Edits)")
	argsFile := fs.String("arguments", "", "approve with these arguments instead, a JSON object: a file, or - for standard input (as --edit, for scripts)")
	yes := yesFlag(fs, "approve")
	pos, err := a.parseAPIArgs(fs, r, args, "<id>...")
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		if *edit || *argsFile != "" || *answer != "" || *grant != "" || *grantUses != 0 || *grantScope != "" || *grantMatch != "" {
			return usageErrorf("several ids are approved as a batch, with --note and --valid-for only: edit, answer or grant one request at a time")
		}
		return a.decideBatch(ctx, r, client.BatchDecisionInput{IDs: pos, Status: airlock.StateApproved, Note: *note, ValidFor: *validFor}, *yes)
	}
	in := client.DecisionInput{Status: airlock.StateApproved, ValidFor: *validFor, Note: *note, Answer: *answer}
	if *edit || *argsFile != "" {
		switch {
		case *edit && *argsFile != "":
			return usageErrorf("--edit and --arguments each give the edited arguments: pass one")
		case *grant != "" || *answer != "":
			return usageErrorf("an edit approves a tool call with changed arguments, never with --grant or --answer")
		case *argsFile == "-" && !*yes:
			return usageErrorf("--arguments - reads standard input, which then cannot confirm: pass --yes, or a file")
		}
		if in.Arguments, err = a.editedArguments(ctx, r, pos[0], *argsFile, *edit); err != nil {
			return err
		}
	}
	switch {
	case *grant != "":
		in.Grant = &airlock.DecisionGrant{ExpiresIn: *grant, Scope: *grantScope, Match: *grantMatch}
		if *grantUses != 0 {
			in.Grant.Uses = grantUses
		}
	case *grantUses != 0 || *grantScope != "" || *grantMatch != "":
		return usageErrorf("--grant-uses, --grant-scope and --grant-match go with --grant")
	}
	return a.decide(ctx, r, pos[0], in, *yes)
}

func runRequestsDeny(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("requests", "deny")
	note := fs.String("note", "", "why, for the agent")
	yes := yesFlag(fs, "deny")
	pos, err := a.parseAPIArgs(fs, r, args, "<id>...")
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return a.decideBatch(ctx, r, client.BatchDecisionInput{IDs: pos, Status: airlock.StateDenied, Note: *note}, *yes)
	}
	return a.decide(ctx, r, pos[0], client.DecisionInput{Status: airlock.StateDenied, Note: *note}, *yes)
}

// yesFlag adds --yes to the flags of `requests approve` or `deny`.
func yesFlag(fs *flag.FlagSet, verb string) *bool {
	return fs.Bool("yes", false, verb+" without showing the call and asking first: for scripts, which have no terminal to ask on")
}

// decide records a decision and says what happened. Unless yes, it first
// shows the call on the terminal and asks; with no terminal to ask on, it
// refuses, so that nothing is decided unseen by accident.
func (a *App) decide(ctx context.Context, r *remote, id string, in client.DecisionInput, yes bool) error {
	verb := "approve"
	if in.Status == airlock.StateDenied {
		verb = "deny"
	}
	input, tty := watchInput()
	if !yes && (!tty || !isTerminal(a.Stderr)) {
		return usageErrorf("requests %s shows the call and asks before it records anything, and there is no terminal to ask on; "+
			"run it in a terminal, or pass --yes to %s %s unseen (scripts)", verb, verb, id)
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	if !yes {
		if err := confirmOnTerminal(ctx, c, a.Stderr, input, id, in); err != nil {
			return err
		}
	}
	q, err := c.Decide(ctx, id, in)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(q)
	}
	fmt.Fprintln(r.out, outcome(q))
	if g := q.Grant; g != nil {
		uses := "any number of calls"
		if g.Uses != nil {
			uses = fmt.Sprintf("%d more calls", *g.Uses)
		}
		fmt.Fprintf(r.out, "Granted %s: %s of %s like it approved until %s (airlock grants revoke %s to end it).\n",
			g.ID, uses, g.Tool, g.ExpiresAt.UTC().Format(time.RFC3339), g.ID)
	}
	return nil
}

// decideBatch decides several requests in one batch (docs/protocol.md,
// "Batch decisions") and prints a line per id. Unless yes, it first shows
// every call in full, as `requests show` does, and asks once. Its exit
// code is that of the first refusal, when any id was refused: the others
// are decided all the same.
func (a *App) decideBatch(ctx context.Context, r *remote, in client.BatchDecisionInput, yes bool) error {
	verb := "approve"
	if in.Status == airlock.StateDenied {
		verb = "deny"
	}
	input, tty := watchInput()
	if !yes && (!tty || !isTerminal(a.Stderr)) {
		return usageErrorf("requests %s shows every call and asks before it records anything, and there is no terminal to ask on; "+
			"run it in a terminal, or pass --yes to %s %d requests unseen (scripts)", verb, verb, len(in.IDs))
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	if !yes {
		if err := confirmBatchOnTerminal(ctx, c, a.Stderr, input, in); err != nil {
			return err
		}
	}
	results, err := c.DecideBatch(ctx, in)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(results)
	}
	var first error
	refused := 0
	for _, res := range results {
		if res.Err != nil {
			refused++
			e := apiError(res.Err)
			if first == nil {
				first = e
			}
			fmt.Fprintf(r.out, "%s: not decided: %v\n", res.ID, e)
			continue
		}
		fmt.Fprintln(r.out, outcome(res.Request))
	}
	if first != nil {
		var ee *exitError
		code := 1
		if errors.As(first, &ee) {
			code = ee.code
		}
		return &exitError{code, fmt.Errorf("%d of %d requests were not decided; the others were", refused, len(results))}
	}
	return nil
}

// confirmBatchOnTerminal shows each of in.IDs on w as `requests show`
// does, in full, and asks once on input. A request no longer pending is
// shown as such and left to the batch's result.
func confirmBatchOnTerminal(ctx context.Context, c *client.Client, w io.Writer, input io.Reader, in client.BatchDecisionInput) error {
	now := time.Now()
	for i, id := range in.IDs {
		fmt.Fprintf(w, "── %d of %d ──\n", i+1, len(in.IDs))
		q, err := c.GetRequest(ctx, id)
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n\n", id, apiError(err))
			continue
		}
		printRequest(w, q, boardFor(ctx, c, q), now)
		if q.State != airlock.StatePending {
			fmt.Fprintf(w, "(already %s: it will not be decided again)\n", q.State)
		}
		fmt.Fprintln(w)
	}
	verb := "Approve"
	if in.Status == airlock.StateDenied {
		verb = "Deny"
	}
	fmt.Fprintf(w, "→ %s these %d requests, each as its own decision? [y/N]: ", verb, len(in.IDs))
	line, err := bufio.NewReader(input).ReadString('\n')
	if err != nil && line == "" {
		return errNotConfirmed
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

// errNotConfirmed is the reviewer's "no" to a decision's confirmation.
var errNotConfirmed = errors.New("not confirmed: nothing was recorded")

// confirmOnTerminal shows request id on w as `requests show` does (tool,
// arguments indented, the agent's claim labelled, context, where it comes
// from), restates it with the decision in, and asks y/N on input. Only
// "y" or "yes" goes on; a request no longer pending is a conflict.
func confirmOnTerminal(ctx context.Context, c *client.Client, w io.Writer, input io.Reader, id string, in client.DecisionInput) error {
	q, err := c.GetRequest(ctx, id)
	if err != nil {
		return apiError(err)
	}
	if q.State != airlock.StatePending {
		return &exitError{exitConflict, fmt.Errorf("%s is already %s: nothing was recorded", id, q.State)}
	}
	now := time.Now()
	printRequest(w, q, boardFor(ctx, c, q), now)
	if in.Arguments != nil {
		fmt.Fprintln(w)
		printDiff(w, q.Arguments, in.Arguments)
	}
	fmt.Fprintf(w, "\n→ %s\n%s\nRecord this? [y/N]: ", restate(q, now), confirmation(q, in))
	line, err := bufio.NewReader(input).ReadString('\n')
	if err != nil && line == "" {
		return errNotConfirmed
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

// outcome says in one line what a decision did.
func outcome(q *client.ApprovalRequest) string {
	d := q.Decision
	switch {
	case d == nil:
		return fmt.Sprintf("%s is %s", q.ID, q.State)
	case d.ReplacedBy != "" && q.Replacement != nil:
		rep := q.Replacement
		now := "is " + string(rep.State)
		switch {
		case rep.State == airlock.StatePending:
			now = "has your vote and waits for more"
		case rep.Decision != nil && rep.Decision.ExpiresAt != nil:
			now = "may start until " + rep.Decision.ExpiresAt.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("approved with changes: %s, with your arguments, %s; %s is denied and never runs", rep.ID, now, q.ID)
	case d.Status == airlock.StateDenied:
		return fmt.Sprintf("denied %s", q.ID)
	case d.Answer != "":
		return fmt.Sprintf("answered %s: %s", q.ID, display.Visible(d.Answer))
	case q.CommandResult != nil:
		return fmt.Sprintf("approved %s; the command was %s", q.ID, q.CommandResult.Status)
	case d.ExpiresAt != nil:
		return fmt.Sprintf("approved %s; the call may start until %s", q.ID, d.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s %s", d.Status, q.ID)
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
	req.Header.Set("User-Agent", "airlock-cli/"+userAgentVersion())
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
