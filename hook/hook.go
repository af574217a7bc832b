// Package hook puts Airlock's approval in front of the coding agents people
// run: Claude Code (PreToolUse, PostToolUse and SessionEnd hooks), Codex
// (PermissionRequest) and Gemini CLI (BeforeTool). It reads each agent's
// documented hook payload, asks Airlock through a Backend, and writes the
// agent's documented answer (docs/integrations/).
//
// The rule every path keeps: the answer is "allow" only after a reviewer
// (or a policy or grant) approved the exact call and this hook claimed its
// one execution attempt. A denial is "deny" with the reviewer's note;
// anything else (no decision within the wait, expiry, cancellation, an
// unreachable or failing server, bad input) is the configured fallback,
// "ask" or "deny", never "allow".
//
// The package imports only the domain. The command-line hook gives it a
// Backend over the REST client; the server's HTTP hook endpoint gives it one
// over the provider.
package hook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ctxwait"
)

// Verdict is the hook's answer to the agent.
type Verdict string

// The verdicts. Ask hands the call back to the agent's own permission
// flow (its prompt in the terminal), which is what "no decision" means.
const (
	Allow Verdict = "allow"
	Deny  Verdict = "deny"
	Ask   Verdict = "ask"
)

// ParseFallback reads an --on-timeout value: ask or deny. Allow is refused:
// no failure may let a call run.
func ParseFallback(s string) (Verdict, error) {
	switch Verdict(s) {
	case Ask, Deny:
		return Verdict(s), nil
	case Allow:
		return "", errors.New("--on-timeout allow is refused: no failure may let a call run; use ask or deny")
	}
	return "", fmt.Errorf("--on-timeout must be ask or deny, not %q", s)
}

// Answer is what the hook tells the agent.
type Answer struct {
	Verdict Verdict
	// Reason is shown to the agent (deny) or to the person (ask).
	Reason string
	// RequestID is the approval request this answer is about, when there
	// is one.
	RequestID string
	// UpdatedInput, with Allow, is the input the agent must run the tool
	// with instead of its own: the arguments a reviewer approved with
	// changes (docs/protocol.md, "Edits"). Nil for every other answer.
	UpdatedInput json.RawMessage
}

// Call is one intercepted tool call, as the agent described it.
type Call struct {
	// Agent names the agent ("claude-code", "codex", "gemini"); it is part
	// of the instance name and the idempotency key.
	Agent string
	// SessionID is the agent's session: one Airlock instance each.
	SessionID string
	// Tool and Arguments are exactly the agent's tool name and input.
	Tool      string
	Arguments json.RawMessage
	// Context is what the hook observed, a JSON object.
	Context json.RawMessage
	// Key is the idempotency key: a retried hook sends the same one and
	// finds the same request.
	Key string
	// AgentReasoning is why the agent says it needs the call, when it
	// says (Codex's justification): its claim, shown to reviewers as such.
	AgentReasoning string
}

// Backend is the part of Airlock the hook talks to. The errors are the
// domain's (*airlock.Error codes), so airlock.ErrorCode tells them apart.
type Backend interface {
	// Instances lists the caller's own instances.
	Instances(ctx context.Context) ([]airlock.Instance, error)
	// RegisterInstance registers an instance.
	RegisterInstance(ctx context.Context, in airlock.InstanceInput) (airlock.Instance, error)
	// DeleteInstance deletes an instance, cancelling its pending requests,
	// and says how many it cancelled.
	DeleteInstance(ctx context.Context, id string) (int, error)
	// CreateRequest creates a request, or replays the one with key.
	CreateRequest(ctx context.Context, instanceID, key string, in airlock.CreateRequestInput) (airlock.Request, error)
	// Await reads a request, holding the answer until it is terminal or
	// wait has passed.
	Await(ctx context.Context, id string, wait time.Duration) (airlock.Request, error)
	// Cancel withdraws a pending request.
	Cancel(ctx context.Context, id string) (airlock.Request, error)
	// Claim claims an approved request's one execution attempt.
	Claim(ctx context.Context, id string) (airlock.Request, error)
	// Report records the claimed execution's outcome.
	Report(ctx context.Context, id string, in airlock.ReportInput) (airlock.Request, error)
	// Requests lists the caller's requests of one instance and tool in one
	// state, newest first (one page is enough: an instance is one session).
	Requests(ctx context.Context, instanceID, tool string, state airlock.State) ([]airlock.Request, error)
}

// InstanceCache remembers which instance serves a session, so that a hook
// process does not list instances on every call. It may forget anything;
// nil means no cache.
type InstanceCache interface {
	Get(session string) (id string, ok bool)
	Put(session, id string)
	Forget(session string)
}

// Gate asks Airlock about intercepted calls.
type Gate struct {
	Backend Backend
	// Wait is how long the hook waits for a decision; it is also the
	// request's window, so a request nobody waits for any more expires.
	Wait time.Duration
	// Fallback answers every case without a decision: Ask or Deny.
	Fallback Verdict
	// Cache, when set, remembers session instances.
	Cache InstanceCache
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Cleanup bounds the calls made after the wait ended (cancelling the
	// request nobody waits for); default 3s.
	Cleanup time.Duration
	// AcceptEdits lets a call a reviewer approved with changed arguments
	// run with those arguments, for agents whose hook answer can carry an
	// updated input (Claude Code): the hook claims the replacement and
	// answers allow with UpdatedInput. Otherwise, and for other agents,
	// such a call is denied, naming the replacement.
	AcceptEdits bool
}

// EditsAgents are the agents whose hook answer can carry an updated
// input, so that an edited call can run in place of theirs.
var EditsAgents = []string{"claude-code"}

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// fallback is the answer for every case without a decision.
func (g *Gate) fallback(requestID, format string, args ...any) Answer {
	v := g.Fallback
	if v != Deny {
		v = Ask
	}
	return Answer{Verdict: v, RequestID: requestID, Reason: "Airlock: " + fmt.Sprintf(format, args...)}
}

// FallbackAnswer is the answer for a case without a decision that
// happened before the gate could ask (bad input, a refused token): the
// fallback verdict with reason.
func (g *Gate) FallbackAnswer(reason string) Answer { return g.fallback("", "%s", reason) }

// Decide asks Airlock whether call may run and waits up to Wait for the
// answer. It never returns Allow unless the request was approved and this
// call claimed its execution.
func (g *Gate) Decide(ctx context.Context, call Call) Answer {
	if g.Wait <= 0 {
		return g.fallback("", "the hook has no wait configured")
	}
	deadline := g.now().Add(g.Wait)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	in := airlock.CreateRequestInput{
		Tool: call.Tool, Arguments: call.Arguments, Timeout: windowOf(g.Wait), Context: call.Context,
		AgentReasoning: call.AgentReasoning,
	}
	r, err := g.create(wctx, call, in)
	if err != nil {
		return g.fallback("", "could not ask for approval (%s); %s", describe(err), g.fallbackWord())
	}
	if err := airlock.CheckAsked(call.Tool, call.Arguments, r.ID, r.Tool, r.Arguments, r.PurgedAt != nil); err != nil {
		// Another request's answer says nothing about this call.
		return g.fallback("", "the server's answer to the request cannot be believed (%v); %s", err, g.fallbackWord())
	}
	var backoff time.Duration
	for r.State == airlock.StatePending {
		left := deadline.Sub(g.now())
		if left <= 0 || wctx.Err() != nil {
			break
		}
		next, err := g.Backend.Await(wctx, r.ID, left)
		if err != nil {
			if wctx.Err() != nil {
				break
			}
			if !transient(err) {
				return g.fallback(r.ID, "lost request %s while waiting (%s); %s", r.ID, describe(err), g.fallbackWord())
			}
			// A server restarting, a replica failing over: keep waiting
			// until the wait ends, a little later each time.
			if pause(wctx, &backoff) != nil {
				break
			}
			continue
		}
		backoff = 0
		if next.ID != r.ID {
			return g.fallback(r.ID, "the server answered about request %q while request %s was awaited; %s", next.ID, r.ID, g.fallbackWord())
		}
		r = next
	}
	if r.State == airlock.StatePending {
		r = g.giveUp(ctx, r)
		if r.State == airlock.StatePending || r.State == airlock.StateCancelled {
			return g.fallback(r.ID, "no decision on request %s within %s; %s", r.ID, g.Wait, g.fallbackWord())
		}
	}
	if r.State == airlock.StateDenied && r.ReplacedBy != "" {
		return g.edited(ctx, wctx, call, r, deadline)
	}
	return g.conclude(ctx, r)
}

// Ask creates the request for call, or finds the one its key made, without
// waiting for a decision: for a caller that follows the request itself
// (an MCP task, docs/mcp.md "Tasks") and answers with Conclude once it is
// terminal. The request must be this call's (airlock.CheckAsked).
func (g *Gate) Ask(ctx context.Context, call Call) (airlock.Request, error) {
	if g.Wait <= 0 {
		return airlock.Request{}, errors.New("hook: the gate has no wait configured")
	}
	r, err := g.create(ctx, call, airlock.CreateRequestInput{
		Tool: call.Tool, Arguments: call.Arguments, Timeout: windowOf(g.Wait), Context: call.Context,
		AgentReasoning: call.AgentReasoning,
	})
	if err != nil {
		return airlock.Request{}, err
	}
	if err := airlock.CheckAsked(call.Tool, call.Arguments, r.ID, r.Tool, r.Arguments, r.PurgedAt != nil); err != nil {
		return airlock.Request{}, err
	}
	return r, nil
}

// Conclude is the answer for request r, which Ask made: for an approval,
// allow once its one execution is claimed now; the fallback for a request
// still pending, or one not approved.
func (g *Gate) Conclude(ctx context.Context, r airlock.Request) Answer {
	if r.State == airlock.StatePending {
		return g.fallback(r.ID, "request %s is still pending; %s", r.ID, g.fallbackWord())
	}
	return g.conclude(ctx, r)
}

// edited answers a call a reviewer approved with changed arguments: r is
// denied, replaced by the request with them. With AcceptEdits, for an
// agent that can take an updated input, the replacement is awaited (it
// waits for more votes when it needs several), claimed, and the answer is
// allow with its arguments as UpdatedInput; otherwise deny, naming it.
// The replacement is believed only when it says it was derived from r,
// for the same tool on the same instance.
func (g *Gate) edited(ctx, wctx context.Context, call Call, r airlock.Request, deadline time.Time) Answer {
	id := r.ReplacedBy
	if !g.AcceptEdits || !slices.Contains(EditsAgents, call.Agent) {
		why := "this hook runs edited calls only with --accept-edits"
		if g.AcceptEdits {
			why = call.Agent + "'s hook answer cannot carry changed arguments"
		}
		return Answer{Verdict: Deny, RequestID: r.ID, Reason: airlock.ApprovedWithChanges + " in Airlock" + by(r) + " as request " + id +
			noteOf(r) + "; " + why + ", so this call (request " + r.ID + ") is denied: run the edited call yourself if you accept it"}
	}
	n, err := g.Backend.Await(wctx, id, max(deadline.Sub(g.now()), time.Millisecond))
	for err == nil && n.State == airlock.StatePending && wctx.Err() == nil && deadline.After(g.now()) {
		n, err = g.Backend.Await(wctx, id, deadline.Sub(g.now()))
	}
	if err != nil {
		return g.fallback(r.ID, "request %s was approved with changes as request %s, which could not be read (%s); %s", r.ID, id, describe(err), g.fallbackWord())
	}
	if n.ID != id || n.DerivedFrom != r.ID || n.Tool != r.Tool || n.InstanceID != r.InstanceID {
		return g.fallback(r.ID, "request %s names %s as its edited replacement, but the server's answer is not an edit of it; %s", r.ID, id, g.fallbackWord())
	}
	if n.State == airlock.StatePending {
		n = g.giveUp(ctx, n)
		if n.State == airlock.StatePending || n.State == airlock.StateCancelled {
			return g.fallback(n.ID, "no decision on the edited request %s within %s; %s", n.ID, g.Wait, g.fallbackWord())
		}
	}
	a := g.conclude(ctx, n)
	if a.Verdict == Allow {
		a.UpdatedInput = n.Arguments
		a.Reason = airlock.ApprovedWithChanges + " in Airlock" + by(n) + noteOf(n) + " (request " + n.ID + ", edited from " + r.ID + "): the tool runs with the reviewer's arguments: " + clipText(string(n.Arguments), 2000)
	}
	return a
}

// conclude turns a terminal request into the answer, claiming an approval.
func (g *Gate) conclude(ctx context.Context, r airlock.Request) Answer {
	switch r.State {
	case airlock.StateApproved:
		if r.Execution != nil {
			// Claimed already: by an earlier run of this hook whose
			// answer was lost, or by someone else. Either way this
			// approval has been used.
			return g.fallback(r.ID, "request %s was approved but its one execution was already claimed; %s", r.ID, g.fallbackWord())
		}
		if ctx.Err() != nil {
			// The agent stopped the hook: nobody would run the call, so
			// its one execution is left unclaimed.
			return g.fallback(r.ID, "request %s was approved after the hook was stopped; %s", r.ID, g.fallbackWord())
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cleanup())
		defer cancel()
		c, err := g.Backend.Claim(cctx, r.ID)
		if err != nil {
			return g.fallback(r.ID, "request %s was approved but claiming its execution failed (%s); %s", r.ID, describe(err), g.fallbackWord())
		}
		// Allow only on what the claim's answer shows: this request,
		// approved, its execution claimed.
		if err := airlock.CheckClaimed(r.ID, c.ID, c.State, execStatus(c.Execution)); err != nil {
			return g.fallback(r.ID, "request %s was approved but the claim's answer cannot be believed (%v); %s", r.ID, err, g.fallbackWord())
		}
		return Answer{Verdict: Allow, RequestID: r.ID, Reason: "Approved in Airlock" + by(r) + noteOf(r) + " (request " + r.ID + ")"}
	case airlock.StateDenied:
		return Answer{Verdict: Deny, RequestID: r.ID, Reason: "Denied in Airlock" + by(r) + noteOf(r) + " (request " + r.ID + ")"}
	case airlock.StateExpired:
		return g.fallback(r.ID, "request %s expired without a decision; %s", r.ID, g.fallbackWord())
	case airlock.StateCancelled:
		return g.fallback(r.ID, "request %s was cancelled; %s", r.ID, g.fallbackWord())
	}
	return g.fallback(r.ID, "request %s is %s; %s", r.ID, r.State, g.fallbackWord())
}

// giveUp cancels a request nobody waits for any more, so a reviewer cannot
// approve a call the agent already settled another way. If a decision won
// the race, the request as it now is comes back.
func (g *Gate) giveUp(ctx context.Context, r airlock.Request) airlock.Request {
	// The wait may have ended because the agent stopped the hook; the
	// request is withdrawn all the same.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cleanup())
	defer cancel()
	c, err := g.Backend.Cancel(cctx, r.ID)
	if err == nil {
		if c.ID != r.ID {
			return r
		}
		return c
	}
	if airlock.ErrorCode(err) == airlock.CodeNotPending {
		if now, err := g.Backend.Await(cctx, r.ID, 0); err == nil && now.ID == r.ID {
			return now
		}
	}
	return r
}

// execStatus is the status of an execution, "" for none.
func execStatus(e *airlock.Execution) airlock.ExecutionStatus {
	if e == nil {
		return ""
	}
	return e.Status
}

func (g *Gate) cleanup() time.Duration {
	if g.Cleanup > 0 {
		return g.Cleanup
	}
	return 3 * time.Second
}

func (g *Gate) fallbackWord() string {
	if g.Fallback == Deny {
		return "denying"
	}
	return "asking you instead"
}

// create creates (or replays) the request on the session's instance. An
// instance deleted meanwhile is found missing; it is resolved once more.
func (g *Gate) create(ctx context.Context, call Call, in airlock.CreateRequestInput) (airlock.Request, error) {
	for attempt := 0; ; attempt++ {
		id, err := g.instance(ctx, call.Agent, call.SessionID)
		if err != nil {
			return airlock.Request{}, err
		}
		r, err := g.Backend.CreateRequest(ctx, id, call.Key, in)
		if err != nil && airlock.ErrorCode(err) == airlock.CodeNotFound && attempt == 0 {
			if g.Cache != nil {
				g.Cache.Forget(cacheKey(call.Agent, call.SessionID))
			}
			continue
		}
		return r, err
	}
}

// InstanceName is the name of the instance that serves an agent's session;
// reviewers see it, and a hook finds the instance by it.
func InstanceName(agent, session string) string { return agent + " session " + session }

func cacheKey(agent, session string) string { return agent + "\x00" + session }

// instance returns the session's instance, registering it on first use.
// Two hooks of one session may register at once (an agent runs tool calls
// in parallel); both then settle on the oldest instance of that name and
// the other deletes its own, still empty, one.
func (g *Gate) instance(ctx context.Context, agent, session string) (string, error) {
	ck := cacheKey(agent, session)
	if g.Cache != nil {
		if id, ok := g.Cache.Get(ck); ok {
			return id, nil
		}
	}
	name := InstanceName(agent, session)
	list, err := g.Backend.Instances(ctx)
	if err != nil {
		return "", err
	}
	if in, ok := oldest(list, name); ok {
		g.remember(ck, in.ID)
		return in.ID, nil
	}
	meta, _ := json.Marshal(map[string]string{"agent": agent, "session_id": session})
	mine, err := g.Backend.RegisterInstance(ctx, airlock.InstanceInput{Name: name, Metadata: meta})
	if err != nil {
		return "", err
	}
	if list, err = g.Backend.Instances(ctx); err == nil {
		if in, ok := oldest(list, name); ok && in.ID != mine.ID {
			if _, err := g.Backend.DeleteInstance(ctx, mine.ID); err == nil {
				g.remember(ck, in.ID)
				return in.ID, nil
			}
		}
	}
	g.remember(ck, mine.ID)
	return mine.ID, nil
}

func (g *Gate) remember(key, id string) {
	if g.Cache != nil {
		g.Cache.Put(key, id)
	}
}

// oldest returns the oldest open instance called name.
func oldest(list []airlock.Instance, name string) (airlock.Instance, bool) {
	var found []airlock.Instance
	for _, in := range list {
		if in.Name == name && in.ClosedAt == nil {
			found = append(found, in)
		}
	}
	if len(found) == 0 {
		return airlock.Instance{}, false
	}
	slices.SortFunc(found, func(a, b airlock.Instance) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return found[0], true
}

// EndSession deletes every instance of the session, cancelling what is
// still pending, and says how many requests it cancelled.
func (g *Gate) EndSession(ctx context.Context, agent, session string) (int, error) {
	if g.Cache != nil {
		g.Cache.Forget(cacheKey(agent, session))
	}
	list, err := g.Backend.Instances(ctx)
	if err != nil {
		return 0, err
	}
	name := InstanceName(agent, session)
	cancelled := 0
	for _, in := range list {
		if in.Name != name {
			continue
		}
		n, err := g.Backend.DeleteInstance(ctx, in.ID)
		if err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
			return cancelled, err
		}
		cancelled += n
	}
	return cancelled, nil
}

// Report records how the call the agent ran turned out, on the request
// this hook claimed for it: the approved request of the session and tool
// whose context names toolUseID. A call Airlock did not approve (the agent
// asked its person instead) has nothing to report on; found is then false.
func (g *Gate) Report(ctx context.Context, agent, session, tool, toolUseID string, in airlock.ReportInput) (found bool, err error) {
	list, err := g.Backend.Instances(ctx)
	if err != nil {
		return false, err
	}
	inst, ok := oldest(list, InstanceName(agent, session))
	if !ok {
		return false, nil
	}
	reqs, err := g.Backend.Requests(ctx, inst.ID, tool, airlock.StateApproved)
	if err != nil {
		return false, err
	}
	for _, r := range reqs {
		var c struct {
			ToolUseID string `json:"tool_use_id"`
		}
		if json.Unmarshal(r.Context, &c) != nil || c.ToolUseID != toolUseID || r.Execution == nil {
			continue
		}
		if r.Execution.Status != airlock.ExecClaimed {
			return true, nil // reported already (a retried hook)
		}
		_, err := g.Backend.Report(ctx, r.ID, in)
		return true, err
	}
	return false, nil
}

// Key returns an idempotency key for an agent's call from parts that stay
// the same when the agent retries the hook.
func Key(agent string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return agent + ":" + hex.EncodeToString(h.Sum(nil))
}

// windowOf is the request's timeout for a wait: whole seconds, at least one.
func windowOf(d time.Duration) string {
	s := (d + time.Second - 1) / time.Second
	if s < 1 {
		s = 1
	}
	return fmt.Sprintf("%ds", s)
}

func by(r airlock.Request) string {
	if r.Decision == nil || r.Decision.DecidedBy == "" {
		return ""
	}
	return " by " + r.Decision.DecidedBy
}

func noteOf(r airlock.Request) string {
	if r.Decision == nil || r.Decision.Note == "" {
		return ""
	}
	return ": " + r.Decision.Note
}

// transient reports whether err may pass by itself: no answer from the
// server (which the domain sees as internal), an unavailable store, a rate
// limit.
func transient(err error) bool {
	switch airlock.ErrorCode(err) {
	case airlock.CodeInternal, airlock.CodeUnavailable, airlock.CodeRateLimited:
		return true
	}
	return false
}

// pause waits a growing while (100ms doubling to 2s) or until ctx ends.
func pause(ctx context.Context, d *time.Duration) error {
	*d = min(max(2**d, 100*time.Millisecond), 2*time.Second)
	return ctxwait.Sleep(ctx, *d)
}

// describe words an error for the agent's person in a few words.
func describe(err error) string {
	var e *airlock.Error
	if errors.As(err, &e) {
		if e.Message != "" {
			return fmt.Sprintf("%s: %s", e.Code, e.Message)
		}
		return string(e.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the wait ended before the server answered"
	}
	return err.Error()
}

// clipText cuts s to at most n bytes, on a character boundary, marking
// the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
