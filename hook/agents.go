package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/airlockhq/airlock"
)

// Agent is one agent's hook contract: which event asks before a tool
// runs, how its payload becomes a Call, and how an Answer is written back.
type Agent struct {
	// Name is the agent's name in instance names and keys.
	Name string
	// Event is the hook_event_name of the event that asks before a call.
	Event string
	// call builds the Call from a payload of Event.
	call func(p Payload) (Call, error)
	// encode writes the answer the agent reads on stdout (exit code 0).
	encode func(a Answer) []byte
}

// Call turns a payload of the agent's asking event into a Call.
func (ag Agent) Call(p Payload) (Call, error) {
	if p.HookEventName != ag.Event {
		return Call{}, fmt.Errorf("the hook input is a %q event, and this hook answers %s; register it for %s", p.HookEventName, ag.Event, ag.Event)
	}
	return ag.call(p)
}

// Encode writes a as the agent's JSON answer.
func (ag Agent) Encode(a Answer) []byte { return ag.encode(a) }

// Nothing is the answer that decides nothing: the agent's own rules stay
// in charge (a tool the --match globs do not select).
var Nothing = []byte("{}\n")

// ClaudeCode is Claude Code's PreToolUse command hook: stdin is the event's
// JSON (session_id, transcript_path, cwd, hook_event_name, tool_name,
// tool_input, tool_use_id), stdout on exit 0 is
// {"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":
// "allow"|"deny"|"ask","permissionDecisionReason":…}}. Sources:
// https://code.claude.com/docs/en/hooks (PreToolUse input and decision
// control).
var ClaudeCode = Agent{
	Name:  "claude-code",
	Event: "PreToolUse",
	call: func(p Payload) (Call, error) {
		if err := p.require("session_id", "tool_name", "tool_use_id", "tool_input"); err != nil {
			return Call{}, err
		}
		return Call{
			Agent: "claude-code", SessionID: p.SessionID, Tool: p.ToolName, Arguments: p.ToolInput,
			Context: p.context(nil), Key: Key("claude-code", p.SessionID, p.ToolUseID),
		}, nil
	},
	encode: func(a Answer) []byte {
		out := map[string]any{
			"hookEventName": "PreToolUse", "permissionDecision": string(a.Verdict), "permissionDecisionReason": a.Reason,
		}
		if a.Verdict == Allow && a.UpdatedInput != nil {
			// The arguments a reviewer approved with changes: Claude Code
			// runs the tool with them instead of its own.
			out["updatedInput"] = a.UpdatedInput
		}
		return encode(map[string]any{"hookSpecificOutput": out})
	},
}

// Codex is Codex's PermissionRequest command hook: stdin carries session_id,
// turn_id, transcript_path, cwd, hook_event_name, model, permission_mode,
// tool_name, tool_input and approval_context (sandbox_permissions, such as
// require_escalated to run outside the sandbox; additional_permissions;
// the model's justification); stdout on exit 0 is
// {"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":
// {"behavior":"allow"|"deny","message":…}}}, and no decision leaves Codex's
// own approval prompt in charge. Source: openai/codex
// codex-rs/hooks/schema/generated/permission-request.command.{input,output}.schema.json.
//
// Codex sends no tool-call ID, so the key is the session, the turn, the
// tool, its input and what it asks beyond the sandbox: a retried hook
// finds the same request, and the same command twice in one turn finds
// the first one (already used, so the second is asked in Codex, never
// allowed twice).
//
// The reviewer sees what Codex asks for beyond the sandbox: the context
// carries the model, the permission mode and approval_context without its
// justification, which is the model's claim and goes to agent_reasoning.
var Codex = Agent{
	Name:  "codex",
	Event: "PermissionRequest",
	call: func(p Payload) (Call, error) {
		if err := p.require("session_id", "tool_name", "tool_input"); err != nil {
			return Call{}, err
		}
		digest, err := inputDigest(p.ToolInput)
		if err != nil {
			return Call{}, err
		}
		c := Call{Agent: "codex", SessionID: p.SessionID, Tool: p.ToolName, Arguments: p.ToolInput}
		parts := []string{p.SessionID, p.TurnID, p.ToolName, digest}
		var objects map[string]json.RawMessage
		if len(p.ApprovalContext) > 0 {
			asked, reasoning, err := splitJustification(p.ApprovalContext)
			if err != nil {
				return Call{}, err
			}
			c.AgentReasoning = reasoning
			objects = map[string]json.RawMessage{"approval_context": asked}
			d, err := inputDigest(p.ApprovalContext)
			if err != nil {
				return Call{}, err
			}
			parts = append(parts, d)
		}
		c.Context = p.context(objects, "turn_id", p.TurnID, "model", p.Model, "permission_mode", p.PermissionMode)
		c.Key = Key("codex", parts...)
		return c, nil
	},
	encode: func(a Answer) []byte {
		switch a.Verdict {
		case Allow:
			return encode(map[string]any{"hookSpecificOutput": map[string]any{
				"hookEventName": "PermissionRequest", "decision": map[string]string{"behavior": "allow"},
			}})
		case Deny:
			return encode(map[string]any{"hookSpecificOutput": map[string]any{
				"hookEventName": "PermissionRequest", "decision": map[string]string{"behavior": "deny", "message": a.Reason},
			}})
		}
		return encode(map[string]string{"systemMessage": a.Reason})
	},
}

// Gemini is Gemini CLI's BeforeTool command hook: stdin carries session_id,
// transcript_path, cwd, hook_event_name, timestamp, tool_name and
// tool_input; stdout on exit 0 may carry "decision": "allow" or "deny"
// with a "reason" sent to the agent, and "systemMessage" shown to the
// person; no decision leaves Gemini CLI's own confirmation in charge.
// Source: https://geminicli.com/docs/hooks/reference (google-gemini/gemini-cli
// docs/hooks/reference.md).
//
// Gemini CLI sends no tool-call ID; the key is the session, the event's
// timestamp, the tool and its input.
var Gemini = Agent{
	Name:  "gemini",
	Event: "BeforeTool",
	call:  keyedByInput("gemini", "timestamp", func(p Payload) string { return p.Timestamp }),
	encode: func(a Answer) []byte {
		switch a.Verdict {
		case Allow:
			return encode(map[string]string{"decision": "allow", "systemMessage": a.Reason})
		case Deny:
			return encode(map[string]string{"decision": "deny", "reason": a.Reason, "systemMessage": a.Reason})
		}
		return encode(map[string]string{"systemMessage": a.Reason})
	},
}

// Agents lists the agents by name, as `airlock hook NAME` takes them.
var Agents = map[string]Agent{"claude-code": ClaudeCode, "codex": Codex, "gemini": Gemini}

// keyedByInput builds the Call of an agent that sends no tool-call ID. Its
// key is the session, what else tells the agent's calls apart (field, with
// its value in the context too), the tool and a digest of its input.
func keyedByInput(agent, field string, value func(Payload) string) func(Payload) (Call, error) {
	return func(p Payload) (Call, error) {
		if err := p.require("session_id", "tool_name", "tool_input"); err != nil {
			return Call{}, err
		}
		digest, err := inputDigest(p.ToolInput)
		if err != nil {
			return Call{}, err
		}
		v := value(p)
		return Call{
			Agent: agent, SessionID: p.SessionID, Tool: p.ToolName, Arguments: p.ToolInput,
			Context: p.context(nil, field, v), Key: Key(agent, p.SessionID, v, p.ToolName, digest),
		}, nil
	}
}

// splitJustification parts Codex's approval_context into what the command
// asks for (the sandbox override, extra permissions: facts the reviewer
// sees in the context) and the model's justification (its claim, shown as
// agent_reasoning).
func splitJustification(raw json.RawMessage) (asked json.RawMessage, justification string, err error) {
	members, err := airlock.ParseObject(raw)
	if err != nil {
		return nil, "", fmt.Errorf("the hook input's approval_context: %v", err)
	}
	rest := map[string]json.RawMessage{}
	for _, m := range members {
		if m.Key != "justification" {
			rest[m.Key] = m.Value
			continue
		}
		if err := json.Unmarshal(m.Value, &justification); err != nil && string(m.Value) != "null" {
			return nil, "", errors.New("the hook input's approval_context.justification must be a string")
		}
	}
	asked, err = json.Marshal(rest)
	return asked, justification, err
}

// inputDigest hashes a tool input's canonical form, so a key does not
// depend on how the agent spaced its JSON.
func inputDigest(raw json.RawMessage) (string, error) {
	c, err := airlock.Canonical(raw)
	if err != nil {
		return "", fmt.Errorf("the hook input's tool_input: %v", err)
	}
	return Key("", string(c))[1:], nil
}

// Match reports whether tool is selected by globs (path.Match syntax, such
// as "Bash" or "mcp__github__*"); no globs select every tool. A malformed
// glob selects: it gates a call rather than letting one through.
func Match(globs []string, tool string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		ok, err := path.Match(g, tool)
		if ok || err != nil {
			return true
		}
	}
	return false
}

// CheckGlob reports a malformed --match glob.
func CheckGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("--match %q is not a valid glob: %v", g, err)
	}
	return nil
}

func encode(v any) []byte {
	b, _ := json.Marshal(v) // maps of strings always encode
	return append(b, '\n')
}
