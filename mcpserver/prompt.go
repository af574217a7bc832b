package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/hook"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolApprovalPrompt is Claude Code's --permission-prompt-tool
// (docs/integrations/claude-code.md): `claude -p --permission-prompt-tool
// mcp__airlock__approval_prompt`.
const ToolApprovalPrompt = "approval_prompt"

// PromptWait is how long approval_prompt waits for a reviewer; after it,
// the call is denied saying so. Claude Code's MCP tool timeout
// (MCP_TOOL_TIMEOUT) must be above it.
const PromptWait = 10 * time.Minute

// PromptProgressInterval is how often a waiting approval_prompt tells the
// client it still waits (when the client asked for progress).
const PromptProgressInterval = 5 * time.Second

// promptSession names the one instance per agent token that holds the
// permission prompts' requests ("claude-code session permission-prompt").
const promptSession = "permission-prompt"

// The contract, as Claude Code calls the tool: input {tool_name, input,
// tool_use_id?}; the first text content of the result is JSON, either
// {"behavior":"allow","updatedInput":<input>} or
// {"behavior":"deny","message":<why>}. Sources: the Claude Code SDK's
// permission prompt tool (https://docs.anthropic.com/en/docs/claude-code/sdk,
// --permission-prompt-tool) and the CLI reference
// (https://code.claude.com/docs/en/cli-reference).
const (
	approvalPromptSchema = `{
  "type": "object",
  "properties": {
    "tool_name": {"type": "string", "description": "The tool Claude Code wants to run, such as Bash or mcp__github__create_issue"},
    "input": {"type": "object", "description": "The tool's input, exactly"},
    "tool_use_id": {"type": "string", "description": "Claude Code's ID of this tool call; a retried call finds the same request"}
  },
  "required": ["tool_name", "input"],
  "additionalProperties": false
}`
	approvalPromptOutSchema = `{
  "type": "object",
  "properties": {
    "behavior": {"enum": ["allow", "deny"]},
    "updatedInput": {"type": "object", "description": "With allow: the input, unchanged"},
    "message": {"type": "string", "description": "With deny: why, for the model"}
  },
  "required": ["behavior"],
  "additionalProperties": false
}`
)

func (s *Server) approvalPromptTool() *mcp.Tool {
	return &mcp.Tool{
		Name: ToolApprovalPrompt, Title: "Ask a reviewer whether Claude Code may run a tool",
		Description: `Claude Code's permission prompt: run claude -p --permission-prompt-tool mcp__<this server>__approval_prompt, and each tool call Claude Code would ask about waits for a reviewer in Airlock instead. The tool name and input go to the reviewer exactly. The result's text is the JSON Claude Code reads: {"behavior":"allow","updatedInput":<the input, unchanged>} once a reviewer approved this exact call (its one execution is claimed then), or {"behavior":"deny","message":"…"} when the reviewer denied it (with their note), or when no decision came in time, the request expired or was cancelled, or the call could not be asked (the message says which). Progress notifications are sent while it waits.`,
		InputSchema: schema([]byte(approvalPromptSchema)), OutputSchema: schema([]byte(approvalPromptOutSchema)),
		Annotations: &mcp.ToolAnnotations{Title: "Ask a reviewer", DestructiveHint: bptr(false), IdempotentHint: true, OpenWorldHint: bptr(false)},
	}
}

// promptOut is approval_prompt's result.
type promptOut struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// approvalPrompt asks a reviewer through the same gate as the agent hooks:
// allow only after an approval whose execution it claimed, deny otherwise.
// Its result is one text content holding the JSON, since Claude Code
// parses the first text content; refusals are denials too, not isError
// results, which Claude Code would not read as a decision.
func (s *Server) approvalPrompt(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	deny := func(why string) (*mcp.CallToolResult, error) {
		return promptResult(promptOut{Behavior: "deny", Message: why}), nil
	}
	c, ok := callerOf(ctx, req)
	if !ok {
		return deny("Airlock: this MCP connection is not authenticated; send Authorization: Bearer <agent token>")
	}
	ctx, stop := boundToRequest(ctx, req)
	defer stop()
	in, err := parsePrompt(req.Params.Arguments)
	if err != nil {
		return deny("Airlock: " + err.Error())
	}
	gate, call := s.promptGate(c, in)

	pr := &promptProgress{ss: req.Session, token: req.Params.GetProgressToken(), msg: fmt.Sprintf("Waiting for a reviewer to approve %s in Airlock.", in.ToolName)}
	pr.start(ctx)
	ans := gate.Decide(ctx, call)
	pr.stop()
	if ctx.Err() != nil {
		return nil, s.cancelled(ctx, ToolApprovalPrompt, c, req.Params.Arguments, 0, ctx.Err())
	}
	if ans.Verdict == hook.Allow {
		return promptResult(promptOut{Behavior: "allow", UpdatedInput: in.Input}), nil
	}
	return deny(ans.Reason)
}

// promptGate is the hook gate approval_prompt asks through as caller c,
// and the call it asks about.
func (s *Server) promptGate(c airlock.Caller, in promptInput) (*hook.Gate, hook.Call) {
	key := hook.Key("claude-code-prompt", in.ToolUseID)
	if in.ToolUseID == "" {
		// No ID to find the same call by: every call is its own request.
		key = hook.Key("claude-code-prompt", airlock.NewID("call_"))
	}
	ctxJSON, _ := json.Marshal(map[string]string{"source": "permission-prompt-tool", "tool_use_id": in.ToolUseID})
	call := hook.Call{Agent: hook.ClaudeCode.Name, SessionID: promptSession, Tool: in.ToolName,
		Arguments: in.Input, Context: ctxJSON, Key: key}
	return &hook.Gate{Backend: s.svc.HookBackend(c), Wait: PromptWait, Fallback: hook.Deny}, call
}

type promptInput struct {
	ToolName  string
	Input     json.RawMessage
	ToolUseID string
}

// parsePrompt reads approval_prompt's arguments strictly (the domain's
// JSON rules: no duplicate keys, no invalid UTF-8) and keeps input's bytes.
func parsePrompt(args json.RawMessage) (promptInput, error) {
	var in promptInput
	members, err := airlock.ParseObject(args)
	if err != nil {
		return in, err
	}
	for _, m := range members {
		switch m.Key {
		case "tool_name":
			if json.Unmarshal(m.Value, &in.ToolName) != nil {
				return in, airlock.Invalid("tool_name", "tool_name must be a string")
			}
		case "tool_use_id":
			if json.Unmarshal(m.Value, &in.ToolUseID) != nil {
				return in, airlock.Invalid("tool_use_id", "tool_use_id must be a string")
			}
		case "input":
			in.Input = m.Value
		default:
			return in, airlock.Invalid(m.Key, "unknown argument %q; approval_prompt takes tool_name, input and tool_use_id", m.Key)
		}
	}
	if in.ToolName == "" {
		return in, airlock.Invalid("tool_name", "tool_name is required")
	}
	if len(in.Input) == 0 || in.Input[0] != '{' {
		return in, airlock.Invalid("input", "input is required: the tool's input, a JSON object")
	}
	return in, nil
}

func promptResult(out promptOut) *mcp.CallToolResult {
	text, _ := json.Marshal(out) // strings and raw JSON always encode
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: out}
}

// promptProgress sends a progress notification now and every
// PromptProgressInterval while approval_prompt waits, when the client gave
// a progress token.
type promptProgress struct {
	ss    *mcp.ServerSession
	token any
	msg   string
	done  chan struct{}
	wg    sync.WaitGroup
}

func (p *promptProgress) start(ctx context.Context) {
	if p.token == nil || p.ss == nil {
		return
	}
	p.done = make(chan struct{})
	p.wg.Go(func() {
		t := time.NewTicker(PromptProgressInterval)
		defer t.Stop()
		for n := 1.0; ; n++ {
			p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: n, Message: p.msg})
			select {
			case <-t.C:
			case <-p.done:
				return
			case <-ctx.Done():
				return
			}
		}
	})
}

func (p *promptProgress) stop() {
	if p.done != nil {
		close(p.done)
		p.wg.Wait()
	}
}
