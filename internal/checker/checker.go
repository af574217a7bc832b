// Package checker verifies recorded histories of concurrent operations on
// approval requests against the lifecycle rules of docs/protocol.md:
// exactly one terminal outcome per request, no approval at or after the
// deadline, at most one execution claim, every loser told which state won,
// and — with porcupine — that the whole history is linearizable against a
// sequential model of one request's lifecycle.
//
// Race tests record what each goroutine called, when, and what it got back
// (a Recorder does this), add the expiries the store recorded in its audit
// log (ExpiryOps), and hand the lot to Check. A checker that never fails
// proves nothing, so its own tests feed it seeded bad histories.
package checker

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/anishathalye/porcupine"
)

// Kind is the operation an Op records.
type Kind string

// The operations a history holds. Expire is the store's own transition
// (scheduler, lazy read, or a refused decision that settled the row); the
// others are calls a client made.
const (
	Create  Kind = "create"
	Approve Kind = "approve"
	Deny    Kind = "deny"
	Cancel  Kind = "cancel"
	Expire  Kind = "expire"
	Claim   Kind = "claim"
	Read    Kind = "read"
)

// target is the state a successful transition of kind k enters.
func (k Kind) target() airlock.State {
	switch k {
	case Approve:
		return airlock.StateApproved
	case Deny:
		return airlock.StateDenied
	case Cancel:
		return airlock.StateCancelled
	case Expire:
		return airlock.StateExpired
	}
	return ""
}

// Op is one operation of a history: who called what on which request, when
// the call started and returned, and what it returned. Times must all come
// from the clock the store judges deadlines by, since Check compares them
// with DeadlineAt.
type Op struct {
	Client    int
	Kind      Kind
	RequestID string
	Call      time.Time
	Return    time.Time

	// Code is the error code returned, "" on success.
	Code airlock.Code
	// State is, on success, the request's state after the call; on error,
	// the state the error names (airlock.Error.State).
	State airlock.State
	// Claimed reports, for reads, whether the execution was claimed.
	Claimed bool
	// DeadlineAt is the request's deadline, when the call returned the
	// request (always for a successful Create).
	DeadlineAt time.Time
	// DecidedAt is the recorded decision time of a successful transition.
	DecidedAt time.Time

	// Principal is, for a decision, who voted (the caller's principal);
	// for a create, the principal of the creating token, which never
	// votes.
	Principal string
	// Approvals is, when the call returned the request, how many
	// approvals it needs (0 or 1: one decision decides); ApprovedVotes
	// how many approving votes it holds after the call. With them a
	// decision on a request needing several approvals is a vote, and an
	// approval that leaves the request pending counted one.
	Approvals, ApprovedVotes int
}

// String describes the op for violation messages.
func (o Op) String() string {
	res := "ok " + string(o.State)
	if o.Code != "" {
		res = string(o.Code)
		if o.State != "" {
			res += " (" + string(o.State) + ")"
		}
	}
	return fmt.Sprintf("%s by client %d [%s → %s] → %s", o.Kind, o.Client,
		o.Call.Format("15:04:05.000000"), o.Return.Format("15:04:05.000000"), res)
}

// SetResult fills the op's result from what a service or store call
// returned.
func (o *Op) SetResult(r airlock.Request, err error) {
	o.Code = airlock.ErrorCode(err)
	if err != nil {
		var e *airlock.Error
		if errors.As(err, &e) {
			o.State = e.State
		}
		return
	}
	if o.RequestID == "" {
		o.RequestID = r.ID
	}
	o.State = r.State
	o.Claimed = r.Execution != nil
	o.DeadlineAt = r.DeadlineAt
	o.Approvals, o.ApprovedVotes = r.Approvals, r.ApprovedVotes()
	if r.Decision != nil {
		o.DecidedAt = r.Decision.DecidedAt
	}
}

// Recorder collects the ops of concurrent goroutines. Its zero value is
// ready to use; it is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Do times fn, records it as an op of kind on request id (for Create, the
// ID is taken from the returned request), and passes its results through.
func (rec *Recorder) Do(client int, kind Kind, id string, fn func() (airlock.Request, error)) (airlock.Request, error) {
	op := Op{Client: client, Kind: kind, RequestID: id, Call: time.Now()}
	r, err := fn()
	op.Return = time.Now()
	op.SetResult(r, err)
	rec.Add(op)
	return r, err
}

// Add records an op timed by the caller.
func (rec *Recorder) Add(ops ...Op) {
	rec.mu.Lock()
	rec.ops = append(rec.ops, ops...)
	rec.mu.Unlock()
}

// Ops returns a copy of the ops recorded so far.
func (rec *Recorder) Ops() []Op {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Op(nil), rec.ops...)
}

// ExpiryOps turns the request.expired events of a store's audit log into
// Expire ops. The store stamps an event with its now, read while it holds
// the write lock, so the expiry took effect no earlier than the event's
// time; it took effect before end, a time after every op of the history
// returned. The op spans that interval, which is all that is known.
func ExpiryOps(events []airlock.Event, end time.Time) []Op {
	var ops []Op
	for _, e := range events {
		if e.Type != airlock.EventRequestExpired {
			continue
		}
		ops = append(ops, Op{Client: -1, Kind: Expire, RequestID: e.RequestID, Call: e.At, Return: end,
			State: airlock.StateExpired})
	}
	return ops
}

// Rule names an invariant a history can break.
type Rule string

// The rules Check enforces.
const (
	// RuleOneOutcome: exactly one terminal outcome per request (at most one
	// while a history is incomplete).
	RuleOneOutcome Rule = "one terminal outcome"
	// RuleNoLateApproval: no approval recorded at or after deadline_at, nor
	// granted to a call that started at or after it.
	RuleNoLateApproval Rule = "no approval at or after the deadline"
	// RuleOneClaim: at most one successful execution claim, and only of an
	// approved request.
	RuleOneClaim Rule = "one execution claim"
	// RuleLoserNamesWinner: a refused transition names the state that won.
	RuleLoserNamesWinner Rule = "loser names the winner"
	// RuleExpectedErrors: only the refusals a race can produce; an internal
	// error (such as SQLITE_BUSY) surfacing to a caller breaks it.
	RuleExpectedErrors Rule = "only expected errors"
	// RuleLinearizable: the history is linearizable against the sequential
	// model of one request's lifecycle.
	RuleLinearizable Rule = "linearizable"
	// RuleQuorum: on a request needing N approvals, no principal's vote
	// counts twice, the creator's principal never counts, and an approval
	// decides only with N approving votes from distinct principals.
	RuleQuorum Rule = "quorum"
)

// Violation is one broken rule on one request.
type Violation struct {
	Rule      Rule
	RequestID string
	Detail    string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: request %s: %s", v.Rule, v.RequestID, v.Detail)
}

// Options tune Check.
type Options struct {
	// Complete says every request of the history has settled, so each must
	// have exactly one terminal outcome rather than at most one.
	Complete bool
	// Timeout bounds porcupine's search per request (default 10s); a
	// search that times out counts as a violation.
	Timeout time.Duration
}

// Report is what Check found.
type Report struct {
	Requests   int
	Ops        int
	Outcomes   map[airlock.State]int // winning terminal outcomes by state
	Claims     int                   // successful claims
	Violations []Violation
}

// Err returns nil when no rule was broken, or an error listing the
// violations (the first 20).
func (r Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d violations in %d requests, %d ops:", len(r.Violations), r.Requests, r.Ops)
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "\n  … and %d more", len(r.Violations)-20)
			break
		}
		b.WriteString("\n  " + v.String())
	}
	return fmt.Errorf("%s", b.String())
}

// Broke reports whether any violation of rule was found.
func (r Report) Broke(rule Rule) bool {
	for _, v := range r.Violations {
		if v.Rule == rule {
			return true
		}
	}
	return false
}

// expectedCodes are the refusals a race between legitimate calls produces.
var expectedCodes = map[Kind][]airlock.Code{
	Create: {airlock.CodeNotFound, airlock.CodeIdempotencyConflict},
	// forbidden: a second vote, or one by the creator's principal.
	Approve: {airlock.CodeNotPending, airlock.CodeDeadlinePassed, airlock.CodeForbidden},
	Deny:    {airlock.CodeNotPending, airlock.CodeDeadlinePassed, airlock.CodeForbidden},
	Cancel:  {airlock.CodeNotPending, airlock.CodeDeadlinePassed},
	Claim:   {airlock.CodeNotApproved, airlock.CodeAlreadyExecuted, airlock.CodeApprovalExpired},
}

// Check verifies a history. Ops may come in any order.
func Check(ops []Op, opts Options) Report {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	rep := Report{Ops: len(ops), Outcomes: map[airlock.State]int{}}
	byRequest := map[string][]Op{}
	var ids []string
	for _, o := range ops {
		if o.Code != "" && !expected(o) {
			rep.Violations = append(rep.Violations, Violation{RuleExpectedErrors, o.RequestID, o.String()})
		}
		if o.RequestID == "" {
			continue // a create that failed: no request to check
		}
		if _, ok := byRequest[o.RequestID]; !ok {
			ids = append(ids, o.RequestID)
		}
		byRequest[o.RequestID] = append(byRequest[o.RequestID], o)
	}
	sort.Strings(ids)
	rep.Requests = len(ids)
	for _, id := range ids {
		h := byRequest[id]
		sort.SliceStable(h, func(i, j int) bool { return h[i].Call.Before(h[j].Call) })
		rep.checkRequest(id, h, opts)
	}
	return rep
}

func expected(o Op) bool {
	for _, c := range expectedCodes[o.Kind] {
		if o.Code == c {
			return true
		}
	}
	return false
}

func (r *Report) add(rule Rule, id, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{rule, id, fmt.Sprintf(format, args...)})
}

// checkRequest applies every rule to the ops of one request.
func (r *Report) checkRequest(id string, h []Op, opts Options) {
	var (
		winners  []Op
		deadline time.Time
		claims   []Op
	)
	for _, o := range h {
		if deadline.IsZero() && !o.DeadlineAt.IsZero() {
			deadline = o.DeadlineAt
		}
		if o.Code != "" {
			continue
		}
		switch o.Kind {
		case Create:
			if o.State.Terminal() {
				winners = append(winners, o)
			}
		case Approve, Deny, Cancel, Expire:
			if o.State == airlock.StatePending {
				continue // a vote that did not decide
			}
			winners = append(winners, o)
		case Claim:
			claims = append(claims, o)
		}
	}

	// Exactly one terminal outcome.
	var won airlock.State
	switch {
	case len(winners) == 1:
		won = winners[0].State
		if winners[0].Kind != Create {
			won = winners[0].Kind.target()
		}
		r.Outcomes[won]++
	case len(winners) > 1:
		var names []string
		for _, w := range winners {
			names = append(names, w.String())
		}
		r.add(RuleOneOutcome, id, "%d terminal outcomes: %s", len(winners), strings.Join(names, "; "))
	case opts.Complete:
		r.add(RuleOneOutcome, id, "no terminal outcome recorded in a complete history")
	}

	// No approval at or after the deadline.
	for _, o := range winners {
		if o.Kind != Approve && !(o.Kind == Create && o.State == airlock.StateApproved) {
			continue
		}
		if o.Kind == Approve && deadline.IsZero() {
			r.add(RuleNoLateApproval, id, "approval with no known deadline: %s", o)
			continue
		}
		if o.Kind == Create {
			continue // decided by policy at creation, before any deadline
		}
		if !o.DecidedAt.IsZero() && !o.DecidedAt.Before(deadline) {
			r.add(RuleNoLateApproval, id, "approval recorded at %s, deadline %s: %s",
				o.DecidedAt.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano), o)
		}
		if !o.Call.Before(deadline) {
			r.add(RuleNoLateApproval, id, "approval granted to a call made at %s, at or after the deadline %s: %s",
				o.Call.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano), o)
		}
	}

	// One claim, of an approved request.
	r.Claims += len(claims)
	if len(claims) > 1 {
		var names []string
		for _, c := range claims {
			names = append(names, c.String())
		}
		r.add(RuleOneClaim, id, "%d successful claims: %s", len(claims), strings.Join(names, "; "))
	}
	if len(claims) > 0 && len(winners) == 1 && won != airlock.StateApproved {
		r.add(RuleOneClaim, id, "execution claimed although the request ended %s", won)
	}

	// Every loser names the state that won.
	for _, o := range h {
		switch {
		case o.Code == airlock.CodeNotPending || o.Code == airlock.CodeDeadlinePassed ||
			(o.Code == airlock.CodeNotApproved && o.State.Terminal()):
			switch {
			case len(winners) == 0:
				r.add(RuleLoserNamesWinner, id, "%s, but no terminal outcome was recorded", o)
			case len(winners) == 1 && o.State != won:
				r.add(RuleLoserNamesWinner, id, "%s, but the state that won is %s", o, won)
			}
			if o.Code == airlock.CodeDeadlinePassed && o.State != airlock.StateExpired {
				r.add(RuleLoserNamesWinner, id, "deadline_passed must name expired: %s", o)
			}
		case o.Code == airlock.CodeAlreadyExecuted && len(claims) == 0:
			r.add(RuleLoserNamesWinner, id, "%s, but no claim succeeded", o)
		case o.Code == airlock.CodeApprovalExpired && len(winners) == 1 && won != airlock.StateApproved:
			r.add(RuleLoserNamesWinner, id, "%s, but the request ended %s", o, won)
		}
	}

	r.checkQuorum(id, h, won, len(winners) == 1)

	// Linearizable against the sequential lifecycle.
	pops := make([]porcupine.Operation, 0, len(h))
	for _, o := range h {
		ret := o.Return
		if ret.Before(o.Call) {
			ret = o.Call
		}
		pops = append(pops, porcupine.Operation{
			ClientId: max(o.Client, 0),
			Input:    o.Kind,
			Call:     o.Call.UnixNano(),
			Output:   result{Code: o.Code, State: o.State, Claimed: o.Claimed, Approvals: o.Approvals, Votes: o.ApprovedVotes},
			Return:   ret.UnixNano(),
		})
	}
	switch porcupine.CheckOperationsTimeout(Model, pops, opts.Timeout) {
	case porcupine.Ok:
	case porcupine.Illegal:
		var lines []string
		for _, o := range h {
			lines = append(lines, o.String())
		}
		r.add(RuleLinearizable, id, "no sequential order explains: %s", strings.Join(lines, "; "))
	default:
		r.add(RuleLinearizable, id, "porcupine could not decide within %s", opts.Timeout)
	}
}

// checkQuorum applies RuleQuorum to the ops of one request: the votes that
// succeeded, by principal; the creator's principal among them; and, when
// the request needs several approvals and ended approved, that exactly
// that many distinct principals approved.
func (r *Report) checkQuorum(id string, h []Op, won airlock.State, decided bool) {
	need, creator := 0, ""
	for _, o := range h {
		if o.Kind == Create && o.Code == "" {
			need, creator = o.Approvals, o.Principal
		}
		if o.Approvals > need {
			need = o.Approvals
		}
	}
	if need <= 1 {
		return
	}
	counted := map[string]int{}
	approvers := map[string]bool{}
	for _, o := range h {
		if o.Code != "" || (o.Kind != Approve && o.Kind != Deny) {
			continue
		}
		if o.Principal == "" {
			r.add(RuleQuorum, id, "a vote with no principal: %s", o)
			continue
		}
		counted[o.Principal]++
		if o.Kind == Approve {
			approvers[o.Principal] = true
		}
		if o.Principal == creator {
			r.add(RuleQuorum, id, "the creator's principal %s voted: %s", o.Principal, o)
		}
		if o.Kind == Approve && o.State == airlock.StateApproved && o.ApprovedVotes != need {
			r.add(RuleQuorum, id, "an approval decided with %d of %d approving votes: %s", o.ApprovedVotes, need, o)
		}
	}
	for p, n := range counted {
		if n > 1 {
			r.add(RuleQuorum, id, "principal %s counted %d times", p, n)
		}
	}
	if decided && won == airlock.StateApproved && len(approvers) != need {
		r.add(RuleQuorum, id, "approved with %d distinct approvers, %d needed", len(approvers), need)
	}
}

// result is an op's output as the model sees it.
type result struct {
	Code    airlock.Code
	State   airlock.State
	Claimed bool
	// Approvals and Votes are Op.Approvals and Op.ApprovedVotes.
	Approvals, Votes int
}

// lifecycle is the model's state of one request: its state ("" before it
// exists), whether its execution was claimed, how many approvals it
// needs and how many approving votes it holds.
type lifecycle struct {
	State         airlock.State
	Claimed       bool
	Need, Approve int
}

// Model is the sequential specification of one request's lifecycle, for
// porcupine: inputs are Kinds, outputs the op's code, state and claim.
var Model = porcupine.Model{
	Init: func() any { return lifecycle{} },
	Step: func(st, in, out any) (bool, any) {
		return step(st.(lifecycle), in.(Kind), out.(result))
	},
	DescribeOperation: func(in, out any) string {
		r := out.(result)
		if r.Code != "" {
			return fmt.Sprintf("%s → %s (%s)", in, r.Code, r.State)
		}
		return fmt.Sprintf("%s → %s", in, r.State)
	},
	DescribeState: func(st any) string {
		s := st.(lifecycle)
		if s.Claimed {
			return string(s.State) + "+claimed"
		}
		return string(s.State)
	},
}

// step is one sequential transition: whether out could be what kind
// returns from st, and the state after.
func step(st lifecycle, kind Kind, out result) (bool, lifecycle) {
	switch kind {
	case Create:
		if out.Code != "" {
			return true, st
		}
		return st.State == "" && out.State.Valid(), lifecycle{State: out.State, Need: out.Approvals}
	case Approve, Deny, Cancel:
		switch out.Code {
		case "":
			if st.State != airlock.StatePending {
				return false, st
			}
			if kind == Approve && st.Need > 1 {
				// A vote: the request ends exactly when it brings the
				// approving votes to the number needed.
				next := st
				next.Approve++
				if next.Approve >= st.Need {
					next.State = airlock.StateApproved
				}
				return out.State == next.State && out.Votes == next.Approve, next
			}
			next := st
			next.State = kind.target()
			return out.State == kind.target(), next
		case airlock.CodeNotPending:
			return st.State.Terminal() && out.State == st.State, st
		case airlock.CodeDeadlinePassed:
			return st.State == airlock.StateExpired && out.State == st.State, st
		}
		return true, st
	case Expire:
		next := st
		next.State = airlock.StateExpired
		return st.State == airlock.StatePending, next
	case Claim:
		switch out.Code {
		case "":
			next := st
			next.Claimed = true
			return st.State == airlock.StateApproved && !st.Claimed, next
		case airlock.CodeAlreadyExecuted:
			return st.Claimed, st
		case airlock.CodeNotApproved:
			return st.State != airlock.StateApproved && (out.State == "" || out.State == st.State), st
		case airlock.CodeApprovalExpired:
			return st.State == airlock.StateApproved, st
		}
		return true, st
	case Read:
		if out.Code != "" {
			return true, st
		}
		return out.State == st.State && out.Claimed == st.Claimed, st
	}
	return false, st
}
