package airlock

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// MCPRequestInput is the input of the MCP tool approval_request, with the
// brief's field names. Pointers mark the optional fields whose absence
// differs from a zero value.
type MCPRequestInput struct {
	Kind        Kind      `json:"kind"`
	Title       string    `json:"title"`
	Description string    `json:"description,omitempty"`
	TargetType  string    `json:"targetType,omitempty"`
	TargetID    string    `json:"targetId,omitempty"`
	Proposal    *Proposal `json:"proposal"`
	SessionID   string    `json:"sessionId,omitempty"`
	// ExpiresInMinutes is the decision window; absent means the provider's
	// longest window (its max-timeout), so every request has a deadline.
	ExpiresInMinutes *int      `json:"expiresInMinutes,omitempty"`
	Question         *Question `json:"question,omitempty"`
	IdempotencyKey   string    `json:"idempotencyKey"`
}

// Validate checks every field; each error names the field and the rule,
// so an agent can fix its call.
func (in *MCPRequestInput) Validate() error {
	switch {
	case in.Kind == "":
		return Invalid("kind", "kind is required: one of work_change, memory_change, life_change, agent_request")
	case in.Kind == KindToolCall || !in.Kind.Valid():
		return Invalid("kind", "kind must be one of work_change, memory_change, life_change, agent_request")
	}
	if err := checkText("title", in.Title, 1, MaxTitleLen); err != nil {
		return err
	}
	if err := checkText("description", in.Description, 0, MaxDescriptionLen); err != nil {
		return err
	}
	if err := checkText("targetType", in.TargetType, 0, MaxTargetLen); err != nil {
		return err
	}
	if err := checkText("targetId", in.TargetID, 0, MaxTargetLen); err != nil {
		return err
	}
	if err := in.validateProposal(); err != nil {
		return err
	}
	if err := checkText("sessionId", in.SessionID, 0, MaxIDLen); err != nil {
		return err
	}
	if m := in.ExpiresInMinutes; m != nil && (*m < MinExpiresInMinutes || *m > MaxExpiresInMinutes) {
		return Invalid("expiresInMinutes", "expiresInMinutes must be between %d and %d (got %d)", MinExpiresInMinutes, MaxExpiresInMinutes, *m)
	}
	if err := in.validateQuestion(); err != nil {
		return err
	}
	return checkMCPKey(in.IdempotencyKey)
}

func (in *MCPRequestInput) validateProposal() error {
	p := in.Proposal
	if p == nil {
		return Invalid("proposal", `proposal is required: {"mode":"advisory"}, or {"mode":"command","command":{"method":"work_move","input":{"itemId":"…","columnKey":"…"}}}`)
	}
	switch p.Mode {
	case ProposalAdvisory:
		if p.Command != nil {
			return Invalid("proposal.command", "proposal.command is only allowed with mode command; an advisory proposal executes nothing")
		}
		return nil
	case ProposalCommand:
		if p.Command == nil {
			return Invalid("proposal.command", "proposal.command is required with mode command")
		}
		if p.Command.Method != MethodWorkMove {
			return Invalid("proposal.command.method", "proposal.command.method must be work_move, the only supported command (got %q)", clip(p.Command.Method))
		}
		_, err := ParseWorkMove(p.Command.Input)
		return err
	case "":
		return Invalid("proposal.mode", "proposal.mode is required: advisory or command")
	default:
		return Invalid("proposal.mode", "proposal.mode must be advisory or command (got %q)", clip(p.Mode))
	}
}

func (in *MCPRequestInput) validateQuestion() error {
	q := in.Question
	if q == nil {
		return nil
	}
	if in.Kind != KindAgentRequest || in.Proposal.Mode != ProposalAdvisory {
		return Invalid("question", "question is only allowed with kind agent_request and an advisory proposal")
	}
	if q.Choices == nil {
		return nil // free text
	}
	if n := len(q.Choices); n < MinChoices || n > MaxChoices {
		return Invalid("question.choices", "question.choices must have between %d and %d choices (got %d); omit choices for a free-text answer", MinChoices, MaxChoices, n)
	}
	seen := make(map[string]bool, len(q.Choices))
	for i, c := range q.Choices {
		field := fmt.Sprintf("question.choices[%d]", i)
		if !utf8.ValidString(c) || strings.IndexByte(c, 0) >= 0 {
			return Invalid(field, "%s must be valid UTF-8 without NUL", field)
		}
		// Characters, not bytes: the JSON Schema of the brief counts so.
		if n := utf8.RuneCountInString(c); n < 1 || n > MaxChoiceLen {
			return Invalid(field, "%s must be 1 to %d characters (got %d)", field, MaxChoiceLen, n)
		}
		if seen[c] {
			return Invalid("question.choices", "choices must be distinct: %q appears more than once", clip(c))
		}
		seen[c] = true
	}
	return nil
}

// checkMCPKey applies CheckIdempotencyKey's rules to idempotencyKey, with
// messages that name the MCP field.
func checkMCPKey(key string) error {
	if err := CheckIdempotencyKey(key); err != nil {
		if key == "" {
			return Invalid("idempotencyKey", "idempotencyKey is required: send a unique key per intended request and reuse it on retries")
		}
		if len(key) > MaxIdempotencyKey {
			return Invalid("idempotencyKey", "idempotencyKey must be at most %d characters", MaxIdempotencyKey)
		}
		return Invalid("idempotencyKey", "idempotencyKey must be printable ASCII without spaces")
	}
	return nil
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
	if err := checkText(at+".itemId", in.ItemID, 1, MaxIDLen); err != nil {
		return in, err
	}
	if err := checkColumnKey(at+".columnKey", in.ColumnKey); err != nil {
		return in, err
	}
	return in, nil
}

// Window returns the decision window asked for, before the provider's
// limits: expiresInMinutes, or 0 when absent.
func (in *MCPRequestInput) Window() time.Duration {
	if in.ExpiresInMinutes == nil {
		return 0
	}
	return time.Duration(*in.ExpiresInMinutes) * time.Minute
}

// Timeout returns the window as asked, in the request's Timeout form
// ("30m"), or "" when none was asked.
func (in *MCPRequestInput) Timeout() string {
	if in.ExpiresInMinutes == nil {
		return ""
	}
	return strconv.Itoa(*in.ExpiresInMinutes) + "m"
}

// Fingerprint returns the hash of the canonical validated input, without
// its idempotency key: a retry with the same key and the same input
// replays the original request; any other input is idempotency_conflict.
// What the provider observes (Command.Observed) is not part of it, so a
// replay still matches after the target has changed.
func (in *MCPRequestInput) Fingerprint() (string, error) {
	mode, method, input := "", "", []byte(nil)
	if p := in.Proposal; p != nil {
		mode = p.Mode
		if p.Command != nil {
			method = p.Command.Method
			var err error
			if input, err = Canonical(p.Command.Input); err != nil {
				return "", fmt.Errorf("canonical command input: %w", err)
			}
		}
	}
	expires := ""
	if in.ExpiresInMinutes != nil {
		expires = strconv.Itoa(*in.ExpiresInMinutes)
	}
	question := []byte("none")
	if in.Question != nil {
		var err error
		if question, err = json.Marshal(in.Question); err != nil {
			return "", fmt.Errorf("question: %w", err)
		}
	}
	h := sha256.New()
	for _, part := range [][]byte{
		[]byte("mcp_request/v1"), []byte(in.Kind), []byte(in.Title), []byte(in.Description),
		[]byte(in.TargetType), []byte(in.TargetID), []byte(mode), []byte(method), input,
		[]byte(in.SessionID), []byte(expires), question,
	} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
