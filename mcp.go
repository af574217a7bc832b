package airlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Proposal modes of an MCP request (docs/mcp.md).
const (
	// ProposalAdvisory records the decision and executes nothing.
	ProposalAdvisory = "advisory"
	// ProposalCommand executes its typed command in the transaction that
	// records the approval.
	ProposalCommand = "command"
)

// MethodWorkMove is the one supported command: move a work item to another
// column of the board.
const MethodWorkMove = "work_move"

// MCP input limits.
const (
	// MinExpiresInMinutes and MaxExpiresInMinutes bound expiresInMinutes
	// (5 minutes to 7 days), as the MCP brief's schema does.
	MinExpiresInMinutes = 5
	MaxExpiresInMinutes = 10080
	// MaxTargetLen bounds targetType and targetId; MaxIDLen bounds IDs sent
	// as input (sessionId, itemId).
	MaxTargetLen = 200
	MaxIDLen     = 200
)

// MCPKinds are the kinds an MCP agent may choose; tool_call is the REST
// adapters' own.
var MCPKinds = []Kind{KindWorkChange, KindMemoryChange, KindLifeChange, KindAgentRequest}

// WorkMoveInput is a work_move command's input: move ItemID to ColumnKey.
type WorkMoveInput struct {
	ItemID    string `json:"itemId"`
	ColumnKey string `json:"columnKey"`
}

// WorkMoveObserved is what the provider saw of a work_move's item when the
// command was requested, stored as Command.Observed. The move applies only
// while the item is still in FromColumnKey.
type WorkMoveObserved struct {
	FromColumnKey string `json:"fromColumnKey"`
	ItemTitle     string `json:"itemTitle"`
}

// CommandApplied is the status of a command that ran.
const CommandApplied = "applied"

// CommandResult is the outcome of an approved command, recorded in the
// same transaction as the approval. A command that cannot apply leaves no
// approval behind (the decision fails with command_failed), so the only
// recorded status is CommandApplied.
type CommandResult struct {
	Status    string
	Detail    string
	AppliedAt time.Time
}

// ParseWorkMove strictly decodes and checks a work_move command's input:
// exactly itemId and columnKey, both set. Errors name the field under
// proposal.command.input.
func ParseWorkMove(raw json.RawMessage) (WorkMoveInput, error) {
	const at = "proposal.command.input"
	var in WorkMoveInput
	if isNull(raw) {
		return in, Invalid(at, "%s is required: {\"itemId\":\"…\",\"columnKey\":\"…\"}", at)
	}
	if !isObject(raw) {
		return in, Invalid(at, "%s must be a JSON object", at)
	}
	if err := DecodeObject(raw, &in); err != nil {
		var e *Error
		if errors.As(err, &e) {
			field := at
			if e.Field != "" {
				field += "." + e.Field
			}
			return in, Invalid(field, "%s: %s", at, e.Message)
		}
		return in, err
	}
	if err := CheckText(at+".itemId", in.ItemID, 1, MaxIDLen); err != nil {
		return in, err
	}
	if err := checkColumnKey(at+".columnKey", in.ColumnKey); err != nil {
		return in, err
	}
	return in, nil
}

// An approved command proposal runs in the transaction that records its
// approval, and the store re-checks there what the reviewer approved: that
// the requesting token may still run it and that the target is still as
// the request saw it. The rules and the words of those checks are here, so
// that every store applies and tells them alike; the stores do the reads
// and the compare-and-set.

// CommandFailed is the error of an approval of r whose command cannot
// apply, for the reason format says. The approval's transaction rolls
// back, so r is still pending, and the message says what the reviewer can
// do instead.
func CommandFailed(r Request, format string, args ...any) *Error {
	return Conflict(CodeCommandFailed, StatePending,
		"%s cannot apply: %s; nothing was recorded and request %s is still pending (deny it, or let it expire)",
		r.Proposal.Command.Method, fmt.Sprintf(format, args...), r.ID)
}

// UnknownCommand is the error of an approval of r whose command's method
// this server does not know (a request stored by another version).
func UnknownCommand(r Request) *Error {
	return CommandFailed(r, "this server does not know the command %q", r.Proposal.Command.Method)
}

// WorkMove is a work_move command as its request stores it, read back for
// the transaction that approves the request.
type WorkMove struct {
	Request  Request
	Input    WorkMoveInput
	Observed WorkMoveObserved
}

// StoredWorkMove reads r's work_move command. It is command_failed when r
// records no observed state of the item to check the move against; stored
// JSON that does not decode is a plain error, a store's bug.
func (r Request) StoredWorkMove() (WorkMove, error) {
	m := WorkMove{Request: r}
	cmd := r.Proposal.Command
	if err := json.Unmarshal(cmd.Input, &m.Input); err != nil {
		return WorkMove{}, fmt.Errorf("request %s: stored work_move input: %w", r.ID, err)
	}
	if len(cmd.Observed) == 0 {
		return WorkMove{}, CommandFailed(r, "the request records no observed state of item %s to check it against", m.Input.ItemID)
	}
	if err := json.Unmarshal(cmd.Observed, &m.Observed); err != nil {
		return WorkMove{}, fmt.Errorf("request %s: stored work_move observation: %w", r.ID, err)
	}
	return m, nil
}

// CheckToken refuses the move unless the token that requested it may
// still run it: tok is that token as it is now, nil when it no longer
// exists. It must be live and still have the work:write scope.
func (m WorkMove) CheckToken(tok *Token) error {
	switch {
	case tok == nil:
		return CommandFailed(m.Request, "the requesting token %s no longer exists", m.Request.OwnerID)
	case tok.RevokedAt != nil:
		return CommandFailed(m.Request, "the requesting agent's token %s was revoked at %s", tok.ID, tok.RevokedAt.Format(time.RFC3339Nano))
	case !tok.HasScope(ScopeWorkWrite):
		return CommandFailed(m.Request, "the requesting agent's token %s no longer has the %s scope", tok.ID, ScopeWorkWrite)
	}
	return nil
}

// Lost is the error of a move whose compare-and-set (the item still in
// Observed.FromColumnKey, the destination column still there) changed
// nothing: cur is the item as it is now, nil when it no longer exists.
func (m WorkMove) Lost(cur *WorkItem) *Error {
	switch {
	case cur == nil:
		return CommandFailed(m.Request, "item %s no longer exists", m.Input.ItemID)
	case cur.ColumnKey != m.Observed.FromColumnKey:
		return CommandFailed(m.Request, "item %s is no longer in column %s (now in %s)", m.Input.ItemID, m.Observed.FromColumnKey, cur.ColumnKey)
	default:
		return CommandFailed(m.Request, "column %s no longer exists", m.Input.ColumnKey)
	}
}

// Detail is the command result's detail of the move that left the item
// as moved.
func (m WorkMove) Detail(moved WorkItem) string {
	return fmt.Sprintf("moved work item %s from %s to %s (now version %d)", moved.ID, m.Observed.FromColumnKey, moved.ColumnKey, moved.Version)
}

// Event is the audit event of the move that left the item as moved, by
// the reviewer who approved it; the store dates it.
func (m WorkMove) Event(moved WorkItem) Event {
	actor := ""
	if d := m.Request.Decision; d != nil {
		actor = d.DecidedBy
	}
	return Event{Type: EventWorkItemMoved, Actor: actor, RequestID: m.Request.ID, InstanceID: m.Request.InstanceID, Subject: moved.ID}
}
