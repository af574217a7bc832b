package airlock

import (
	"encoding/json"
	"errors"
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
