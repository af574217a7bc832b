package client

import (
	"encoding/json"
	"time"

	"github.com/airlockhq/airlock"
)

// The resources of the REST API (rest/openapi.yaml), as the server sends
// them. Optional fields the server omits are zero here. Arguments and
// Context keep the bytes the server sent, which are the bytes submitted.

// Instance is one running adapter; it owns its requests.
type Instance struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// TokenAudience is the aud of its approval tokens; "" for none.
	TokenAudience string `json:"token_audience,omitempty"`
	// CreatedAt is when the instance was registered.
	CreatedAt time.Time `json:"created_at"`
	// PendingCount is how many of its requests were pending when read.
	PendingCount int `json:"pending_count"`
}

// ApprovalRequest asks whether one call may run: the tool and exact
// arguments, the window, the agent's claim and what the adapter observed;
// once terminal, the decision; once claimed, the execution.
type ApprovalRequest struct {
	ID         string `json:"id"`
	InstanceID string `json:"instance_id"`
	// InstanceName and CreatedByName are the instance's and the creating
	// agent token's names, for people to read; empty when gone.
	InstanceName  string        `json:"instance_name,omitempty"`
	CreatedByName string        `json:"created_by_name,omitempty"`
	State         airlock.State `json:"state"`
	Kind          airlock.Kind  `json:"kind"`
	Tool          string        `json:"tool,omitempty"`
	// Arguments are exactly as submitted.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Timeout is the window as asked, verbatim.
	Timeout string `json:"timeout,omitempty"`
	// AgentReasoning is the agent's claim, unverified.
	AgentReasoning string          `json:"agent_reasoning,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
	// PurgedAt is when the server's payload retention purged Arguments,
	// AgentReasoning and Context, which are then empty: purged, not
	// absent. Nil while the server keeps them.
	PurgedAt  *time.Time `json:"purged_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	// DeadlineAt is when a still-pending request expires.
	DeadlineAt time.Time `json:"deadline_at"`
	// Preview and Reversibility are what the adapter claimed at creation.
	Preview       *airlock.Preview `json:"preview,omitempty"`
	Reversibility string           `json:"reversibility,omitempty"`
	// DerivedFrom, on a request a reviewer made by approving another with
	// changed arguments (an edit, docs/protocol.md), is the original.
	DerivedFrom string     `json:"derived_from,omitempty"`
	Decision    *Decision  `json:"decision,omitempty"`
	Execution   *Execution `json:"execution,omitempty"`
	// Replacement is set only in the answer to an edit: the request
	// approved in this one's place.
	Replacement *ApprovalRequest `json:"replacement,omitempty"`

	// Fields of requests made through MCP (docs/mcp.md).
	Title         string         `json:"title,omitempty"`
	Description   string         `json:"description,omitempty"`
	TargetType    string         `json:"target_type,omitempty"`
	TargetID      string         `json:"target_id,omitempty"`
	SessionID     string         `json:"session_id,omitempty"`
	Proposal      *Proposal      `json:"proposal,omitempty"`
	Question      *Question      `json:"question,omitempty"`
	CommandResult *CommandResult `json:"command_result,omitempty"`
	// Grant is set only in the answer to a decision that made a grant.
	Grant *Grant `json:"grant,omitempty"`
	// Reviewers are the groups whose members alone may decide the request.
	Reviewers []string `json:"reviewers,omitempty"`
	// Approvals and Votes are set when the request needs several
	// approvals: how many, and the votes cast so far.
	Approvals int    `json:"approvals,omitempty"`
	Votes     []Vote `json:"votes,omitempty"`
	// EscalateTo are the groups the request is widened to when it waits;
	// EscalatedAt is when it was.
	EscalateTo  []string   `json:"escalate_to,omitempty"`
	EscalatedAt *time.Time `json:"escalated_at,omitempty"`
}

// Vote is one reviewer's vote on a request needing several approvals.
type Vote struct {
	Principal string        `json:"principal"`
	Name      string        `json:"name"`
	Status    airlock.State `json:"status"`
	Note      string        `json:"note,omitempty"`
	At        time.Time     `json:"at"`
	// Review is the voter's client's claim (airlock.ReviewClaim).
	Review *airlock.ReviewClaim `json:"review,omitempty"`
}

// Decision is a request's terminal outcome; Status equals its State.
type Decision struct {
	Status airlock.State `json:"status"`
	// Note informs the agent; it never changes what was approved.
	Note      string    `json:"note,omitempty"`
	Answer    string    `json:"answer,omitempty"`
	DecidedAt time.Time `json:"decided_at"`
	// DecidedBy is the deciding token's ID, or a system actor such as
	// airlock.ActorExpiry.
	DecidedBy string `json:"decided_by,omitempty"`
	// DecidedByName is who decided, for people to read: the deciding
	// token's name, or DecidedBy itself when that names no token.
	DecidedByName string `json:"decided_by_name,omitempty"`
	// ExpiresAt, for approvals only, is when permission to start the call
	// ends. Re-reads and replays never extend it.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// ReplacedBy, on a denial that is an edit ("approved with changes"),
	// is the request approved in this one's place, with the reviewer's
	// arguments. This request never runs.
	ReplacedBy string `json:"replaced_by,omitempty"`
	// Review is what the deciding reviewer's client claimed it showed
	// them (docs/protocol.md); recorded, never checked.
	Review *airlock.ReviewClaim `json:"review,omitempty"`
	// Votes are the votes that decided a request needing several approvals.
	Votes []Vote `json:"votes,omitempty"`
}

// Execution is the one execution attempt of an approved request.
type Execution struct {
	ClaimedAt  time.Time               `json:"claimed_at"`
	Status     airlock.ExecutionStatus `json:"status"`
	FinishedAt *time.Time              `json:"finished_at,omitempty"`
	Detail     string                  `json:"detail,omitempty"`
	// ApprovalToken is the signed proof of the approval for the tool
	// server (docs/tokens.md): only the answer of ClaimExecution carries
	// it.
	ApprovalToken string `json:"approval_token,omitempty"`
}

// Proposal is an MCP request's proposal: advisory, or a command Airlock
// executes with the approval.
type Proposal struct {
	Mode    string   `json:"mode"`
	Command *Command `json:"command,omitempty"`
}

// Command is a typed command proposal (work_move).
type Command struct {
	Method string          `json:"method"`
	Input  json.RawMessage `json:"input,omitempty"`
	// Observed is what the server saw of the target when the command was
	// asked for (for work_move: the item's column and title).
	Observed json.RawMessage `json:"observed,omitempty"`
}

// Question is an MCP agent's question; free text when Choices is empty.
// The server sends it as the domain keeps it.
type Question = airlock.Question

// CommandResult is what an approved command did.
type CommandResult struct {
	Status    string    `json:"status"`
	Detail    string    `json:"detail,omitempty"`
	AppliedAt time.Time `json:"applied_at"`
}

// ExpiresAt returns when permission to start the call ends, and false
// unless the request is approved.
func (r *ApprovalRequest) ExpiresAt() (time.Time, bool) {
	if r == nil || r.State != airlock.StateApproved || r.Decision == nil || r.Decision.ExpiresAt == nil {
		return time.Time{}, false
	}
	return *r.Decision.ExpiresAt, true
}

// Note returns the decision's note, or "".
func (r *ApprovalRequest) Note() string {
	if r == nil || r.Decision == nil {
		return ""
	}
	return r.Decision.Note
}

// CreateRequestInput is the body of a create (CreateApprovalRequest).
type CreateRequestInput struct {
	// Tool is the intercepted tool's name, exactly.
	Tool string
	// Arguments are the intercepted call's exact arguments, a JSON object.
	// They are sent byte for byte; nil sends {}.
	Arguments json.RawMessage
	// Timeout is the decision window asked for, a Go ("30m") or ISO 8601
	// ("PT30M") duration; "" takes the server's default (15m).
	Timeout string
	// AgentReasoning is the agent's claim about why (shown as a claim).
	AgentReasoning string
	// Context is what the adapter observed, a JSON object, or nil.
	Context json.RawMessage
	// Preview and Reversibility are the adapter's claims about the call
	// (docs/protocol.md, "What the adapter claims"): a diff or text of
	// its effect, and reversible, partial or irreversible. Optional;
	// reviewers see them as the adapter's claims, beside the arguments.
	Preview       *airlock.Preview
	Reversibility string
}

// RequestPage is one page of a list, newest first.
type RequestPage struct {
	Items []ApprovalRequest `json:"items"`
	// NextCursor continues the list; "" on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListRequestsOptions filters a list. Zero fields do not filter.
type ListRequestsOptions struct {
	State      airlock.State
	InstanceID string
	Tool       string
	Kind       airlock.Kind
	// Cursor is a previous page's NextCursor.
	Cursor string
	// Limit is the most requests on a page, 1 to 200 (0: the server's
	// default, 50); a page of large requests ends sooner.
	Limit int
}

// DecisionInput is a reviewer's decision.
type DecisionInput struct {
	// Status is airlock.StateApproved or airlock.StateDenied.
	Status airlock.State `json:"status"`
	Note   string        `json:"note,omitempty"`
	// Answer answers the request's question (approvals only).
	Answer string `json:"answer,omitempty"`
	// ValidFor is how long an approved call may start, a Go or ISO 8601
	// duration; "" takes the server's default (5m).
	ValidFor string `json:"valid_for,omitempty"`
	// Grant, with an approval of a tool call, also makes a grant for the
	// same call: the answer's Grant.
	Grant *airlock.DecisionGrant `json:"grant,omitempty"`
	// Arguments, with an approval of a tool call, are the arguments
	// approved instead of the request's (an edit, docs/protocol.md): the
	// request ends denied and the answer's Replacement, with these
	// arguments, is approved in its place.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Review is what your client showed the reviewer of the arguments,
	// recorded with the decision as its claim (docs/protocol.md).
	Review *airlock.ReviewClaim `json:"review,omitempty"`
}

// BatchDecisionInput is one decision of several requests
// (docs/protocol.md, "Batch decisions"): 1 to 100 ids, none twice, each
// decided as Decide decides it alone. A batch never edits, answers a
// question or makes a grant.
type BatchDecisionInput struct {
	IDs []string `json:"ids"`
	// Status is airlock.StateApproved or airlock.StateDenied.
	Status airlock.State `json:"status"`
	Note   string        `json:"note,omitempty"`
	// ValidFor is how long each approved call may start; "" takes the
	// server's default (5m).
	ValidFor string `json:"valid_for,omitempty"`
}

// BatchResult is what a batch decision did to one id: Request, the
// request its decision left (decided, or pending with one more vote), or
// Err, the refusal the id would have been answered alone.
type BatchResult struct {
	ID      string
	Request *ApprovalRequest
	Err     *Error
}

// Token is a bearer credential as listed (never with its secret).
type Token struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Role      airlock.Role `json:"role"`
	Scopes    []string     `json:"scopes,omitempty"`
	Principal string       `json:"principal,omitempty"`
	CreatedAt time.Time    `json:"created_at"`
	CreatedBy string       `json:"created_by,omitempty"`
	RevokedAt *time.Time   `json:"revoked_at,omitempty"`
}

// CreatedToken is a new token with its secret, which the server shows only
// in this answer.
type CreatedToken struct {
	Token
	Secret string `json:"secret"`
}

// CreateTokenInput mints a token.
type CreateTokenInput struct {
	Name   string       `json:"name"`
	Role   airlock.Role `json:"role"`
	Scopes []string     `json:"scopes,omitempty"`
	// Principal names who holds the token; a reviewer cannot decide
	// requests of a token with the same principal. Default: the token's ID.
	Principal string `json:"principal,omitempty"`
}

// Event is one audit record of the event stream.
type Event struct {
	ID         int64             `json:"id"`
	Type       airlock.EventType `json:"type"`
	At         time.Time         `json:"at"`
	Actor      string            `json:"actor,omitempty"`
	RequestID  string            `json:"request_id,omitempty"`
	InstanceID string            `json:"instance_id,omitempty"`
	TokenID    string            `json:"token_id,omitempty"`
	State      airlock.State     `json:"state,omitempty"`
	Subject    string            `json:"subject,omitempty"`
}

// EventData is one server-sent event: the audit event and, for request
// events, the request as it was when sent.
type EventData struct {
	Event   Event            `json:"event"`
	Request *ApprovalRequest `json:"request,omitempty"`
}

// Board is the work board: columns in order, each with its items.
type Board struct {
	Columns []Column `json:"columns"`
}

// Column is one board column with its items, oldest first.
type Column struct {
	Key      string     `json:"key"`
	Name     string     `json:"name"`
	Position int        `json:"position"`
	Items    []WorkItem `json:"items"`
}

// WorkItem is a card on the board.
type WorkItem struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	ColumnKey string    `json:"column_key"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// WorkItemUpdate renames or moves a work item; nil fields stay.
type WorkItemUpdate struct {
	Title     *string `json:"title,omitempty"`
	ColumnKey *string `json:"column_key,omitempty"`
	// IfVersion applies the change only at this version (0: any).
	IfVersion int `json:"if_version,omitempty"`
}

// Session is an MCP agent's session.
type Session struct {
	ID       string          `json:"id"`
	OwnerID  string          `json:"owner_id"`
	Name     string          `json:"name"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Status is active, waiting, stale or closed.
	Status       airlock.SessionStatus `json:"status"`
	PendingCount int                   `json:"pending_count"`
	CreatedAt    time.Time             `json:"created_at"`
	LastSeenAt   *time.Time            `json:"last_seen_at,omitempty"`
	ClosedAt     *time.Time            `json:"closed_at,omitempty"`
}
