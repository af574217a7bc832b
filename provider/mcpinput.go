package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// MCPRequestInput is the input of the MCP tool approval_request, with the
// brief's field names. Pointers mark the optional fields whose absence
// differs from a zero value.
type MCPRequestInput struct {
	Kind        airlock.Kind      `json:"kind"`
	Title       string            `json:"title"`
	Description string            `json:"description,omitempty"`
	TargetType  string            `json:"targetType,omitempty"`
	TargetID    string            `json:"targetId,omitempty"`
	Proposal    *airlock.Proposal `json:"proposal"`
	SessionID   string            `json:"sessionId,omitempty"`
	// ExpiresInMinutes is the decision window; absent means the provider's
	// longest window (its max-timeout), so every request has a deadline.
	ExpiresInMinutes *int              `json:"expiresInMinutes,omitempty"`
	Question         *airlock.Question `json:"question,omitempty"`
	IdempotencyKey   string            `json:"idempotencyKey"`
}

// Validate checks every field; each error names the field and the rule,
// so an agent can fix its call.
func (in *MCPRequestInput) Validate() error {
	switch {
	case in.Kind == "":
		return airlock.Invalid("kind", "kind is required: one of work_change, memory_change, life_change, agent_request")
	case in.Kind == airlock.KindToolCall || !in.Kind.Valid():
		return airlock.Invalid("kind", "kind must be one of work_change, memory_change, life_change, agent_request")
	}
	if err := airlock.CheckText("title", in.Title, 1, airlock.MaxTitleLen); err != nil {
		return err
	}
	if err := airlock.CheckText("description", in.Description, 0, airlock.MaxDescriptionLen); err != nil {
		return err
	}
	if err := airlock.CheckText("targetType", in.TargetType, 0, airlock.MaxTargetLen); err != nil {
		return err
	}
	if err := airlock.CheckText("targetId", in.TargetID, 0, airlock.MaxTargetLen); err != nil {
		return err
	}
	if err := in.validateProposal(); err != nil {
		return err
	}
	if err := airlock.CheckText("sessionId", in.SessionID, 0, airlock.MaxIDLen); err != nil {
		return err
	}
	if m := in.ExpiresInMinutes; m != nil && (*m < airlock.MinExpiresInMinutes || *m > airlock.MaxExpiresInMinutes) {
		return airlock.Invalid("expiresInMinutes", "expiresInMinutes must be between %d and %d (got %d)", airlock.MinExpiresInMinutes, airlock.MaxExpiresInMinutes, *m)
	}
	if err := in.validateQuestion(); err != nil {
		return err
	}
	return checkMCPKey(in.IdempotencyKey)
}

func (in *MCPRequestInput) validateProposal() error {
	p := in.Proposal
	if p == nil {
		return airlock.Invalid("proposal", `proposal is required: {"mode":"advisory"}, or {"mode":"command","command":{"method":"work_move","input":{"itemId":"…","columnKey":"…"}}}`)
	}
	switch p.Mode {
	case airlock.ProposalAdvisory:
		if p.Command != nil {
			return airlock.Invalid("proposal.command", "proposal.command is only allowed with mode command; an advisory proposal executes nothing")
		}
		return nil
	case airlock.ProposalCommand:
		if p.Command == nil {
			return airlock.Invalid("proposal.command", "proposal.command is required with mode command")
		}
		if p.Command.Method != airlock.MethodWorkMove {
			return airlock.Invalid("proposal.command.method", "proposal.command.method must be work_move, the only supported command (got %q)", airlock.Clip(p.Command.Method))
		}
		_, err := airlock.ParseWorkMove(p.Command.Input)
		return err
	case "":
		return airlock.Invalid("proposal.mode", "proposal.mode is required: advisory or command")
	default:
		return airlock.Invalid("proposal.mode", "proposal.mode must be advisory or command (got %q)", airlock.Clip(p.Mode))
	}
}

func (in *MCPRequestInput) validateQuestion() error {
	q := in.Question
	if q == nil {
		return nil
	}
	if in.Kind != airlock.KindAgentRequest || in.Proposal.Mode != airlock.ProposalAdvisory {
		return airlock.Invalid("question", "question is only allowed with kind agent_request and an advisory proposal")
	}
	if q.Choices == nil {
		return nil // free text
	}
	if n := len(q.Choices); n < airlock.MinChoices || n > airlock.MaxChoices {
		return airlock.Invalid("question.choices", "question.choices must have between %d and %d choices (got %d); omit choices for a free-text answer", airlock.MinChoices, airlock.MaxChoices, n)
	}
	seen := make(map[string]bool, len(q.Choices))
	for i, c := range q.Choices {
		field := fmt.Sprintf("question.choices[%d]", i)
		if !utf8.ValidString(c) || strings.IndexByte(c, 0) >= 0 {
			return airlock.Invalid(field, "%s must be valid UTF-8 without NUL", field)
		}
		// Characters, not bytes: the JSON Schema of the brief counts so.
		if n := utf8.RuneCountInString(c); n < 1 || n > airlock.MaxChoiceLen {
			return airlock.Invalid(field, "%s must be 1 to %d characters (got %d)", field, airlock.MaxChoiceLen, n)
		}
		if seen[c] {
			return airlock.Invalid("question.choices", "choices must be distinct: %q appears more than once", airlock.Clip(c))
		}
		seen[c] = true
	}
	return nil
}

// checkMCPKey applies CheckIdempotencyKey's rules to idempotencyKey, with
// messages that name the MCP field.
func checkMCPKey(key string) error {
	if err := airlock.CheckIdempotencyKey(key); err != nil {
		if key == "" {
			return airlock.Invalid("idempotencyKey", "idempotencyKey is required: send a unique key per intended request and reuse it on retries")
		}
		if len(key) > airlock.MaxIdempotencyKey {
			return airlock.Invalid("idempotencyKey", "idempotencyKey must be at most %d characters", airlock.MaxIdempotencyKey)
		}
		return airlock.Invalid("idempotencyKey", "idempotencyKey must be printable ASCII without spaces")
	}
	return nil
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
			if input, err = airlock.Canonical(p.Command.Input); err != nil {
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
