package store

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
)

// Requests keeps instances, approval requests and the audit log.
type Requests interface {
	// CreateInstance stores a new instance.
	CreateInstance(ctx context.Context, in airlock.Instance, actor string) (airlock.Instance, error)
	// GetInstance reads an instance with its pending count; not_found.
	GetInstance(ctx context.Context, id string) (airlock.Instance, error)
	// TokenAudience returns the token_audience instance id registered,
	// deleted or not; not_found.
	TokenAudience(ctx context.Context, id string) (string, error)
	// ListInstances lists instances, of one owner when ownerID is set.
	ListInstances(ctx context.Context, ownerID string) ([]airlock.Instance, error)
	// DeleteInstance deletes an instance and cancels its pending requests in
	// one transaction; it returns the IDs of the requests it cancelled.
	// not_found.
	DeleteInstance(ctx context.Context, id, actor string) ([]string, error)

	// CreateRequest creates a request, idempotently per owner and key: when
	// the key exists with the same fingerprint it returns the stored request
	// and created=false; with another fingerprint, idempotency_conflict.
	// not_found when the instance does not exist (or was just deleted).
	CreateRequest(ctx context.Context, p NewRequestParams) (r airlock.Request, created bool, err error)
	// GetRequest reads a request; not_found. Every request and summary a
	// store returns carries the names people read it by (InstanceName,
	// OwnerName, Decision.DecidedByName), looked up in the same query.
	GetRequest(ctx context.Context, id string) (airlock.Request, error)
	// GetRequests reads the requests ids, as GetRequest reads each, in as
	// few statements as it can (at most MaxGetRequests IDs a statement):
	// the long-polls one change wakes read at once (provider/readbatch.go).
	// It returns those that exist, in no particular order, each once; a
	// missing ID is left out, not an error.
	GetRequests(ctx context.Context, ids []string) ([]airlock.Request, error)
	// ListRequests lists requests matching f, newest first: up to f.Limit
	// of them, fewer when f.MaxBytes ends the list early. more reports
	// whether requests after the last one listed match f too.
	ListRequests(ctx context.Context, f RequestFilter) (rs []airlock.Request, more bool, err error)
	// ListRequestSummaries lists what ListRequests would (f.MaxBytes
	// aside) as summaries, reading only the columns a summary has and
	// the first characters of the arguments (ArgumentsHeadLen): a list
	// never reads what can be a mebibyte.
	ListRequestSummaries(ctx context.Context, f RequestFilter) (rs []airlock.RequestSummary, more bool, err error)
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
	Decide(ctx context.Context, p DecideParams) (airlock.Request, error)
	// Edit approves request p.ID with changed arguments (docs/protocol.md,
	// "Edits"), in one transaction: the original ends denied by p.Actor
	// with p.Note and ReplacedBy p.NewID, by the compare-and-set a denial
	// makes (so it races a decision, a cancel and the deadline as a
	// denial does, and loses as Decide loses); a new tool call p.NewID on
	// the same instance, with p.Arguments, DerivedFrom the original, the
	// original's tool, reasoning, context, routing and deadline, is
	// created and decided by p.Actor at the same instant: approved for
	// p.Validity, or, on a request needing several approvals, pending with
	// p.Actor's vote counted. It returns both. Only a tool call is edited
	// (Request.CheckEditable); DecideParams.Check's refusals apply to the
	// original; every refusal changes nothing.
	Edit(ctx context.Context, p EditParams) (original, edited airlock.Request, err error)
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
	// (airlock.OwnerOnly), decided in the change's own write with no read
	// before it.
	Cancel(ctx context.Context, id, actor string) (airlock.Request, error)
	// ExpireDue expires up to limit pending requests whose deadline is at or
	// before the store's now, the earliest second of deadlines first and,
	// within a second, in creation order (the table's order, which keeps a
	// sweep's rows together), and returns them in that order with only
	// Seq, ID, InstanceID, OwnerID, SessionID, State, DeadlineAt and
	// Decision set: a sweep of thousands holds the writer, and copying
	// every column out of it took half its time.
	ExpireDue(ctx context.Context, limit int) ([]airlock.Request, error)
	// ExpireRequests expires, in one write, those of ids that are pending
	// and whose deadline is at or before the store's now, as a sweep would,
	// and returns them as ExpireDue does; unknown IDs are ignored. Readers
	// that find their requests overdue expire those alone, rather than
	// waiting for a sweep of the whole backlog.
	ExpireRequests(ctx context.Context, ids []string) ([]airlock.Request, error)
	// NextDeadline returns when the expiry scheduler should look again:
	// the earliest deadline of a pending request, or, when more than
	// NextDeadlineExact pending deadlines share that deadline's second,
	// the start of that second. Finding the earliest of a second's
	// deadlines reads all of them: with 100,000 due in one second, 40 ms
	// on PostgreSQL for every read.
	NextDeadline(ctx context.Context) (t time.Time, ok bool, err error)
	// CountPending returns how many requests are pending, across every
	// process sharing the store, for the pending gauge.
	CountPending(ctx context.Context) (int, error)
	// ClaimExecution claims the one execution attempt of an approved request
	// before its expires_at. Otherwise not_approved, approval_expired or
	// already_executed; not_found.
	//
	// prepare, when not nil, is handed the claimed request as soon as the
	// claim's write has won, before its commit is durable, so that the
	// caller can make its answer (the approval token) while the commit
	// syncs. It may run on the store's writer, so it must return at once,
	// and it runs again if the transaction is retried. What it was handed
	// is claimed only if ClaimExecution then returns that request, with no
	// error.
	ClaimExecution(ctx context.Context, id, actor string, prepare func(airlock.Request)) (airlock.Request, error)
	// ReportExecution records the outcome of a claimed execution. Reporting
	// the same outcome again returns the request unchanged; a different one
	// is already_executed; without a claim, not_approved or invalid_request.
	ReportExecution(ctx context.Context, id string, in airlock.ReportInput, actor string) (airlock.Request, error)

	// ListEvents returns up to limit audit events with ID > after, in order.
	ListEvents(ctx context.Context, after int64, limit int) ([]airlock.Event, error)
	// CreatedEvent returns the request.created event of request id, with
	// the trace context of the call that created it (Event.TraceID,
	// SpanID), so that a later call's span links to it; not_found.
	CreatedEvent(ctx context.Context, id string) (airlock.Event, error)
}

// NewRequestParams is what the provider asks a store to create. The store
// sets CreatedAt and DeadlineAt = CreatedAt + Window by its own clock.
type NewRequestParams struct {
	Request airlock.Request // ID, InstanceID, OwnerID, Kind, call fields, key, fingerprint
	Window  time.Duration
	Actor   string
	// Initial, when set, is a decision made at creation by a policy: the
	// request is created already terminal.
	Initial *airlock.InitialDecision
	// Grant, when set (and Initial is not), asks the store to approve the
	// request by the first of Grant.IDs that still covers it when the
	// store writes: live (unrevoked, unexpired, a use left, its creator's
	// token unrevoked, its instance not deleted), for the request's tool
	// and scope, of another principal than the request's creator, and for
	// a same_arguments grant with the same arguments. The use is counted
	// in the same transaction as the insert, so a grant of N uses approves
	// at most N requests, whatever the races between processes. When no
	// grant still covers it, the request is created pending. The decision
	// is airlock.GrantActor(id)'s, valid for the grant's Validity.
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

// WithDefaults returns p with what a store fills in when the provider left
// it empty: a fresh "apr_" ID and the tool_call kind. Stores call it, then
// Validate, before they write.
func (p NewRequestParams) WithDefaults() NewRequestParams {
	if p.Request.ID == "" {
		p.Request.ID = airlock.NewRequestID(time.Now())
	}
	if p.Request.Kind == "" {
		p.Request.Kind = airlock.KindToolCall
	}
	if p.Initial != nil && p.Initial.DecidedBy == "" {
		d := *p.Initial
		d.DecidedBy = airlock.ActorPolicy
		p.Initial = &d
	}
	return p
}

// Validate refuses parameters that would store a request breaking the
// lifecycle's rules. The provider validates a caller's input first, so
// this guards every store's invariants against a caller's bug, the same
// way in each.
func (p NewRequestParams) Validate() error {
	if err := p.Request.CheckStorable(p.Window); err != nil {
		return err
	}
	switch {
	case p.Grant != nil && p.Initial != nil:
		return airlock.Invalid("grant", "a request decided at creation by a policy is not also approved by a grant")
	case p.Grant != nil && p.Grant.Principal == "":
		return airlock.Invalid("grant", "a grant's use needs the principal of the request's creator")
	case p.UnlessGranted != nil && (p.Grant != nil || p.Initial != nil):
		return airlock.Invalid("grant", "a create either checks for grants (UnlessGranted) or uses them (Grant), and never when decided at creation")
	case p.UnlessGranted != nil && p.UnlessGranted.Principal == "":
		return airlock.Invalid("grant", "a create unless granted needs the principal of the request's creator")
	}
	if p.Grant != nil {
		if err := p.Request.CheckGrantable(); err != nil {
			return err
		}
	}
	if d := p.Initial; d != nil {
		return p.Request.CheckDecidedAtCreation(d.Status, d.Validity)
	}
	return nil
}

// Replay answers a create that inserted nothing because prev, a request of
// the same owner and idempotency key, exists (airlock.Request.Replay).
func (p NewRequestParams) Replay(prev airlock.Request) (airlock.Request, error) {
	return p.Request.Replay(prev)
}

// DecideParams asks a store to record a reviewer's decision. The store sets
// DecidedAt to its now and, for approvals, ExpiresAt = DecidedAt + Validity.
// Before the decision counts, in its transaction, the store calls Check with
// the request and the principal of the token that created it; an error
// changes nothing and is the decision's answer. So the provider needs no
// read before the write.
type DecideParams struct {
	ID       string
	Status   airlock.State // approved or denied
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
	// Review is the reviewer's client's claim, stored with the decision
	// (Decision.Review) or the vote (Vote.Review); nil for none.
	Review *airlock.ReviewClaim
	// Passkey, when set, is the verified assertion the decision was
	// signed with (docs/phone.md, "Passkeys"): the store keeps it, with
	// ValidFor as submitted, in the decision's (or vote's) transaction.
	Passkey  *airlock.PasskeyAssertion
	ValidFor string
	// PasskeyPublicKey, PasskeyArgsDigest and PasskeyRPID are what
	// Passkey was checked with: the credential's COSE public key, the
	// arguments digest it signed and the relying party ID. The store
	// keeps them with it, so the assertion verifies after the passkey is
	// deleted.
	PasskeyPublicKey  []byte
	PasskeyArgsDigest string
	PasskeyRPID       string
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
	if p.Passkey != nil {
		if err := p.Passkey.Validate(); err != nil {
			return err
		}
	}
	switch p.Status {
	case airlock.StateApproved:
		return airlock.CheckValidity(p.Validity)
	case airlock.StateDenied:
		return nil
	default:
		return airlock.Invalid("status", "status must be approved or denied")
	}
}

// Check applies the rules a decision must pass against the request it
// decides (airlock.Request.CheckDecider and DecisionInput.CheckAnswer).
// creatorPrincipal is the principal of the token that created r, empty
// when that token is unknown.
func (p DecideParams) Check(r airlock.Request, creatorPrincipal string) error {
	if err := r.CheckDecider(p.Principal, p.Groups, creatorPrincipal); err != nil {
		return err
	}
	in := airlock.DecisionInput{Status: p.Status, Answer: p.Answer}
	return in.CheckAnswer(r)
}

// EditParams asks a store to approve a request with changed arguments
// (Requests.Edit). NewID is the new request's ID (a fresh one when
// empty); Status, Note, Validity, Actor, Principal and Groups are the
// decision's, as in DecideParams, with Status approved.
type EditParams struct {
	DecideParams
	NewID     string
	Arguments []byte
}

// WithDefaults returns p with a fresh "apr_" NewID when it has none.
func (p EditParams) WithDefaults() EditParams {
	if p.NewID == "" {
		p.NewID = airlock.NewRequestID(time.Now())
	}
	p.Status = airlock.StateApproved
	return p
}

// Validate refuses an edit no store may record: edited arguments that
// are not a strict JSON object, or an approval valid for less than 1µs.
func (p EditParams) Validate() error {
	if p.Status != airlock.StateApproved {
		return airlock.Invalid("status", "an edit is an approval")
	}
	if err := airlock.CheckEditedArguments(p.Arguments); err != nil {
		return err
	}
	return p.DecideParams.Validate()
}

// RequestFilter selects requests to list, newest first.
type RequestFilter struct {
	OwnerID    string // set for agents: only their own
	State      airlock.State
	InstanceID string
	Tool       string
	Kind       airlock.Kind
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
func (f RequestFilter) PageSize() int { return PageSize(f.Limit) }

// PageSize is the page size of a list asking for limit: DefaultListLimit
// when limit is not positive, and at most MaxListLimit.
func PageSize(limit int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	return min(limit, MaxListLimit)
}

// NextDeadlineExact is how many pending deadlines may share the earliest
// deadline's second for NextDeadline to find the earliest of them; past
// it, NextDeadline returns the start of the second, and the scheduler
// looks again from then, every sweep target, until they fall due.
const NextDeadlineExact = 1000

// MaxGetRequests is how many IDs one statement of GetRequests reads: a
// bound on the statement's parameters and on the rows it holds at once.
const MaxGetRequests = 1000

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
		return airlock.Invalid("state", "state must be one of pending, approved, denied, expired, cancelled")
	}
	if f.Kind != "" && !f.Kind.Valid() {
		return airlock.Invalid("kind", "unknown kind %q", f.Kind)
	}
	return nil
}
