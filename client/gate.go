package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ctxwait"
)

// Gate runs tool calls only with a valid approval, and each at most once
// (docs/protocol.md L6–L8). For one call it asks Airlock for approval
// of exactly that tool and those arguments, waits for a reviewer, claims
// the single execution attempt, checks expires_at against the local clock
// immediately before starting, runs the function, and reports succeeded,
// failed or unknown.
//
// "At most once" holds when the same approval arrives twice (the server
// grants one claim only), when several gates race for it, and across
// restarts: each step is written to an on-disk journal before the gate acts
// on it, and a run that a crash interrupted is reported unknown and never
// run again automatically.
type Gate struct {
	c        *Client
	instance string
	j        *journal
	now      func() time.Time
	timeout  string
	poll     time.Duration
	edits    bool

	mu    sync.Mutex
	locks map[string]*keyLock
}

// GateConfig configures a Gate.
type GateConfig struct {
	// Client talks to Airlock with an agent token. Required.
	Client *Client
	// InstanceID is the instance (registered by this agent's token) that
	// owns the gate's requests. Required. Keep it across restarts: a call's
	// idempotency key is derived from it, so a restarted gate with a new
	// instance asks anew instead of finding its earlier request.
	InstanceID string
	// JournalDir is where the gate records each step (created if needed,
	// locked while open). Required. Give each gate process its own.
	JournalDir string
	// Timeout is the decision window asked for calls that name none (a Go
	// or ISO 8601 duration; "" takes the server's default, 15m).
	Timeout string
	// PollWait is one long-poll's wait while waiting for a decision
	// (default: the client's, 30s).
	PollWait time.Duration
	// Now is the local clock checked against expires_at before a call
	// starts (default time.Now).
	Now func() time.Time
	// AcceptEdits lets the gate run a call a reviewer approved with
	// changed arguments (docs/protocol.md, "Edits"): the request is then
	// denied, naming its replacement, and the gate claims and runs the
	// replacement instead, whose arguments the function must take from
	// ArgumentsFrom(ctx) (Outcome.Request is the replacement). Off (the
	// default), such a call does not run: Run returns a *DeniedError whose
	// ReplacedBy names the replacement.
	AcceptEdits bool
}

// NewGate opens the journal and returns a Gate. Close it to release the
// journal. It does not touch the server; call Recover to settle what a
// previous process left unfinished.
func NewGate(cfg GateConfig) (*Gate, error) {
	if cfg.Client == nil {
		return nil, errors.New("airlock gate: GateConfig.Client is required")
	}
	if cfg.InstanceID == "" {
		return nil, errors.New("airlock gate: GateConfig.InstanceID is required: register an instance with Client.RegisterInstance")
	}
	j, err := openJournal(cfg.JournalDir)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Gate{
		c: cfg.Client, instance: cfg.InstanceID, j: j, now: cfg.Now,
		timeout: cfg.Timeout, poll: cfg.PollWait, locks: map[string]*keyLock{}, edits: cfg.AcceptEdits,
	}, nil
}

// Close releases the journal.
func (g *Gate) Close() error { return g.j.close() }

// Call is one intercepted tool call.
type Call struct {
	// Tool is the tool's name, exactly as intercepted.
	Tool string
	// Arguments are the call's arguments, a JSON object, exactly as
	// intercepted (nil means {}). They are what the reviewer sees; the
	// function run must use these and no others.
	Arguments json.RawMessage
	// AttemptKey tells deliberate attempts of the same call apart (the
	// agent's tool-call ID, say). The same tool, arguments and attempt key
	// on the same instance are the same request: running it again finds
	// the earlier outcome instead of asking again. Use a new attempt key
	// for a new attempt (after a denial, an expiry, or lapsed permission).
	AttemptKey string
	// IdempotencyKey, when set, is used instead of the derived key.
	IdempotencyKey string
	// Timeout is the decision window asked (default: the gate's).
	Timeout string
	// AgentReasoning is the agent's claim about why; shown as a claim.
	AgentReasoning string
	// Context is what the adapter observed, a JSON object, or nil.
	Context json.RawMessage
	// Preview and Reversibility are the adapter's claims about the call
	// (CreateRequestInput), shown to reviewers as such.
	Preview       *airlock.Preview
	Reversibility string
	// OnPending, when set, is called while the request waits for a
	// decision: once when it is first seen pending, then after each poll.
	OnPending func(*ApprovalRequest)
}

// Key returns the call's idempotency key: IdempotencyKey when set, else a
// hash of the instance, the tool, the canonical arguments and the attempt
// key. Changed arguments give a new key, and so a new request.
func (g *Gate) Key(call Call) (string, error) {
	if call.IdempotencyKey != "" {
		return call.IdempotencyKey, airlock.CheckIdempotencyKey(call.IdempotencyKey)
	}
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	canon, err := airlock.Canonical(args)
	if err != nil {
		return "", fmt.Errorf("airlock gate: arguments of %s: %w", call.Tool, err)
	}
	h := sha256.New()
	for _, part := range []string{"airlock-gate/v1", g.instance, call.Tool, string(canon), call.AttemptKey} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return "gate-" + hex.EncodeToString(h.Sum(nil)[:20]), nil
}

// ErrOutcomeUnknown marks a function's error as "whether the call took
// effect is unknown" (a connection lost mid-call, say): the gate reports
// unknown instead of failed. Wrap it: fmt.Errorf("…: %w", ErrOutcomeUnknown).
var ErrOutcomeUnknown = errors.New("outcome unknown")

// Outcome is what became of a call that was run.
type Outcome struct {
	// Request is the request as last seen.
	Request *ApprovalRequest
	// Status is succeeded, failed or unknown.
	Status airlock.ExecutionStatus
	// ReportErr is why the outcome could not be reported; the journal
	// keeps it, and Recover (or running the same call again) reports it.
	ReportErr error
}

// Run asks for approval of call and, once approved, runs fn at most once.
//
// It returns the outcome and nil when fn ran and succeeded; the outcome and
// a *ToolError wrapping fn's error when fn failed. When fn did not run it
// returns one of: *DeniedError (with the reviewer's note), *ExpiredError
// (nobody decided before the deadline), *CancelledError (the request was
// withdrawn, or ctx ended while waiting: the gate then cancels it),
// *LapsedError (approved, but permission to start ended before the call
// could start), *AlreadyExecutedError (this approval was used already,
// here or elsewhere), *InterruptedError (an earlier run of this call was
// interrupted by a crash; it was reported unknown and is not re-run), or
// an error reaching Airlock.
func (g *Gate) Run(ctx context.Context, call Call, fn func(context.Context) error) (*Outcome, error) {
	if fn == nil {
		return nil, errors.New("airlock gate: Run needs a function to run")
	}
	key, err := g.Key(call)
	if err != nil {
		return nil, err
	}
	unlock, err := g.lock(ctx, key)
	if err != nil {
		return nil, err
	}
	defer unlock()

	e, err := g.j.read(key)
	if err != nil {
		return nil, err
	}
	var r *ApprovalRequest
	if e.requestID != "" {
		// This call was asked before: the journal says how far it got.
		if r, err = g.c.GetRequest(ctx, e.requestID); err != nil {
			return nil, fmt.Errorf("airlock gate: read %s: %w", e.requestID, err)
		}
		if r, err = g.follow(ctx, r, call.OnPending); err != nil {
			return nil, err
		}
		if out, err, done := g.resume(ctx, e, r); done {
			return out, err
		}
	} else {
		timeout := call.Timeout
		if timeout == "" {
			timeout = g.timeout
		}
		in := CreateRequestInput{
			Tool: call.Tool, Arguments: call.Arguments, Timeout: timeout,
			AgentReasoning: call.AgentReasoning, Context: call.Context,
			Preview: call.Preview, Reversibility: call.Reversibility,
		}
		r, _, err = g.c.CreateRequest(ctx, g.instance, key, in)
		if err != nil && ctx.Err() != nil {
			// ctx ended while asking: the request may stand on the server
			// all the same. The same key finds it (or makes it), and it is
			// withdrawn, so nobody approves a call that will not run.
			return nil, g.withdrawAsked(ctx, key, in)
		}
		if err != nil {
			return nil, fmt.Errorf("airlock gate: ask for approval of %s: %w", call.Tool, err)
		}
		if err := airlock.CheckAsked(call.Tool, call.Arguments, r.ID, r.Tool, r.Arguments, r.PurgedAt != nil); err != nil {
			// Another request's answer approves nothing of this call.
			return nil, fmt.Errorf("airlock gate: ask for approval of %s: %w", call.Tool, err)
		}
		if err := g.j.append(key, recRequested, r.ID, key); err != nil {
			return nil, err
		}
	}
	if r.State == airlock.StatePending {
		if r, err = g.wait(ctx, r, call.OnPending); err != nil {
			return nil, err
		}
	}
	if r, err = g.follow(ctx, r, call.OnPending); err != nil {
		return nil, err
	}
	return g.execute(ctx, key, r, fn)
}

// follow returns, when the gate accepts edits and r was approved with
// changed arguments (denied, naming its replacement), the replacement,
// once decided; else r. The replacement is believed only when it says it
// was derived from r, for the same tool on the same instance.
func (g *Gate) follow(ctx context.Context, r *ApprovalRequest, onPending func(*ApprovalRequest)) (*ApprovalRequest, error) {
	if !g.edits || r.State != airlock.StateDenied || r.Decision == nil || r.Decision.ReplacedBy == "" {
		return r, nil
	}
	id := r.Decision.ReplacedBy
	n, err := g.c.GetRequest(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("airlock gate: read the edited request %s that replaced %s: %w", id, r.ID, err)
	}
	if n.ID != id || n.DerivedFrom != r.ID || n.Tool != r.Tool || n.InstanceID != r.InstanceID {
		return nil, fmt.Errorf("airlock gate: request %s names %s as its edited replacement, but the server's answer is not an edit of it (id %q, derived_from %q, tool %q); nothing runs",
			r.ID, id, n.ID, n.DerivedFrom, n.Tool)
	}
	if n.State == airlock.StatePending {
		// An edit of a request needing several approvals: the editor's
		// vote is in, the others' are still to come.
		return g.wait(ctx, n, onPending)
	}
	return n, nil
}

// wait waits for a decision. When ctx ends first, it withdraws the request,
// so nobody approves a call that will not run.
func (g *Gate) wait(ctx context.Context, r *ApprovalRequest, onPending func(*ApprovalRequest)) (*ApprovalRequest, error) {
	if onPending != nil {
		onPending(r)
	}
	got, err := g.c.WaitRequest(ctx, r.ID, &WaitOptions{PollWait: g.poll, OnPending: onPending})
	if err == nil {
		return got, nil
	}
	if ctx.Err() == nil {
		return nil, fmt.Errorf("airlock gate: wait for a decision on %s: %w", r.ID, err)
	}
	cctx, cancel := withdrawContext(ctx)
	defer cancel()
	return nil, g.withdraw(cctx, r, ctx.Err())
}

// withdrawContext is the context a withdrawal runs in once the caller's
// ctx has ended: ctx's values, no cancellation, 15 seconds.
func withdrawContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
}

// withdraw cancels r for a caller whose context ended with cause, and
// returns the abandoned call's *CancelledError.
func (g *Gate) withdraw(ctx context.Context, r *ApprovalRequest, cause error) error {
	ce := &CancelledError{Request: r, Abandoned: true, Err: cause}
	if cr, err := g.c.CancelRequest(ctx, r.ID); err == nil {
		ce.Request = cr
	} else if !IsCode(err, airlock.CodeNotPending, airlock.CodeDeadlinePassed) {
		ce.CancelErr = err
	}
	return ce
}

// withdrawAsked withdraws a request whose creation ctx cut short: the
// server may have made it without the answer arriving. Asking again with
// the same key returns it, or makes it when the first ask never arrived,
// and either way it is cancelled at once.
func (g *Gate) withdrawAsked(ctx context.Context, key string, in CreateRequestInput) error {
	cctx, cancel := withdrawContext(ctx)
	defer cancel()
	r, _, err := g.c.CreateRequest(cctx, g.instance, key, in)
	if err != nil {
		return &CancelledError{Request: &ApprovalRequest{Tool: in.Tool}, Abandoned: true, Err: ctx.Err(), CancelErr: err}
	}
	if r.State != airlock.StatePending {
		return &CancelledError{Request: r, Abandoned: true, Err: ctx.Err()}
	}
	return g.withdraw(cctx, r, ctx.Err())
}

// resume handles a call the journal has seen. done is false when the call
// may go on as if new (its claim never reached the server).
func (g *Gate) resume(ctx context.Context, e entry, r *ApprovalRequest) (*Outcome, error, bool) {
	switch {
	case e.finished != "":
		out := &Outcome{Request: r, Status: e.finished}
		if !e.reported {
			out.Request, out.ReportErr = g.report(ctx, e.key, r, e.finished, "outcome recorded before the gate restarted")
		}
		return out, &AlreadyExecutedError{Request: out.Request, Status: e.finished, Here: true}, true
	case e.claimed:
		return g.interrupted(ctx, e.key, r, true)
	case e.claiming:
		if r.Execution == nil {
			return nil, nil, false // the claim never landed
		}
		return g.interrupted(ctx, e.key, r, false)
	}
	return nil, nil, false
}

// interrupted reports unknown for a run a crash cut short (started), or
// whose claim answer was lost (not started here, but the claim may have
// been this gate's), and never runs it again.
func (g *Gate) interrupted(ctx context.Context, key string, r *ApprovalRequest, started bool) (*Outcome, error, bool) {
	detail := "the gate stopped while the call was running; it was not run again"
	if !started {
		detail = "the gate lost the answer to its claim (crash or network); the call was not started here and is not run again"
	}
	out := &Outcome{Request: r, Status: airlock.ExecUnknown}
	if err := g.j.append(key, recFinished, r.ID, string(airlock.ExecUnknown)); err != nil {
		return out, err, true
	}
	out.Request, out.ReportErr = g.report(ctx, key, r, airlock.ExecUnknown, detail)
	return out, &InterruptedError{Request: out.Request, Started: started}, true
}

// execute claims and runs an approved call, or says why it does not run.
func (g *Gate) execute(ctx context.Context, key string, r *ApprovalRequest, fn func(context.Context) error) (*Outcome, error) {
	switch r.State {
	case airlock.StateDenied:
		return nil, &DeniedError{Request: r}
	case airlock.StateExpired:
		return nil, &ExpiredError{Request: r}
	case airlock.StateCancelled:
		return nil, &CancelledError{Request: r}
	case airlock.StateApproved:
	default:
		return nil, fmt.Errorf("airlock gate: request %s is %s, not terminal", r.ID, r.State)
	}
	if r.Execution != nil {
		return nil, &AlreadyExecutedError{Request: r, Status: r.Execution.Status}
	}
	expires, ok := r.ExpiresAt()
	if !ok {
		return nil, fmt.Errorf("airlock gate: approved request %s has no expires_at", r.ID)
	}
	if !g.now().Before(expires) {
		return nil, &LapsedError{Request: r}
	}

	claimed, out, err := g.claim(ctx, key, r)
	if err != nil {
		return out, err
	}
	r = claimed
	if err := g.j.append(key, recClaimed, r.ID); err != nil {
		// Without the record a crash during the run would go unnoticed;
		// do not start.
		out := &Outcome{Request: r, Status: airlock.ExecFailed}
		out.Request, out.ReportErr = g.report(ctx, key, r, airlock.ExecFailed, "not started: the gate could not write its journal")
		return out, fmt.Errorf("airlock gate: not started: %w", err)
	}
	// Immediately before starting: permission to start ends at expires_at.
	if !g.now().Before(expires) {
		if err := g.j.append(key, recFinished, r.ID, string(airlock.ExecFailed)); err != nil {
			return nil, err
		}
		out := &Outcome{Request: r, Status: airlock.ExecFailed}
		out.Request, out.ReportErr = g.report(ctx, key, r, airlock.ExecFailed,
			"not started: permission to start ended at "+expires.UTC().Format(time.RFC3339Nano)+" before the call could start")
		return out, &LapsedError{Request: r, Claimed: true}
	}

	runCtx := context.WithValue(ctx, argumentsKey{}, r.Arguments)
	if r.Execution != nil && r.Execution.ApprovalToken != "" {
		runCtx = context.WithValue(runCtx, approvalTokenKey{}, r.Execution.ApprovalToken)
	}
	panicked, pv, runErr := runGuarded(runCtx, fn)
	status := airlock.ExecSucceeded
	detail := ""
	switch {
	case panicked:
		// The function did not end cleanly: what it did is unknown.
		if err := g.j.append(key, recFinished, r.ID, string(airlock.ExecUnknown)); err == nil {
			g.report(ctx, key, r, airlock.ExecUnknown, fmt.Sprintf("the function panicked: %v", pv))
		}
		panic(pv)
	case runErr == nil:
	case errors.Is(runErr, ErrOutcomeUnknown):
		status, detail = airlock.ExecUnknown, runErr.Error()
	default:
		status, detail = airlock.ExecFailed, runErr.Error()
	}
	out = &Outcome{Request: r, Status: status}
	if err := g.j.append(key, recFinished, r.ID, string(status)); err != nil {
		out.ReportErr = err
	} else {
		out.Request, out.ReportErr = g.report(ctx, key, r, status, detail)
	}
	if runErr != nil {
		return out, &ToolError{Request: out.Request, Status: status, Err: runErr}
	}
	return out, nil
}

// claim claims the execution. The claim is journaled first; when its
// answer is lost, the request is read to learn whether it landed: if not,
// the claim is sent again; if so, nobody can tell whether it was this
// gate's, so the call does not start and is reported unknown.
func (g *Gate) claim(ctx context.Context, key string, r *ApprovalRequest) (*ApprovalRequest, *Outcome, error) {
	if err := g.j.append(key, recClaiming, r.ID); err != nil {
		return nil, nil, err
	}
	var lastErr error
	for attempt := 0; attempt < g.c.retry.Attempts; attempt++ {
		if attempt > 0 {
			if err := ctxwait.Sleep(ctx, g.c.retry.backoff(attempt-1)); err != nil {
				break
			}
		}
		claimed, err := g.c.ClaimExecution(ctx, r.ID)
		if err == nil {
			return claimed, nil, nil
		}
		var ae *Error
		if errors.As(err, &ae) && ae.Code != "" && ae.Code != airlock.CodeRateLimited && ae.Code != airlock.CodeInternal &&
			ae.Code != airlock.CodeUnavailable {
			if jerr := g.j.append(key, recRefused, r.ID, string(ae.Code)); jerr != nil {
				return nil, nil, jerr
			}
			return nil, nil, g.refusal(ctx, r, ae)
		}
		lastErr = err
		// No answer: did the claim land?
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		now, rerr := g.c.GetRequest(rctx, r.ID)
		cancel()
		if rerr != nil {
			return nil, nil, fmt.Errorf("airlock gate: claim %s: %w; and reading it back: %v", r.ID, err, rerr)
		}
		if now.Execution != nil {
			out, ierr, _ := g.interrupted(ctx, key, now, false)
			return nil, out, ierr
		}
		if ctx.Err() != nil {
			break
		}
	}
	if jerr := g.j.append(key, recRefused, r.ID, "unsent"); jerr != nil {
		return nil, nil, jerr
	}
	if ctx.Err() != nil {
		return nil, nil, &CancelledError{Request: r, Abandoned: true, Err: ctx.Err()}
	}
	return nil, nil, fmt.Errorf("airlock gate: claim %s: %w", r.ID, lastErr)
}

// refusal turns a refused claim into the gate's outcome error.
func (g *Gate) refusal(ctx context.Context, r *ApprovalRequest, ae *Error) error {
	switch ae.Code {
	case airlock.CodeAlreadyExecuted:
		status := airlock.ExecClaimed
		if now, err := g.c.GetRequest(ctx, r.ID); err == nil && now.Execution != nil {
			r, status = now, now.Execution.Status
		}
		return &AlreadyExecutedError{Request: r, Status: status}
	case airlock.CodeApprovalExpired:
		return &LapsedError{Request: r}
	}
	return fmt.Errorf("airlock gate: claim %s: %w", r.ID, ae)
}

// report sends the outcome (even when ctx has ended: the call ran) and
// journals that the server has it.
// It returns the request as the server answered, or r when it could not.
func (g *Gate) report(ctx context.Context, key string, r *ApprovalRequest, status airlock.ExecutionStatus, detail string) (*ApprovalRequest, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if len(detail) > airlock.MaxDetailLen {
		detail = strings.ToValidUTF8(detail[:airlock.MaxDetailLen-3], "") + "..."
	}
	got, err := g.c.ReportExecution(rctx, r.ID, status, detail)
	if err != nil {
		return r, fmt.Errorf("airlock gate: report %s for %s: %w", status, r.ID, err)
	}
	return got, g.j.append(key, recReported, r.ID, string(status))
}

// runGuarded runs fn and catches a panic, so the gate can record an
// unknown outcome before carrying the panic on.
func runGuarded(ctx context.Context, fn func(context.Context) error) (panicked bool, pv any, err error) {
	defer func() {
		if v := recover(); v != nil {
			panicked, pv, err = true, v, nil
		}
	}()
	return false, nil, fn(ctx)
}

// Recovered is one call that Recover settled.
type Recovered struct {
	RequestID string
	// Status is what was reported: unknown for an interrupted run, else
	// the outcome the journal had recorded.
	Status airlock.ExecutionStatus
	// Err is why it could not be reported; it stays in the journal.
	Err error
}

// Recover settles what an earlier process left in the journal: a run it
// started and did not finish is reported unknown (never run again); an
// outcome it recorded but did not report is reported. Call it at start.
func (g *Gate) Recover(ctx context.Context) ([]Recovered, error) {
	es, err := g.j.entries()
	if err != nil {
		return nil, err
	}
	var out []Recovered
	for _, e := range es {
		if e.settled() || e.requestID == "" {
			continue
		}
		rec, ok := g.recoverOne(ctx, e)
		if ok {
			out = append(out, rec)
		}
	}
	return out, nil
}

func (g *Gate) recoverOne(ctx context.Context, e entry) (Recovered, bool) {
	unlock, err := g.lock(ctx, e.key)
	if err != nil {
		return Recovered{RequestID: e.requestID, Err: err}, true
	}
	defer unlock()
	e, err = g.j.read(e.key) // again, under the lock
	if err != nil {
		return Recovered{RequestID: e.requestID, Err: err}, true
	}
	if e.settled() {
		return Recovered{}, false
	}
	r, err := g.c.GetRequest(ctx, e.requestID)
	if err != nil {
		return Recovered{RequestID: e.requestID, Err: err}, true
	}
	if e.claiming || e.claimed || e.finished != "" {
		// What was claimed, if anything, is the edited replacement when
		// the gate accepts edits; it was approved before any claim, so
		// following it waits for nothing.
		if r, err = g.follow(ctx, r, nil); err != nil {
			return Recovered{RequestID: e.requestID, Err: err}, true
		}
	}
	out, rerr, done := g.resume(ctx, e, r)
	if !done {
		// A claim that never landed: nothing ran, nothing to report.
		if err := g.j.append(e.key, recRefused, r.ID, "unsent"); err != nil {
			return Recovered{RequestID: r.ID, Err: err}, true
		}
		return Recovered{}, false
	}
	rec := Recovered{RequestID: r.ID}
	if out != nil {
		rec.Status, rec.Err = out.Status, out.ReportErr
	} else {
		rec.Err = rerr
	}
	return rec, true
}

// Outstanding counts the journal's calls whose outcome the server does not
// have yet (Recover settles them).
func (g *Gate) Outstanding() (int, error) {
	es, err := g.j.entries()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range es {
		if !e.settled() {
			n++
		}
	}
	return n, nil
}

// keyLock serializes runs of one call within a process: a second run of
// the same call waits for the first, then finds its outcome in the journal.
type keyLock struct {
	sem  chan struct{} // holds one token while locked
	refs int
}

// lock takes the in-process lock of key, or gives up when ctx ends, and
// returns its release.
func (g *Gate) lock(ctx context.Context, key string) (func(), error) {
	g.mu.Lock()
	l := g.locks[key]
	if l == nil {
		l = &keyLock{sem: make(chan struct{}, 1)}
		g.locks[key] = l
	}
	l.refs++
	g.mu.Unlock()
	release := func() {
		g.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(g.locks, key)
		}
		g.mu.Unlock()
	}
	select {
	case l.sem <- struct{}{}:
		return func() { <-l.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("airlock gate: waiting for another run of the same call: %w", ctx.Err())
	}
}

// approvalTokenKey keys the approval token in the context Run hands fn.
type approvalTokenKey struct{}

// ApprovalTokenFrom returns the approval token of the call Run is running,
// from the context it hands fn: the proof, signed by Airlock, that this
// call was approved (docs/tokens.md). Pass it to the tool server that
// checks it. It is "" outside such a run, or when the server signed none.
func ApprovalTokenFrom(ctx context.Context) string {
	token, _ := ctx.Value(approvalTokenKey{}).(string)
	return token
}

// argumentsKey keys the approved arguments in the context Run hands fn.
type argumentsKey struct{}

// ArgumentsFrom returns the arguments of the call Run is running, from
// the context it hands fn: exactly those approved. They are the call's
// own unless the gate accepts edits (GateConfig.AcceptEdits) and a
// reviewer approved changed ones; a function run by a gate that accepts
// edits must take its arguments from here. Nil outside such a run.
func ArgumentsFrom(ctx context.Context) json.RawMessage {
	args, _ := ctx.Value(argumentsKey{}).(json.RawMessage)
	return args
}

// Do is Run for a function with a result: it returns fn's result when the
// call ran and succeeded, and Run's outcome and error otherwise.
func Do[T any](ctx context.Context, g *Gate, call Call, fn func(context.Context) (T, error)) (T, *Outcome, error) {
	var result T
	out, err := g.Run(ctx, call, func(ctx context.Context) error {
		var err error
		result, err = fn(ctx)
		return err
	})
	return result, out, err
}
