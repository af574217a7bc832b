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
	str := func(name string, raw json.RawMessage, dst *string) error {
		if string(raw) == "null" {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("the hook input's %s must be a string", name)
		}
		return nil
	}
	for _, m := range members {
		var err error
		switch m.Key {
		case "session_id":
			err = str(m.Key, m.Value, &p.SessionID)
		case "transcript_path":
			err = str(m.Key, m.Value, &p.TranscriptPath)
		case "cwd":
			err = str(m.Key, m.Value, &p.Cwd)
		case "hook_event_name":
			err = str(m.Key, m.Value, &p.HookEventName)
		case "tool_name":
			err = str(m.Key, m.Value, &p.ToolName)
		case "tool_use_id":
			err = str(m.Key, m.Value, &p.ToolUseID)
		case "turn_id":
			err = str(m.Key, m.Value, &p.TurnID)
		case "timestamp":
			err = str(m.Key, m.Value, &p.Timestamp)
		case "reason":
			err = str(m.Key, m.Value, &p.Reason)
		case "error":
			if err = str(m.Key, m.Value, &p.Error); err != nil {
				p.Error, err = string(m.Value), nil // a structured error: keep its JSON
			}
		case "tool_input":
			p.ToolInput = m.Value
		case "tool_response":
			p.ToolResponse = m.Value
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

// require names the first of the payload's fields that is empty.
func (p Payload) require(fields ...string) error {
	for _, f := range fields {
		var v string
		switch f {
		case "session_id":
			v = p.SessionID
		case "tool_name":
			v = p.ToolName
		case "tool_use_id":
			v = p.ToolUseID
		case "hook_event_name":
			v = p.HookEventName
		case "tool_input":
			v = string(p.ToolInput)
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
// the agent works, and which call this is.
func (p Payload) context(extra ...string) json.RawMessage {
	m := map[string]string{"session_id": p.SessionID}
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
	b, _ := json.Marshal(m) // a map of strings always encodes
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
