package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock"
)

// MaxPayload is the largest hook payload read. A tool call's arguments go
// to the server whole, and the server takes bodies up to airlock.MaxBodyBytes;
// the rest is the agent's envelope.
const MaxPayload = airlock.MaxBodyBytes + 64<<10

// Payload is the stdin JSON every agent sends its hooks, the fields Airlock
// uses. The three agents share these names (docs/integrations/); each adds
// its own, which are ignored.
type Payload struct {
	SessionID      string
	TranscriptPath string
	Cwd            string
	HookEventName  string
	ToolName       string
	// ToolInput is the tool's input exactly as the agent sent it.
	ToolInput    json.RawMessage
	ToolUseID    string // Claude Code
	ToolResponse json.RawMessage
	Error        string // Claude Code's PostToolUseFailure
	TurnID       string // Codex
	Timestamp    string // Gemini CLI
	Reason       string // SessionEnd
	// Model, PermissionMode and ApprovalContext are Codex's: the model
	// asking, the session's permission mode, and what the command asks
	// beyond it (to run outside the sandbox, more file system or network
	// access) with the model's justification, a JSON object.
	Model           string
	PermissionMode  string
	ApprovalContext json.RawMessage
}

// ParsePayload reads a hook payload strictly: one JSON object, no duplicate
// keys, valid UTF-8, no NUL, bounded depth. Keys match exactly (Go's
// decoder would take "TOOL_NAME" for tool_name); unknown keys are the
// agent's own and are ignored.
func ParsePayload(data []byte) (Payload, error) {
	var p Payload
	if len(data) > MaxPayload {
		return p, fmt.Errorf("the hook input is %d bytes, over the %d this hook reads", len(data), MaxPayload)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return p, errors.New("the hook input is empty; the agent sends its hook a JSON object on stdin")
	}
	members, err := airlock.ParseObject(data)
	if err != nil {
		return p, fmt.Errorf("the hook input is not a JSON object Airlock accepts: %v", err)
	}
	text := p.texts()
	for _, m := range members {
		switch dst, ok := text[m.Key]; {
		case ok && string(m.Value) == "null":
		case ok:
			if err := json.Unmarshal(m.Value, dst); err == nil {
				break
			}
			if m.Key != "error" {
				return p, fmt.Errorf("the hook input's %s must be a string", m.Key)
			}
			p.Error = string(m.Value) // a structured error: keep its JSON
		case m.Key == "tool_input":
			p.ToolInput = m.Value
		case m.Key == "tool_response":
			p.ToolResponse = m.Value
		case m.Key == "approval_context" && string(m.Value) != "null":
			if m.Value[0] != '{' {
				return p, errors.New("the hook input's approval_context must be a JSON object")
			}
			p.ApprovalContext = m.Value
		}
	}
	return p, nil
}

// texts are the payload's string fields by their JSON names.
func (p *Payload) texts() map[string]*string {
	return map[string]*string{
		"session_id": &p.SessionID, "transcript_path": &p.TranscriptPath, "cwd": &p.Cwd,
		"hook_event_name": &p.HookEventName, "tool_name": &p.ToolName, "tool_use_id": &p.ToolUseID,
		"turn_id": &p.TurnID, "timestamp": &p.Timestamp, "reason": &p.Reason, "error": &p.Error,
		"model": &p.Model, "permission_mode": &p.PermissionMode,
	}
}

// require names the first of the payload's fields that is empty.
func (p Payload) require(fields ...string) error {
	text := p.texts()
	for _, f := range fields {
		v := string(p.ToolInput)
		if f != "tool_input" {
			v = *text[f]
		}
		if v == "" || v == "null" {
			return fmt.Errorf("the hook input has no %s; is this hook registered for the right event?", f)
		}
	}
	if len(p.ToolInput) > 0 && p.ToolInput[0] != '{' {
		return errors.New("the hook input's tool_input must be a JSON object")
	}
	return nil
}

// context is what the hook observed, for the reviewer: the session, where
// the agent works, and which call this is; objects, when given, are added
// as they are (JSON objects the payload carried).
func (p Payload) context(objects map[string]json.RawMessage, extra ...string) json.RawMessage {
	m := map[string]any{"session_id": p.SessionID}
	add := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	add("cwd", p.Cwd)
	add("transcript_path", p.TranscriptPath)
	add("tool_use_id", p.ToolUseID)
	for i := 0; i+1 < len(extra); i += 2 {
		add(extra[i], extra[i+1])
	}
	for k, v := range objects {
		if len(v) > 0 {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m) // strings and objects read strictly always encode
	return b
}

// Detail shortens a tool's response or error for an execution report.
func Detail(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if r := []rune(s); len(r) > 900 {
		s = string(r[:900]) + "…"
	}
	return s
}
