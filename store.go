package airlock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"
)

// Clock tells the time. Stores judge deadlines by their own clock: the
// SQLite driver by the Clock it is given, the PostgreSQL driver by the
// database's clock_timestamp().
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock, truncated to the microsecond that both
// drivers store.
type SystemClock struct{}

// Now returns the current UTC time truncated to the microsecond.
func (SystemClock) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// NewRequestParams is what the provider asks a store to create. The store
// sets CreatedAt and DeadlineAt = CreatedAt + Window by its own clock.
type NewRequestParams struct {
	Request Request // ID, InstanceID, OwnerID, Kind, call fields, key, fingerprint
	Window  time.Duration
	Actor   string
	// Initial, when set, is a decision made at creation by a policy: the
	// request is created already terminal.
	Initial *InitialDecision
	// Grant, when set (and Initial is not), asks the store to approve the
	// request by the first of Grant.IDs that still covers it when the
	// store writes: live (unrevoked, unexpired, a use left, its creator's
	// token unrevoked, its instance not deleted), for the request's tool
	// and scope, of another principal than the request's creator, and for
	// a same_arguments grant with the same arguments. The use is counted
	// in the same transaction as the insert, so a grant of N uses approves
	// at most N requests, whatever the races between processes. When no
	// grant still covers it, the request is created pending. The decision
	// is GrantActor(id)'s, valid for the grant's Validity.
	Grant *GrantUse
	// UnlessGranted, when set (and Initial and Grant are not), makes the
	// create conditional: the store creates the request only when no live
	// grant could cover it, that is none of its tool, in its scope (its
	// instance, or its owner as an agent), made by another principal than
	// UnlessGranted.Principal, whatever the grant's match. When one could,
	// the store creates nothing and answers ErrGrantMayCover; the caller
	// then reads the grants, matches them, and creates again with Grant.
	// So a create no grant could cover needs no read of grants before it.
	// A replay is answered as a replay whatever the grants.
	UnlessGranted *GrantScope
}

// GrantScope names the creator of a request for UnlessGranted: grants
// made by this principal never cover the request.
type GrantScope struct {
	Principal string
}

// ErrGrantMayCover is a store's answer to a create with UnlessGranted
// when a live grant could cover the request: nothing was created.
var ErrGrantMayCover = errors.New("airlock: a live grant may cover this request: read the grants and create again with the covering ones")

// InitialDecision is a policy's decision at creation.
type InitialDecision struct {
	Status   State // approved or denied
	Note     string
	Validity time.Duration // for approvals
	// DecidedBy is the decision's actor: PolicyActor(rule) for a policy
	// rule; ActorPolicy when empty.
	DecidedBy string
	// PolicyHash is the hex SHA-256 of the policy file whose rule decided,
	// recorded on the decision's event so an audit can tell which version
	// of the rules was in force.
	PolicyHash string
}

// WithDefaults returns p with what a store fills in when the provider left
// it empty: a fresh "apr_" ID and the tool_call kind. Stores call it, then
// Validate, before they write.
func (p NewRequestParams) WithDefaults() NewRequestParams {
	if p.Request.ID == "" {
		p.Request.ID = NewID(PrefixRequest)
	}
	if p.Request.Kind == "" {
		p.Request.Kind = KindToolCall
	}
	if p.Initial != nil && p.Initial.DecidedBy == "" {
		d := *p.Initial
		d.DecidedBy = ActorPolicy
		p.Initial = &d
	}
	return p
}

// Validate refuses parameters that would store a request breaking the
// lifecycle's rules. The provider validates a caller's input first, so
// this guards every store's invariants against a caller's bug, the same
// way in each.
func (p NewRequestParams) Validate() error {
	r := p.Request
	switch {
	case !r.Kind.Valid():
		return Invalid("kind", "unknown kind %q", r.Kind)
	case p.Window < time.Microsecond:
		// Stores keep microseconds: a shorter window would make the
		// deadline the creation instant, or before it.
		return Invalid("timeout", "a request needs a decision window of at least 1µs, so that deadline_at is after created_at")
	case r.Fingerprint == "" && r.IdempotencyKey != "":
		return Invalid("fingerprint", "an idempotent request needs a fingerprint to compare replays by")
	case r.Proposal != nil && r.Proposal.Command != nil && p.Initial != nil:
		return Invalid("proposal", "a command proposal cannot be decided at creation; a person must approve it")
	case p.Initial != nil && p.Initial.Status == StateApproved && !r.MayApproveAtCreation():
		return Invalid("question", "a question cannot be approved at creation; a person must answer it")
	case p.Grant != nil && p.Initial != nil:
		return Invalid("grant", "a request decided at creation by a policy is not also approved by a grant")
	case p.Grant != nil && p.Grant.Principal == "":
		return Invalid("grant", "a grant's use needs the principal of the request's creator")
	case p.Grant != nil && (r.Kind != KindToolCall || !r.MayApproveAtCreation()):
		return Invalid("grant", "grants approve tool calls only, never a command or a question")
	case p.Grant != nil && (len(r.Reviewers) > 0 || r.NeedsQuorum()):
		return Invalid("grant", "a request routed to reviewer groups or needing several approvals is never approved by a grant")
	case r.Approvals < 0 || r.Approvals > MaxApprovals:
		return Invalid("approvals", "a request needs between 1 and %d approvals, not %d", MaxApprovals, r.Approvals)
	case len(r.Reviewers) > MaxRoutedGroups:
		return Invalid("reviewers", "a request may be routed to at most %d groups, not %d", MaxRoutedGroups, len(r.Reviewers))
	case len(r.EscalateTo) > MaxRoutedGroups:
		return Invalid("escalate_to", "a request may be escalated to at most %d groups, not %d", MaxRoutedGroups, len(r.EscalateTo))
	case (len(r.EscalateTo) > 0) != (r.EscalateAfter > 0):
		return Invalid("escalate_after", "escalate_after and escalate_to go together")
	case len(r.EscalateTo) > 0 && len(r.Reviewers) == 0:
		return Invalid("escalate_to", "only a request routed to reviewer groups is escalated to others")
	case r.EscalateAfter < 0:
		return Invalid("escalate_after", "escalate_after may not be negative")
	case p.UnlessGranted != nil && (p.Grant != nil || p.Initial != nil):
		return Invalid("grant", "a create either checks for grants (UnlessGranted) or uses them (Grant), and never when decided at creation")
	case p.UnlessGranted != nil && p.UnlessGranted.Principal == "":
		return Invalid("grant", "a create unless granted needs the principal of the request's creator")
	}
	for _, g := range append(slices.Clone(r.Reviewers), r.EscalateTo...) {
		if err := CheckGroupName(g); err != nil {
			return Invalid("reviewers", "%v", err)
		}
	}
	if d := p.Initial; d != nil {
		if d.Status != StateApproved && d.Status != StateDenied {
			return Invalid("status", "a decision at creation must be approved or denied, not %q", d.Status)
		}
		if d.Status == StateApproved {
			return checkValidity(d.Validity)
		}
	}
	return nil
}

// Replay answers a create that inserted nothing because prev, a request of
// the same owner and idempotency key, exists: prev itself when it was made
// by the same call (the same fingerprint), else idempotency_conflict.
func (p NewRequestParams) Replay(prev Request) (Request, error) {
	if prev.Fingerprint != p.Request.Fingerprint {
		return Request{}, Errorf(CodeIdempotencyConflict,
			"idempotency key %q was already used for a different request (%s); use a new key for a new call", p.Request.IdempotencyKey, prev.ID)
	}
	return prev, nil
}

// checkValidity refuses an approval's validity under 1µs: stores keep
// microseconds, and expires_at must come after decided_at.
func checkValidity(d time.Duration) error {
	if d < time.Microsecond {
		return Invalid("valid_for", "an approval needs a validity of at least 1µs, so that expires_at is after decided_at")
	}
	return nil
}

// DecideParams asks a store to record a reviewer's decision. The store sets
// DecidedAt to its now and, for approvals, ExpiresAt = DecidedAt + Validity.
// Before the decision counts, in its transaction, the store calls Check with
// the request and the principal of the token that created it; an error
// changes nothing and is the decision's answer. So the provider needs no
// read before the write.
type DecideParams struct {
	ID       string
	Status   State // approved or denied
	Note     string
	Answer   string
	Validity time.Duration
	Actor    string
	// Principal is the deciding reviewer's principal (stores default a
	// token's principal to its ID, so it is never empty for a real token);
	// empty skips the self-approval rule. On a request that needs several
	// approvals it is who votes (Actor when empty): a principal votes once.
	Principal string
	// Groups are the deciding caller's reviewer groups: a request routed
	// to groups (Request.Reviewers) is decided only by a member of one.
	Groups []string
}

// VotePrincipal is who a decision votes as on a request that needs
// several approvals: the principal, or the actor when there is none.
func (p DecideParams) VotePrincipal() string {
	if p.Principal != "" {
		return p.Principal
	}
	return p.Actor
}

// Validate refuses a decision no store may record, before the store
// looks at the request: a status other than approved or denied, or an
// approval valid for less than 1µs.
func (p DecideParams) Validate() error {
	switch p.Status {
	case StateApproved:
		return checkValidity(p.Validity)
	case StateDenied:
		return nil
	default:
		return Invalid("status", "status must be approved or denied")
	}
}

// Check applies the rules a decision must pass against the request it
// decides: only a member of one of the request's reviewer groups decides a
// routed request, a reviewer never decides (nor votes on) a request made
// by a token of their own principal, and an approval answers exactly when
// the request asks a question (DecisionInput.CheckAnswer).
// creatorPrincipal is the principal of the token that created r, empty
// when that token is unknown.
func (p DecideParams) Check(r Request, creatorPrincipal string) error {
	if !r.MayDecide(p.Groups) {
		return r.RoutingRefusal()
	}
	if p.Principal != "" && creatorPrincipal == p.Principal {
		return Errorf(CodeForbidden, "you cannot decide a request made by your own token or principal; ask another reviewer")
	}
	in := DecisionInput{Status: p.Status, Answer: p.Answer}
	return in.CheckAnswer(r)
}

// RequestFilter selects requests to list, newest first.
type RequestFilter struct {
	OwnerID    string // set for agents: only their own
	State      State
	InstanceID string
	Tool       string
	Kind       Kind
	BeforeSeq  int64 // cursor: only requests with Seq < BeforeSeq; 0 for the first page
	Limit      int
	// MaxBytes, when positive, ends a list of full requests early: the
	// store stops after the request that brings the StoredBytes of those
	// listed to MaxBytes or more, even short of Limit. The first request
	// is listed whatever its size, so every page makes progress. The
	// store reads no large column of a request it does not list.
	// ListRequestSummaries ignores it: summaries are small.
	MaxBytes int
}

// Page sizes of a list (RequestFilter.Limit): the default when it is
// unset, and the most a store returns in one page, whatever is asked.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// PageSize is f's page size: DefaultListLimit when Limit is unset, and
// at most MaxListLimit.
func (f RequestFilter) PageSize() int {
	if f.Limit <= 0 {
		return DefaultListLimit
	}
	return min(f.Limit, MaxListLimit)
}

// DefaultExpireBatch is how many due requests ExpireDue expires when its
// limit is not positive.
const DefaultExpireBatch = 100

// Batch is limit, or DefaultExpireBatch when limit is not positive: how
// many rows one run of a sweep (ExpireDue, EscalateDue, RemindDue,
// SweepWebSessions) takes.
func Batch(limit int) int {
	if limit <= 0 {
		return DefaultExpireBatch
	}
	return limit
}

// Validate refuses a filter no store can apply: an unknown state or kind.
func (f RequestFilter) Validate() error {
	if f.State != "" && !f.State.Valid() {
		return Invalid("state", "state must be one of pending, approved, denied, expired, cancelled")
	}
	if f.Kind != "" && !f.Kind.Valid() {
		return Invalid("kind", "unknown kind %q", f.Kind)
	}
	return nil
}

// DecisionConflict is the error of a change that needs r pending (Decide,
// Cancel) and lost to the state r is in. An expired request refuses with
// deadline_passed, whether it expired in this call or earlier: the
// deadline is the reason either way, and the answer does not depend on
// whether a scheduler got there first. Anything else is not_pending.
func (r Request) DecisionConflict() *Error {
	if r.State == StateExpired {
		return Conflict(CodeDeadlinePassed, r.State,
			"request %s expired at its deadline %s; no decision can be recorded", r.ID, r.DeadlineAt.Format(time.RFC3339Nano))
	}
	return Conflict(CodeNotPending, r.State, "request %s is already %s", r.ID, r.State)
}

// OwnerOnly wraps refuse for a change only the request's owning agent may
// make (Cancel, ClaimExecution). The change's compare-and-set names the
// owner, so another agent's call changes nothing, and this answers it
// not_found: an agent learns nothing of requests it does not own.
func OwnerOnly(actor string, refuse func(Request) *Error) func(Request) *Error {
	return func(r Request) *Error {
		if r.OwnerID != actor {
			return NotFound("approval request", r.ID)
		}
		return refuse(r)
	}
}

// ClaimConflict is the error of a claim of r's execution that lost: r is
// not approved, its one attempt was claimed already, or its approval
// lapsed.
func (r Request) ClaimConflict() *Error {
	switch {
	case r.State != StateApproved:
		return Conflict(CodeNotApproved, r.State, "request %s is %s, not approved; it may not run", r.ID, r.State)
	case r.Execution != nil:
		return Conflict(CodeAlreadyExecuted, r.State,
			"request %s was already claimed at %s; an approval permits one attempt", r.ID, r.Execution.ClaimedAt.Format(time.RFC3339Nano))
	default:
		return Conflict(CodeApprovalExpired, r.State,
			"the approval of request %s lapsed at %s; ask again with a new request", r.ID, r.Decision.ExpiresAt.Format(time.RFC3339Nano))
	}
}

// ReportConflict is the error of actor's report of status that found no
// claimed execution of r to finish, or nil when r already records status:
// a retried report, whose answer is r as it is. Another agent's request is
// not_found, as in OwnerOnly.
func (r Request) ReportConflict(actor string, status ExecutionStatus) error {
	switch {
	case r.OwnerID != actor:
		return NotFound("approval request", r.ID)
	case r.State != StateApproved:
		return Conflict(CodeNotApproved, r.State, "request %s is %s, not approved; nothing ran", r.ID, r.State)
	case r.Execution == nil:
		return Invalid("status", "request %s has no claimed execution; claim it before reporting", r.ID)
	case r.Execution.Status == status:
		return nil
	default:
		return Conflict(CodeAlreadyExecuted, r.State, "request %s's execution was already reported as %s", r.ID, r.Execution.Status)
	}
}

// CompareSweepOrder orders requests as ExpireDue takes them: the earliest
// second of deadlines first, then in creation order (Seq). Drivers sort
// what a sweep's UPDATE returned by it, since RETURNING has no order.
func CompareSweepOrder(a, b Request) int {
	return cmp.Or(cmp.Compare(a.DeadlineAt.Unix(), b.DeadlineAt.Unix()), cmp.Compare(a.Seq, b.Seq))
}

// Store keeps instances, requests, audit events and tokens, MCP sessions
// (SessionStore), the work board (BoardStore) and the inbox's sign-ins
// (WebSessionStore) with the OIDC sign-ins in progress (OIDCLoginStore).
// Every state change is
// one conditional write decided by the store, never a read followed by a
// write in Go; every change appends its audit event in the same
// transaction.
//
// It is the whole contract: every driver implements all of it, and the
// conformance suite (storetest) checks all of it on every driver. What
// only some drivers have is not found by type assertion, which a wrapper
// around a store would silently hide, but named by Extras.
//
// Errors are *Error: not_found for missing rows, for lost transitions
// the code and State of what holds, and unavailable (with the driver's
// error as Err) when the store cannot serve now: a full disk, an I/O
// error, a database that cannot be reached.
type Store interface {
	SessionStore
	BoardStore
	NotifyStore
	ReviewerStore
	GrantStore
	WebSessionStore
	OIDCLoginStore

	// CreateInstance stores a new instance.
	CreateInstance(ctx context.Context, in Instance, actor string) (Instance, error)
	// GetInstance reads an instance with its pending count; not_found.
	GetInstance(ctx context.Context, id string) (Instance, error)
	// ListInstances lists instances, of one owner when ownerID is set.
	ListInstances(ctx context.Context, ownerID string) ([]Instance, error)
	// DeleteInstance deletes an instance and cancels its pending requests in
	// one transaction; it returns the IDs of the requests it cancelled.
	// not_found.
	DeleteInstance(ctx context.Context, id, actor string) ([]string, error)

	// CreateRequest creates a request, idempotently per owner and key: when
	// the key exists with the same fingerprint it returns the stored request
	// and created=false; with another fingerprint, idempotency_conflict.
	// not_found when the instance does not exist (or was just deleted).
	CreateRequest(ctx context.Context, p NewRequestParams) (r Request, created bool, err error)
	// GetRequest reads a request; not_found. Every request and summary a
	// store returns carries the names people read it by (InstanceName,
	// OwnerName, Decision.DecidedByName), looked up in the same query.
	GetRequest(ctx context.Context, id string) (Request, error)
	// ListRequests lists requests matching f, newest first: up to f.Limit
	// of them, fewer when f.MaxBytes ends the list early. more reports
	// whether requests after the last one listed match f too.
	ListRequests(ctx context.Context, f RequestFilter) (rs []Request, more bool, err error)
	// ListRequestSummaries lists what ListRequests would (f.MaxBytes
	// aside) as summaries, reading only the columns a summary has and
	// the first characters of the arguments (ArgumentsHeadLen): a list
	// never reads what can be a mebibyte.
	ListRequestSummaries(ctx context.Context, f RequestFilter) (rs []RequestSummary, more bool, err error)
	// Decide records a decision if the request is pending and its deadline
	// is after the store's now. Otherwise not_pending (State: what holds), or
	// deadline_passed when the deadline has come (the request is expired in
	// the same call, so State is expired); not_found. DecideParams.Check's
	// refusals (routing, self-approval) change nothing.
	//
	// On a request that needs several approvals (Request.NeedsQuorum) a
	// decision is a vote of p.VotePrincipal(), kept with the request: a
	// denial decides denied; an approval decides approved when it is the
	// last one needed, and otherwise leaves the request pending with one
	// more vote (event request.voted). The count and the state change are
	// one conditional write on the request's row, so concurrent votes on
	// any number of processes complete the quorum exactly once. A second
	// vote by one principal is forbidden (DuplicateVote) and changes
	// nothing. The completing vote's note and validity are the decision's.
	Decide(ctx context.Context, p DecideParams) (Request, error)
	// EscalateDue widens up to limit pending requests whose escalation is
	// due (CreatedAt + EscalateAfter at or before the store's now, before
	// the deadline, never escalated) to their EscalateTo groups, sets
	// EscalatedAt and appends request.escalated, in one conditional write
	// per request, so that each is escalated once across replicas. It
	// returns the IDs of the requests escalated.
	EscalateDue(ctx context.Context, limit int) ([]string, error)
	// Cancel withdraws a pending request before its deadline; errors as
	// Decide. Cancel, ClaimExecution and ReportExecution are the owning
	// agent's: actor is its token's ID, and another's request is not_found
	// (OwnerOnly), decided in the change's own write with no read before it.
	Cancel(ctx context.Context, id, actor string) (Request, error)
	// ExpireDue expires up to limit pending requests whose deadline is at or
	// before the store's now, the earliest second of deadlines first and,
	// within a second, in creation order (the table's order, which keeps a
	// sweep's rows together), and returns them in that order with only
	// Seq, ID, InstanceID, OwnerID, SessionID, State, DeadlineAt and
	// Decision set: a sweep of thousands holds the writer, and copying
	// every column out of it took half its time.
	ExpireDue(ctx context.Context, limit int) ([]Request, error)
	// ExpireRequests expires, in one write, those of ids that are pending
	// and whose deadline is at or before the store's now, as a sweep would,
	// and returns them as ExpireDue does; unknown IDs are ignored. Readers
	// that find their requests overdue expire those alone, rather than
	// waiting for a sweep of the whole backlog.
	ExpireRequests(ctx context.Context, ids []string) ([]Request, error)
	// NextDeadline returns the earliest deadline of a pending request.
	NextDeadline(ctx context.Context) (t time.Time, ok bool, err error)
	// CountPending returns how many requests are pending, across every
	// process sharing the store, for the pending gauge.
	CountPending(ctx context.Context) (int, error)
	// ClaimExecution claims the one execution attempt of an approved request
	// before its expires_at. Otherwise not_approved, approval_expired or
	// already_executed; not_found.
	ClaimExecution(ctx context.Context, id, actor string) (Request, error)
	// ReportExecution records the outcome of a claimed execution. Reporting
	// the same outcome again returns the request unchanged; a different one
	// is already_executed; without a claim, not_approved or invalid_request.
	ReportExecution(ctx context.Context, id string, in ReportInput, actor string) (Request, error)

	// ListEvents returns up to limit audit events with ID > after, in order.
	ListEvents(ctx context.Context, after int64, limit int) ([]Event, error)

	// CreateToken stores a token.
	CreateToken(ctx context.Context, t Token) error
	// PutToken stores t under its ID, replacing the hash and clearing any
	// revocation when it exists (the bootstrap admin token).
	PutToken(ctx context.Context, t Token) error
	// TokenByHash finds a token, revoked or not, by its secret's hash; not_found.
	TokenByHash(ctx context.Context, hash []byte) (Token, error)
	// GetToken reads a token by ID; not_found.
	GetToken(ctx context.Context, id string) (Token, error)
	// ListTokens lists every token, newest first.
	ListTokens(ctx context.Context) ([]Token, error)
	// RevokeToken marks a token revoked; revoking twice keeps the first time.
	RevokeToken(ctx context.Context, id, actor string) (Token, error)

	// Extras returns the parts of the store that only some drivers have.
	// A wrapper around a store passes them on by embedding it, or says
	// otherwise by overriding Extras.
	Extras() StoreExtras

	// Ping checks that the store can serve: that it answers a read and,
	// once a write has failed because the store could not write (a full
	// disk, a database that cannot be reached), that a write commits
	// again. It returns CodeUnavailable while the store cannot serve, and
	// turns nil by itself once it can: no reopening is needed.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// StoreExtras are the parts of a store that only some drivers have, each
// nil when the driver lacks it. The provider takes them from Store.Extras
// when it is built, and logs which it got.
type StoreExtras struct {
	// TokenStamp tells, without a query, whether any token changed
	// (SQLite): the provider then keeps live tokens between calls.
	TokenStamp TokenStamper
	// TokenCheck checks a token the provider took from memory within a
	// call's first round trip (PostgreSQL): the provider then remembers
	// the tokens it has looked up.
	TokenCheck TokenChecker
	// Feed announces every committed change, made by any process sharing
	// the store (PostgreSQL), so that waiters on every replica wake.
	Feed ChangeFeed
}

// TokenStamper tells without a query whether any token was revoked or
// replaced since an earlier stamp: in this process or in another one on
// the same database. The stamp changes once such a change has committed,
// before the call that made it returns, so a caller that reads the same
// stamp before and after looking a token up may keep what it found until
// the stamp changes; a revocation still takes effect at the next call.
// Stores that cannot answer cheaply have none (StoreExtras.TokenStamp),
// and their tokens are looked up on every call.
type TokenStamper interface {
	TokenStamp() (uint64, error)
}

// ChangeFeed announces the changes of a store shared by several provider
// replicas (PostgreSQL). Every committed change to a request is announced
// to every replica, so a waiter on one replica hears a decision made on
// another.
type ChangeFeed interface {
	// Listen calls changed with the IDs of requests changed by any replica,
	// until ctx ends. It calls changed(nil) when notifications may have been
	// missed (a dropped connection): every waiter must then re-read.
	Listen(ctx context.Context, changed func(ids []string)) error
}
