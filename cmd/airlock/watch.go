package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/display"
)

// `airlock requests watch` streams new pending requests. On a terminal
// (or with --prompt) it asks the reviewer about each one, as carefully as
// the inbox does: the tool and arguments restated just above the prompt,
// a confirmation that shows validity and note, a decision made elsewhere
// (or the deadline passing) shown at once, and q quitting at any time.

// watchEvent is what the event stream tells the watch: a request that is
// pending, or one that has ended (decided, expired or cancelled).
type watchEvent struct {
	req   client.ApprovalRequest
	ended bool
}

// watcher is one interactive watch.
type watcher struct {
	a        *App
	c        *client.Client
	r        *remote
	lines    <-chan string     // the reviewer's answers, a line each
	events   <-chan watchEvent // from the stream
	errs     <-chan error      // the stream's end
	queue    []client.ApprovalRequest
	validFor string // --valid-for: the validity offered by default
}

func runRequestsWatch(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("requests", "watch")
	prompt := fs.Bool("prompt", false, "ask for a decision on each request even when standard input is not a terminal")
	validFor := fs.String("valid-for", "", "the validity offered when approving, such as 15m (default: the server's)")
	if _, err := a.parseAPIArgs(fs, r, args); err != nil {
		return err
	}
	if *validFor != "" {
		if d, err := time.ParseDuration(*validFor); err != nil || d <= 0 {
			return usageErrorf("--valid-for %q is not a positive duration such as 15m", *validFor)
		}
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	in, tty := watchInput()
	ask := (tty || *prompt) && !r.json
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	events := make(chan watchEvent, 64)
	errs := make(chan error, 1)
	go streamWatchEvents(ctx, c, events, errs)
	w := &watcher{a: a, c: c, r: r, events: events, errs: errs, validFor: *validFor}
	if !ask {
		return w.print(ctx)
	}
	lines := make(chan string)
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
	w.lines = lines
	fmt.Fprintln(a.Stderr, "Watching for requests. For each: a = approve, d = deny, s = skip; q quits at any time.")
	return w.prompt(ctx)
}

// streamWatchEvents follows the event stream from its start: a created
// event whose request is still pending when sent is one to decide (so
// requests pending before the watch began come first), and an ending
// event says a request left the queue.
func streamWatchEvents(ctx context.Context, c *client.Client, out chan<- watchEvent, errs chan<- error) {
	defer close(out)
	for ev, err := range c.Events(ctx, 0) {
		if err != nil {
			errs <- err
			return
		}
		if ev.Request == nil {
			continue
		}
		var we watchEvent
		switch ev.Event.Type {
		case airlock.EventRequestCreated:
			if ev.Request.State != airlock.StatePending {
				continue
			}
			we = watchEvent{req: *ev.Request}
		case airlock.EventRequestApproved, airlock.EventRequestDenied, airlock.EventRequestExpired, airlock.EventRequestCancelled:
			we = watchEvent{req: *ev.Request, ended: true}
		default:
			continue
		}
		select {
		case out <- we:
		case <-ctx.Done():
			return
		}
	}
}

// print writes each new pending request as a line (or, with --json, as
// the API's resource) until the stream or ctx ends.
func (w *watcher) print(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.events:
			if !ok {
				return w.streamEnd()
			}
			if ev.ended {
				continue
			}
			q := ev.req
			if w.r.json {
				b, err := json.Marshal(q)
				if err != nil {
					return err
				}
				if w.r.tty {
					b = escapeHidden(b)
				}
				if _, err := fmt.Fprintf(w.r.out, "%s\n", b); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(w.r.out, "%s  %s  %s  from %s  deadline %s\n", q.ID, q.Kind, clip(headline(q), 60), clip(requester(&q), 60), until(time.Now(), q.DeadlineAt))
		}
	}
}

// streamEnd is the watch's end when the stream closes: its error, if any.
func (w *watcher) streamEnd() error {
	select {
	case err := <-w.errs:
		return apiError(err)
	default:
		return nil
	}
}

// prompt asks about each pending request in turn until the reviewer quits
// or the input ends.
func (w *watcher) prompt(ctx context.Context) error {
	for {
		if len(w.queue) > 0 {
			q := w.queue[0]
			w.queue = w.queue[1:]
			quit, err := w.decide(ctx, q)
			if err != nil || quit {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-w.lines:
			if !ok || isQuit(l) {
				return nil
			}
			fmt.Fprintln(w.a.Stderr, "No request is waiting for you; new ones appear as they come (q quits).")
		case ev, ok := <-w.events:
			if !ok {
				return w.streamEnd()
			}
			w.note(ev)
		}
	}
}

// note keeps the queue up to date with one stream event.
func (w *watcher) note(ev watchEvent) {
	if !ev.ended {
		w.queue = append(w.queue, ev.req)
		return
	}
	w.queue = slices.DeleteFunc(w.queue, func(q client.ApprovalRequest) bool { return q.ID == ev.req.ID })
}

func isQuit(l string) bool {
	switch strings.ToLower(strings.TrimSpace(l)) {
	case "q", "quit":
		return true
	}
	return false
}

// answer is what one read of the reviewer's input gave.
type answer struct {
	text  string
	quit  bool                    // q, end of input, or the watch stopping
	ended *client.ApprovalRequest // the request ended meanwhile, as it now is
}

// read prints prompt and waits for a line, while keeping the queue up to
// date and watching whether cur ends (decided elsewhere, cancelled, or its
// deadline passing).
func (w *watcher) read(ctx context.Context, cur *client.ApprovalRequest, prompt string) answer {
	fmt.Fprint(w.r.out, prompt)
	deadline := time.NewTimer(time.Until(cur.DeadlineAt))
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return answer{quit: true}
		case l, ok := <-w.lines:
			if !ok || isQuit(l) {
				return answer{quit: true}
			}
			return answer{text: strings.TrimSpace(l)}
		case ev, ok := <-w.events:
			if !ok {
				return answer{quit: true}
			}
			if ev.ended && ev.req.ID == cur.ID {
				return answer{ended: &ev.req}
			}
			w.note(ev)
		case <-deadline.C:
			// The server expires it; read it back to say so truly.
			if q, err := w.c.GetRequest(ctx, cur.ID); err == nil && q.State != airlock.StatePending {
				return answer{ended: q}
			}
			deadline.Reset(time.Second)
		}
	}
}

// decide shows a request and asks what to do with it, confirming before
// anything is recorded.
func (w *watcher) decide(ctx context.Context, q client.ApprovalRequest) (quit bool, err error) {
	// It may have been decided while earlier ones were on screen.
	fresh, err := w.c.GetRequest(ctx, q.ID)
	if err != nil {
		return false, apiError(err)
	}
	if fresh.State != airlock.StatePending {
		return false, nil
	}
	out := w.r.out
	fmt.Fprintln(out)
	printRequest(out, fresh, boardFor(ctx, w.c, fresh), time.Now())
	for {
		// Long reasoning may have scrolled the facts away: restate them
		// right above the prompt.
		fmt.Fprintf(out, "\n→ %s\n", restate(fresh, time.Now()))
		a := w.read(ctx, fresh, "Decide [a]pprove, [d]eny, [s]kip, [q]uit: ")
		if a.quit || a.ended != nil {
			return w.finish(a)
		}
		var in client.DecisionInput
		switch strings.ToLower(a.text) {
		case "a", "approve":
			in.Status = airlock.StateApproved
		case "d", "deny":
			in.Status = airlock.StateDenied
		case "s", "skip", "":
			return false, nil
		default:
			fmt.Fprintln(out, "Type a, d, s or q.")
			continue
		}
		ok, a := w.details(ctx, fresh, &in)
		if a.quit || a.ended != nil {
			return w.finish(a)
		}
		if !ok {
			fmt.Fprintln(out, "Nothing recorded.")
			continue
		}
		got, err := w.c.Decide(ctx, fresh.ID, in)
		if err != nil {
			// A conflict is news, not the end of the watch.
			fmt.Fprintf(out, "Nothing recorded: %v\n", apiError(err))
			return false, nil
		}
		fmt.Fprintln(out, outcome(got))
		return false, nil
	}
}

// finish says why a request left the screen without the reviewer's
// decision, and whether to quit.
func (w *watcher) finish(a answer) (quit bool, err error) {
	if a.ended != nil {
		fmt.Fprintf(w.r.out, "\n%s\n", endedElsewhere(a.ended))
	}
	return a.quit, nil
}

// details asks what a decision needs (the answer to a question, the
// validity of an approval, the note) and then for confirmation, restating
// all of it. ok is false when the reviewer did not confirm.
func (w *watcher) details(ctx context.Context, q *client.ApprovalRequest, in *client.DecisionInput) (ok bool, a answer) {
	out := w.r.out
	if in.Status == airlock.StateApproved {
		if qu := q.Question; qu != nil {
			for i, ch := range qu.Choices {
				fmt.Fprintf(out, "  %d) %s\n", i+1, display.Visible(ch))
			}
			if a = w.read(ctx, q, "Answer: "); a.quit || a.ended != nil {
				return false, a
			}
			in.Answer = a.text
			if n := choiceNumber(a.text, len(qu.Choices)); n > 0 {
				in.Answer = qu.Choices[n-1]
			}
		}
		if takesValidity(q) {
			def := w.validFor
			shown := def
			if def == "" {
				shown = "the server's default"
			}
			for {
				if a = w.read(ctx, q, "May start for how long (such as 15m) ["+shown+"]: "); a.quit || a.ended != nil {
					return false, a
				}
				v := a.text
				if v == "" {
					v = def
				}
				if d, err := time.ParseDuration(v); v != "" && (err != nil || d <= 0) {
					fmt.Fprintf(out, "%q is not a positive duration such as 15m.\n", a.text)
					continue
				}
				in.ValidFor = v
				break
			}
		}
	}
	notePrompt := "Note for the agent (optional): "
	if a = w.read(ctx, q, notePrompt); a.quit || a.ended != nil {
		return false, a
	}
	in.Note = a.text
	fmt.Fprintf(out, "%s\n", confirmation(q, *in))
	if a = w.read(ctx, q, "Record this? [y/N]: "); a.quit || a.ended != nil {
		return false, a
	}
	switch strings.ToLower(a.text) {
	case "y", "yes":
		return true, a
	}
	return false, a
}

// takesValidity reports whether approving q starts a validity window: a
// tool call or an approve-then-run proposal does; an answer or a command
// Airlock runs at once does not.
func takesValidity(q *client.ApprovalRequest) bool {
	return q.Question == nil && (q.Proposal == nil || q.Proposal.Command == nil)
}

// restate is a request in one line: what would run, from where, until when.
func restate(q *client.ApprovalRequest, now time.Time) string {
	what := headline(*q)
	if len(q.Arguments) > 0 {
		what += " " + string(q.Arguments)
	}
	return fmt.Sprintf("%s  %s  from %s  deadline %s", q.ID, clip(what, 100), display.Visible(requester(q)), until(now, q.DeadlineAt))
}

// confirmation says what is about to be recorded.
func confirmation(q *client.ApprovalRequest, in client.DecisionInput) string {
	var b strings.Builder
	verb := "Approve"
	if in.Status == airlock.StateDenied {
		verb = "Deny"
	}
	if in.Arguments != nil {
		verb = "Approve with the changes above (this request is denied and a new one approved)"
	}
	fmt.Fprintf(&b, "%s %s", verb, clip(headline(*q), 60))
	if in.Answer != "" {
		fmt.Fprintf(&b, ", answering “%s”", clip(in.Answer, 60))
	}
	if in.Status == airlock.StateApproved && takesValidity(q) {
		if in.ValidFor != "" {
			fmt.Fprintf(&b, ", which may start for %s", in.ValidFor)
		} else {
			b.WriteString(", which may start for the server's default validity")
		}
	}
	if in.Note != "" {
		fmt.Fprintf(&b, ", with the note “%s”", clip(in.Note, 80))
	} else {
		b.WriteString(", with no note")
	}
	return b.String() + "."
}

// endedElsewhere says how a request ended while it was on screen.
func endedElsewhere(q *client.ApprovalRequest) string {
	d := q.Decision
	if d == nil {
		return fmt.Sprintf("%s is now %s; nothing was recorded here.", q.ID, q.State)
	}
	s := fmt.Sprintf("%s was %s elsewhere by %s at %s", q.ID, d.Status, display.Visible(decider(d)), d.DecidedAt.Local().Format(time.TimeOnly))
	switch d.Status {
	case airlock.StateExpired:
		s = fmt.Sprintf("%s expired at %s: nobody decided before its deadline", q.ID, d.DecidedAt.Local().Format(time.TimeOnly))
	case airlock.StateCancelled:
		s = fmt.Sprintf("%s was cancelled by its agent at %s", q.ID, d.DecidedAt.Local().Format(time.TimeOnly))
	}
	if d.Note != "" {
		s += ": “" + display.Visible(d.Note) + "”"
	}
	return s + ". Nothing was recorded here."
}

// decider names who decided: the token's name, with its ID.
func decider(d *client.Decision) string {
	if d.DecidedByName != "" && d.DecidedByName != d.DecidedBy {
		return d.DecidedByName + " (" + d.DecidedBy + ")"
	}
	return d.DecidedBy
}

// instanceLabel names a request's instance: its name, with its ID.
func instanceLabel(q *client.ApprovalRequest) string {
	if q.InstanceName != "" {
		return q.InstanceName + " (" + q.InstanceID + ")"
	}
	return q.InstanceID
}
