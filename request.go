package airlock

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// State is where a request is in its lifecycle. Pending is the only
// non-terminal state; a terminal request never changes state again.
type State string

// The five states of a request (docs/protocol.md, "The lifecycle"); all but
// pending are terminal.
const (
	StatePending   State = "pending"
	StateApproved  State = "approved"
	StateDenied    State = "denied"
	StateExpired   State = "expired"
	StateCancelled State = "cancelled"
)

// States lists every state in lifecycle order.
var States = []State{StatePending, StateApproved, StateDenied, StateExpired, StateCancelled}

// Terminal reports whether s is one of the four final states.
func (s State) Terminal() bool {
	switch s {
	case StateApproved, StateDenied, StateExpired, StateCancelled:
		return true
	}
	return false
}

// Valid reports whether s is one of the five states.
func (s State) Valid() bool { return s == StatePending || s.Terminal() }

// Kind says what a request asks for. Requests made over REST by an adapter
// are KindToolCall; MCP agents choose one of the other kinds.
type Kind string

// The request kinds. KindToolCall is Airlock's own kind for adapter-intercepted
// tool calls; the others come from the MCP tool brief.
const (
	KindToolCall     Kind = "tool_call"
	KindWorkChange   Kind = "work_change"
	KindMemoryChange Kind = "memory_change"
	KindLifeChange   Kind = "life_change"
	KindAgentRequest Kind = "agent_request"
)

// Kinds lists every kind.
var Kinds = []Kind{KindToolCall, KindWorkChange, KindMemoryChange, KindLifeChange, KindAgentRequest}

// AgentWrote reports whether a request of kind k is described in the
// agent's own words: an MCP request's title, description and question
// were written by the agent, and nothing checked them, so every surface
// labels them as the agent's claim (AgentClaim), as it labels reasoning.
// A tool call's tool and arguments are what would run, not a description.
func (k Kind) AgentWrote() bool { return k != KindToolCall }

// AgentClaim labels, on every surface, text an agent wrote to persuade:
// its reasoning, and an MCP request's title, description and question.
const AgentClaim = "The agent's claim (unverified)"

// Requester names, for people, who made a request of kind k: a tool
// call's instance (the adapter that stopped the call), or an MCP request's
// agent, by its token's name, with its session's name when it was made in
// one. An MCP request made without a session belongs to the agent's
// default instance, whose name ("mcp") says nothing of who asked. Each
// name falls back to its ID when the row that named it is gone.
func Requester(k Kind, instance, agent string, inSession bool) string {
	switch {
	case !k.AgentWrote():
		return instance
	case inSession:
		return agent + " (session " + instance + ")"
	}
	return agent
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	for _, v := range Kinds {
		if k == v {
			return true
		}
	}
	return false
}

// Request is an approval request: may this one call run? Tool and Arguments
// are exactly what the adapter intercepted (Arguments keeps the submitted
// bytes); AgentReasoning is the agent's unverified claim; Context is what the
// adapter observed.
type Request struct {
	ID         string
	InstanceID string
	// OwnerID is the token that owns the instance, and so the request.
	OwnerID string
	State   State
	Kind    Kind
	// InstanceName and OwnerName are the names of the instance (or
	// session) and of the token that made the request, read by the store
	// with it, for people to read; empty when that row is gone.
	InstanceName string
	OwnerName    string

	Tool           string
	Arguments      json.RawMessage
	Timeout        string // the window as asked, verbatim
	AgentReasoning string
	Context        json.RawMessage // nil when absent
	// PurgedAt is when the payloads above (Arguments, AgentReasoning and
	// Context, not Tool) were purged under the server's payload retention
	// (docs/operations.md, "Payload retention"); nil while they are kept.
	// Once it is set those fields are empty: every surface says "purged",
	// never that the request had no arguments.
	PurgedAt *time.Time

	CreatedAt  time.Time
	DeadlineAt time.Time

	Decision  *Decision  // set once terminal
	Execution *Execution // set once claimed

	IdempotencyKey string
	Fingerprint    string

	// MCP fields (docs/mcp.md); empty for REST tool calls.
	Title       string
	Description string
	TargetType  string
	TargetID    string
	SessionID   string
	Proposal    *Proposal
	Question    *Question
	// CommandResult is set when an approved command proposal was applied,
	// in the same transaction that recorded the approval.
	CommandResult *CommandResult

	// Reviewers are the groups whose members may decide the request (a
	// policy rule's reviewers); empty: any reviewer may.
	Reviewers []string
	// Approvals is how many approvals from distinct principals the request
	// needs (a policy rule's approvals); 0 and 1 both mean one decision
	// decides. When more are needed, every decision is a vote.
	Approvals int
	// EscalateTo are the groups the request is widened to when it is
	// still pending EscalateAfter after its creation (a policy rule's
	// escalate_to and escalate_after); EscalatedAt is when it was, nil
	// before.
	EscalateTo    []string
	EscalateAfter time.Duration
	EscalatedAt   *time.Time
	// Votes are the votes cast on a request that needs several approvals,
	// in the order they were cast, read with the request by GetRequest and
	// Decide. Lists leave them out: a summary has ApprovedVotes.
	Votes []Vote

	// ReplacedBy, on a request a reviewer approved with changed
	// arguments, is the request made with them: this one ended denied in
	// the same transaction (docs/protocol.md, "Edits"). DerivedFrom, on
	// that new request, is the original. Both are empty otherwise.
	ReplacedBy  string
	DerivedFrom string

	// Preview and Reversibility are what the adapter claims about a tool
	// call (docs/protocol.md, "What the adapter claims"): every surface
	// shows them as its claims, beside the facts. Nil and "" when absent.
	Preview       *Preview
	Reversibility string

	// Seq orders requests by creation; it backs cursor pagination.
	Seq int64
}

// RequestSummary is a request as a list shows it: everything but what an
// agent sent that can be large (arguments, context, reasoning, description,
// a command's input and observed state, up to a mebibyte each). The lists
// that show no arguments read summaries, so that a page costs what it
// shows, not what was stored.
type RequestSummary struct {
	Seq          int64
	ID           string
	InstanceID   string
	InstanceName string
	OwnerID      string
	OwnerName    string
	State        State
	Kind         Kind
	Tool         string
	Title        string
	SessionID    string
	CreatedAt    time.Time
	DeadlineAt   time.Time
	Decision     *Decision // set once terminal
	Question     *Question // set when the request asks the reviewer
	// CommandMethod is the method of the command the request proposes,
	// empty when it proposes none.
	CommandMethod string
	// ArgumentsHead is the start of the arguments as submitted: their
	// first ArgumentsHeadLen characters, so that a list can tell two calls
	// of one tool apart without reading what can be a mebibyte.
	// ArgumentsCut reports that more follows.
	ArgumentsHead string
	ArgumentsCut  bool
	// Purged reports that the payload retention purged the arguments
	// (Request.PurgedAt): ArgumentsHead is then empty, and a list says
	// "purged" rather than nothing.
	Purged bool
	// Reviewers, Approvals: as Request's. ApprovedVotes counts the
	// approving votes so far.
	Reviewers     []string
	Approvals     int
	ApprovedVotes int
}

// ArgumentsHeadLen is how many characters of the arguments a summary
// keeps (RequestSummary.ArgumentsHead).
const ArgumentsHeadLen = 200

// ArgumentsHead returns the first ArgumentsHeadLen characters of args and
// whether more follow, as a summary keeps them. Stores read one character
// more than they keep and call it on that.
func ArgumentsHead(args string) (head string, cut bool) {
	n := 0
	for i := range args {
		if n == ArgumentsHeadLen {
			return args[:i], true
		}
		n++
	}
	return args, false
}

// Summary returns r as a list shows it.
func (r Request) Summary() RequestSummary {
	s := RequestSummary{
		Seq: r.Seq, ID: r.ID, InstanceID: r.InstanceID, InstanceName: r.InstanceName, OwnerID: r.OwnerID, OwnerName: r.OwnerName,
		State: r.State, Kind: r.Kind,
		Tool: r.Tool, Title: r.Title, SessionID: r.SessionID, CreatedAt: r.CreatedAt, DeadlineAt: r.DeadlineAt,
		Decision: r.Decision, Question: r.Question,
		Reviewers: r.Reviewers, Approvals: r.Approvals, ApprovedVotes: r.ApprovedVotes(),
		Purged: r.PurgedAt != nil,
	}
	if r.Proposal != nil && r.Proposal.Command != nil {
		s.CommandMethod = r.Proposal.Command.Method
	}
	// Only the head is copied: a summary of a request with a mebibyte of
	// arguments must not keep the mebibyte alive. ArgumentsHeadLen
	// characters take at most utf8.UTFMax bytes each.
	head := r.Arguments[:min(len(r.Arguments), ArgumentsHeadLen*utf8.UTFMax)]
	s.ArgumentsHead, s.ArgumentsCut = ArgumentsHead(string(head))
	s.ArgumentsCut = s.ArgumentsCut || len(head) < len(r.Arguments)
	return s
}

// StoredBytes is how many bytes r holds of what can be large: its
// arguments, context, reasoning and description, and a command's input and
// observed state. RequestFilter.MaxBytes counts it (the stores sum the same
// columns in SQL, so that a page ends before the rows it leaves out are
// read).
func (r Request) StoredBytes() int {
	n := len(r.Arguments) + len(r.Context) + len(r.AgentReasoning) + len(r.Description)
	if r.Proposal != nil && r.Proposal.Command != nil {
		n += len(r.Proposal.Command.Input) + len(r.Proposal.Command.Observed)
	}
	return n
}

// Decision is the terminal outcome recorded on a request. Status equals the
// request's state. ExpiresAt is set only for approvals: permission to start
// the call ends then.
type Decision struct {
	Status    State
	Note      string
	Answer    string
	DecidedAt time.Time
	// DecidedBy is the token that decided, or a system actor such as
	// ActorExpiry or ActorPolicy.
	DecidedBy string
	// DecidedByName is the deciding token's name, or the OIDC reviewer's
	// (docs/teams.md), read by the store with the request; for a decider
	// that is neither (a system actor, a
	// policy rule, a grant) it is DecidedBy itself.
	DecidedByName string
	ExpiresAt     *time.Time
	// Review is what the deciding reviewer's client said it showed them
	// of the arguments: its claim, recorded with the decision, never
	// checked (docs/protocol.md, "What the reviewer's client claims").
	Review *ReviewClaim
}

// ReviewClaim is a reviewer's client's claim about a decision: the
// fraction of the arguments it had on screen (0 to 1) and the seconds
// the request was open before the decision.
type ReviewClaim struct {
	SeenFraction float64 `json:"seen_fraction"`
	SecondsOpen  int     `json:"seconds_open"`
}

// MaxReviewSeconds bounds a review claim's seconds_open (a week).
const MaxReviewSeconds = 7 * 24 * 3600

// Check refuses a claim no client could make.
func (rc *ReviewClaim) Check() error {
	if rc == nil {
		return nil
	}
	if !(rc.SeenFraction >= 0 && rc.SeenFraction <= 1) {
		return Invalid("review", "review.seen_fraction must be between 0 and 1")
	}
	if rc.SecondsOpen < 0 || rc.SecondsOpen > MaxReviewSeconds {
		return Invalid("review", "review.seconds_open must be between 0 and %d", MaxReviewSeconds)
	}
	return nil
}

// Encode is the claim as stored: its JSON, or "" for none.
func (rc *ReviewClaim) Encode() string {
	if rc == nil {
		return ""
	}
	b, _ := json.Marshal(rc) // a float and an int always encode
	return string(b)
}

// DecodeReviewClaim reads a stored claim; "" (or anything unreadable) is
// none.
func DecodeReviewClaim(s string) *ReviewClaim {
	if s == "" {
		return nil
	}
	var rc ReviewClaim
	if json.Unmarshal([]byte(s), &rc) != nil {
		return nil
	}
	return &rc
}

// DeciderName is the name people read a decider by: the deciding token's
// name, read by a store with the request, or an OIDC reviewer's name from
// the reviewer directory (ReviewerProfile), or, when decidedBy names
// neither (a system actor, a policy rule, a grant), decidedBy as it is.
func DeciderName(decidedBy, tokenName string) string {
	if tokenName != "" {
		return tokenName
	}
	return decidedBy
}

// ExecutionStatus is the state of the single execution attempt.
type ExecutionStatus string

// Execution statuses: claimed until the adapter reports an outcome.
const (
	ExecClaimed   ExecutionStatus = "claimed"
	ExecSucceeded ExecutionStatus = "succeeded"
	ExecFailed    ExecutionStatus = "failed"
	ExecUnknown   ExecutionStatus = "unknown"
)

// Valid reports whether s is an outcome an adapter may report.
func (s ExecutionStatus) Valid() bool {
	return s == ExecSucceeded || s == ExecFailed || s == ExecUnknown
}

// Execution records the one execution attempt of an approved request.
type Execution struct {
	ClaimedAt  time.Time
	ClaimedBy  string
	Status     ExecutionStatus
	FinishedAt *time.Time
	Detail     string
	// ApprovalToken is the signed proof of the approval that the claim
	// hands the tool server (docs/tokens.md). Only the claim's own answer
	// carries it: it is never stored, so it is shown once.
	ApprovalToken string
}

// Proposal is an MCP request's proposal: advisory (execute nothing) or a
// typed command that executes atomically with the approval.
type Proposal struct {
	Mode    string   `json:"mode"`
	Command *Command `json:"command,omitempty"`
}

// Command is a typed, executable proposal.
type Command struct {
	Method string          `json:"method"`
	Input  json.RawMessage `json:"input"`
	// Observed is what the provider saw of the target when the command was
	// requested (for work_move, a WorkMoveObserved). The command applies
	// only while the target is still so, so the reviewer approves what they
	// saw. The provider sets it; it is never read from an agent's input.
	Observed json.RawMessage `json:"-"`
}

// Question asks the reviewer for an answer: free text when Choices is empty.
type Question struct {
	Choices []string `json:"choices,omitempty"`
}

// Instance is one running adapter (or MCP agent session). It owns requests;
// deleting it cancels its pending ones.
type Instance struct {
	ID       string
	OwnerID  string
	Name     string
	Metadata json.RawMessage
	// TokenAudience is the aud its approval tokens name, so a tool server
	// can refuse tokens meant for another (docs/tokens.md); "" for none.
	// It is set at registration and never changes.
	TokenAudience string
	CreatedAt     time.Time
	// PendingCount is filled on reads: how many of its requests are pending.
	PendingCount int
	// Kind tells a REST-registered adapter from an MCP agent session.
	// Stores fill it on reads ("adapter" for instances created without one).
	Kind InstanceKind
	// LastSeenAt is a session's last heartbeat; nil before the first.
	LastSeenAt *time.Time
	// ClosedAt is when a session was closed (or the instance deleted);
	// closed sessions stay readable so the inbox can list them.
	ClosedAt *time.Time
}

// System actors recorded in decisions and audit events.
const (
	ActorExpiry = "system:expiry"
	ActorPolicy = "system:policy"
)

// EventType names an audit event.
type EventType string

// Audit event types: one per kind of state change.
const (
	EventInstanceCreated   EventType = "instance.created"
	EventInstanceDeleted   EventType = "instance.deleted"
	EventRequestCreated    EventType = "request.created"
	EventRequestApproved   EventType = "request.approved"
	EventRequestDenied     EventType = "request.denied"
	EventRequestExpired    EventType = "request.expired"
	EventRequestCancelled  EventType = "request.cancelled"
	EventExecutionClaimed  EventType = "execution.claimed"
	EventExecutionReported EventType = "execution.reported"
	EventTokenCreated      EventType = "token.created"
	EventTokenRevoked      EventType = "token.revoked"
)

// StateEvent returns the event type recorded when a request enters s.
func StateEvent(s State) EventType {
	switch s {
	case StateApproved:
		return EventRequestApproved
	case StateDenied:
		return EventRequestDenied
	case StateExpired:
		return EventRequestExpired
	case StateCancelled:
		return EventRequestCancelled
	}
	return EventRequestCreated
}

// Event is one append-only audit record. IDs increase; the SSE stream uses
// them for Last-Event-ID resume.
type Event struct {
	ID         int64
	Type       EventType
	At         time.Time
	Actor      string
	RequestID  string
	InstanceID string
	TokenID    string
	// State is the request's state after the change, for request events.
	State State
	// Subject names what a board event changed: a work item's ID or a
	// column's key. Empty for other events.
	Subject string
	// PolicyHash is the hex SHA-256 of the policy file whose rule made
	// this decision; empty for every other event.
	PolicyHash string
	// UID is the event's random identity, drawn by the store when the
	// event is appended: unique across databases and across restores
	// from a backup, which ID, a sequence number, is not. Its webhook-id
	// is made of it (MessageIDFor). Empty for events appended before
	// stores drew one.
	UID string
	// TraceID and SpanID are the W3C trace context (lowercase hex) of the
	// call that appended the event, so that later spans can link to it
	// (docs/operations.md, "Telemetry"); empty when it was not traced.
	// A store fills them from the context of the write.
	TraceID, SpanID string
}

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

// CheckStorable refuses a request no store may keep with a decision window
// of window: an unknown kind, a window under the stores' microsecond, an
// idempotency key without a fingerprint, or routing outside its bounds.
// The provider validates a caller's input first, so this guards every
// store's invariants against a caller's bug, the same way in each.
func (r Request) CheckStorable(window time.Duration) error {
	switch {
	case !r.Kind.Valid():
		return Invalid("kind", "unknown kind %q", r.Kind)
	case window < time.Microsecond:
		// Stores keep microseconds: a shorter window would make the
		// deadline the creation instant, or before it.
		return Invalid("timeout", "a request needs a decision window of at least 1µs, so that deadline_at is after created_at")
	case r.Fingerprint == "" && r.IdempotencyKey != "":
		return Invalid("fingerprint", "an idempotent request needs a fingerprint to compare replays by")
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
	}
	for _, g := range append(slices.Clone(r.Reviewers), r.EscalateTo...) {
		if err := CheckGroupName(g); err != nil {
			return Invalid("reviewers", "%v", err)
		}
	}
	if err := CheckPreview(r.Preview); err != nil {
		return err
	}
	return CheckReversibility(r.Reversibility)
}

// CheckDecidedAtCreation refuses a decision of status, made by a policy
// when r is created, that no person saw: a command proposal or the
// approval of a question, a status other than approved or denied, or an
// approval valid for less than 1µs.
func (r Request) CheckDecidedAtCreation(status State, validity time.Duration) error {
	switch {
	case r.Proposal != nil && r.Proposal.Command != nil:
		return Invalid("proposal", "a command proposal cannot be decided at creation; a person must approve it")
	case status == StateApproved && !r.MayApproveAtCreation():
		return Invalid("question", "a question cannot be approved at creation; a person must answer it")
	case status == StateApproved:
		return CheckValidity(validity)
	case status != StateDenied:
		return Invalid("status", "a decision at creation must be approved or denied, not %q", status)
	}
	return nil
}

// CheckGrantable refuses the approval of r by a grant: grants approve tool
// calls only, never a command, a question, a request routed to reviewer
// groups or one needing several approvals.
func (r Request) CheckGrantable() error {
	switch {
	case r.Kind != KindToolCall || !r.MayApproveAtCreation():
		return Invalid("grant", "grants approve tool calls only, never a command or a question")
	case len(r.Reviewers) > 0 || r.NeedsQuorum():
		return Invalid("grant", "a request routed to reviewer groups or needing several approvals is never approved by a grant")
	}
	return nil
}

// Replay answers a create of r that inserted nothing because prev, a
// request of the same owner and idempotency key, exists: prev itself when
// it was made by the same call (the same fingerprint), else
// idempotency_conflict.
func (r Request) Replay(prev Request) (Request, error) {
	if prev.Fingerprint != r.Fingerprint {
		return Request{}, Errorf(CodeIdempotencyConflict,
			"idempotency key %q was already used for a different request (%s); use a new key for a new call", r.IdempotencyKey, prev.ID)
	}
	return prev, nil
}

// CheckValidity refuses an approval's validity under 1µs: stores keep
// microseconds, and expires_at must come after decided_at.
func CheckValidity(d time.Duration) error {
	if d < time.Microsecond {
		return Invalid("valid_for", "an approval needs a validity of at least 1µs, so that expires_at is after decided_at")
	}
	return nil
}

// CheckDecider applies the rules on who decides r: only a member of one of
// its reviewer groups decides a routed request, and a reviewer never
// decides (nor votes on) a request made by a token of their own principal.
// principal and groups are the decider's (an empty principal skips the
// self-approval rule); creatorPrincipal is the principal of the token that
// created r, empty when that token is unknown.
func (r Request) CheckDecider(principal string, groups []string, creatorPrincipal string) error {
	if !r.MayDecide(groups) {
		return r.RoutingRefusal()
	}
	if principal != "" && creatorPrincipal == principal {
		return Errorf(CodeForbidden, "you cannot decide a request made by your own token or principal; ask another reviewer")
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
	case r.State != StateApproved && r.ReplacedBy != "":
		return Conflict(CodeNotApproved, r.State,
			"request %s is %s: a reviewer approved it with changed arguments as request %s; this call may not run", r.ID, r.State, r.ReplacedBy)
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

// Limits of reviewer groups (docs/teams.md, "Groups, routing and quorum").
const (
	// MaxGroupNameLen bounds a group's name, which every surface shows:
	// the same bound as a group an identity provider brings.
	MaxGroupNameLen = MaxReviewerGroupLen
	// MaxRoutedGroups is the most groups one request may be routed (or
	// escalated) to.
	MaxRoutedGroups = 20
	// MaxApprovals is the most approvals a request may need.
	MaxApprovals = 20
)

// EventRequestVoted is the audit event of a vote on a request that needs
// several approvals (Request.Approvals > 1) and that did not end it: the
// vote that completes the quorum, or a denial, is the request's
// request.approved or request.denied event.
const EventRequestVoted EventType = "request.voted"

// EventRequestEscalated is appended once, when a pending request routed to
// groups is widened to its escalation groups (Store.EscalateDue).
const EventRequestEscalated EventType = "request.escalated"

// ActorEscalation is the actor of an escalation.
const ActorEscalation = "system:escalation"

// EventRequestPurged is appended once, when a terminal request's
// arguments, reasoning and context are purged under the server's payload
// retention (Request.PurgedAt): the audit log itself then says which
// requests' payloads are gone, and its leaves keep their digests.
const EventRequestPurged EventType = "request.purged"

// ActorRetention is the actor of a purge of payloads.
const ActorRetention = "system:retention"

// Vote is one reviewer's vote on a request that needs several approvals.
type Vote struct {
	// Principal is who voted; a principal votes once per request.
	Principal string
	// Actor is the token (or sign-in) the vote came through, and Name the
	// name people read it by (Actor itself when it names no token).
	Actor  string
	Name   string
	Status State // approved or denied
	Note   string
	At     time.Time
	// Review is the voter's client's claim (Decision.Review).
	Review *ReviewClaim
}

// CheckGroupName refuses a group name no surface can show safely, as
// ValidGroupName judges it (the same rule as for the groups an identity
// provider brings): empty, over MaxGroupNameLen bytes, not UTF-8, or with
// a control, invisible or bidirectional character.
func CheckGroupName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a group name may not be empty")
	case len(name) > MaxGroupNameLen:
		return fmt.Errorf("group name %.20q… is %d bytes; at most %d", name, len(name), MaxGroupNameLen)
	case !ValidGroupName(name):
		return fmt.Errorf("group name %q is not valid UTF-8 or has a control, invisible or bidirectional character; names are shown to people and must read as what they are", name)
	}
	return nil
}

// NeedsQuorum reports whether r is decided by votes: it needs more than one
// approval.
func (r Request) NeedsQuorum() bool { return r.Approvals > 1 }

// QuorumRequests finds those of rs that need several approvals: their IDs,
// and where each is in rs. A store reads their votes in one query.
func QuorumRequests(rs []Request) (ids []string, at map[string]int) {
	at = map[string]int{}
	for i, r := range rs {
		if r.NeedsQuorum() {
			at[r.ID] = i
			ids = append(ids, r.ID)
		}
	}
	return ids, at
}

// ApprovalsRequired is how many approvals r needs: at least 1.
func (r Request) ApprovalsRequired() int { return max(r.Approvals, 1) }

// ApprovedVotes counts the approving votes in r.Votes.
func (r Request) ApprovedVotes() int {
	n := 0
	for _, v := range r.Votes {
		if v.Status == StateApproved {
			n++
		}
	}
	return n
}

// MayDecide reports whether a caller in groups may decide r: r is routed
// to no group, or groups has one of r's.
func (r Request) MayDecide(groups []string) bool {
	if len(r.Reviewers) == 0 {
		return true
	}
	for _, g := range groups {
		if slices.Contains(r.Reviewers, g) {
			return true
		}
	}
	return false
}

// RoutingRefusal is the error of a decision by a caller in none of r's
// reviewer groups.
func (r Request) RoutingRefusal() *Error {
	return Errorf(CodeForbidden, "request %s is for %s: only members of %s may decide it; others may read it",
		r.ID, strings.Join(r.Reviewers, ", "), groupWord(len(r.Reviewers)))
}

func groupWord(n int) string {
	if n == 1 {
		return "that group"
	}
	return "those groups"
}

// DuplicateVote is the error of a second vote by one principal on r.
func (r Request) DuplicateVote(principal string) *Error {
	return Errorf(CodeForbidden,
		"%s has already voted on request %s; each reviewer votes once, and %d approvals from different people are needed", principal, r.ID, r.ApprovalsRequired())
}

// QuorumProgress says how far a request needing need approvals has come,
// as every surface shows it: "1 of 2 approvals (Ada)", naming who
// approved, in the order they did.
func QuorumProgress(need int, approvedBy []string) string {
	s := fmt.Sprintf("%d of %d approvals", len(approvedBy), need)
	if len(approvedBy) > 0 {
		s += " (" + strings.Join(approvedBy, ", ") + ")"
	}
	return s
}

// QuorumProgress is QuorumProgress for r's votes.
func (r Request) QuorumProgress() string {
	var names []string
	for _, v := range r.Votes {
		if v.Status == StateApproved {
			names = append(names, v.Name)
		}
	}
	return QuorumProgress(r.ApprovalsRequired(), names)
}

// CheckEditable refuses an approval of r with changed arguments: only a
// tool call's arguments are edited, never a command's input nor a
// question (docs/protocol.md, "Edits").
func (r Request) CheckEditable() error {
	switch {
	case r.Kind != KindToolCall:
		return Invalid("arguments", "only a tool call is approved with changed arguments; request %s is a %s", r.ID, r.Kind)
	case r.Proposal != nil && r.Proposal.Command != nil:
		return Invalid("arguments", "a command proposal is never approved with changed arguments")
	case r.Question != nil:
		return Invalid("arguments", "a question is answered, never approved with changed arguments")
	}
	return nil
}

// ApprovedWithChanges is how every surface names an edit's outcome.
const ApprovedWithChanges = "Approved with changes"

// EditSummary says, for people, how an edit touched r: on the original,
// that it was approved with changes as its replacement (and so denied,
// never to run); on the replacement, which request it was edited from;
// "" on any other request.
func (r Request) EditSummary() string {
	switch {
	case r.ReplacedBy != "":
		return ApprovedWithChanges + " as request " + r.ReplacedBy + "; this call was denied and never runs"
	case r.DerivedFrom != "":
		return ApprovedWithChanges + ": a reviewer edited the arguments of request " + r.DerivedFrom
	}
	return ""
}
