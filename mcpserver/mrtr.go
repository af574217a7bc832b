package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MRTR (docs/mcp.md, "Waiting without a blocking call"): at 2026-07-28, a
// client that declares URL-mode elicitation, calling approval_status with
// a wait or approval_prompt (without a task), is answered at once, while
// the request is pending, with input_required: one URL-mode elicitation of
// the request's inbox page, for the person who must decide, and a
// requestState naming the request. Its retry (inputResponses, the same
// requestState) is answered with the request as it is then: decided, the
// tool's own result; still pending after the call's wait (bounded by the
// deadline), input_required again.

// mrtrInput is the key of Airlock's one input request.
const mrtrInput = "airlock_decision"

// MRTRPromptWait is how long an approval_prompt retry waits for the
// decision before asking again; approval_status waits its waitSeconds.
const MRTRPromptWait = time.Minute

// declaresURLElicitation reports whether the client of ss speaks
// 2026-07-28 and declares URL-mode elicitation.
func declaresURLElicitation(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.ProtocolVersion < Revision2026 || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false
	}
	return ip.Capabilities.Elicitation.URL != nil
}

// mrtr wraps the handler of approval_status (prompt false) or
// approval_prompt (prompt true): with a public URL and a client that can
// open one, a pending request is answered with input_required instead of
// a blocking wait. Anything else goes to the handler, which answers it as
// at every revision.
func (s *Server) mrtr(h mcp.ToolHandler, prompt bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if s.cfg.PublicURL == "" || !declaresURLElicitation(req.Session) {
			return h(ctx, req)
		}
		c, ok := callerOf(ctx, req)
		if !ok {
			return h(ctx, req)
		}
		var (
			r    airlock.Request
			wait time.Duration
			err  error
		)
		if prompt {
			in, perr := parsePrompt(req.Params.Arguments)
			if perr != nil || in.ToolUseID == "" {
				// Without a tool_use_id every call is its own request:
				// a retry could not find the one it asked about.
				return h(ctx, req)
			}
			gate, hc := s.promptGate(c, in)
			r, err = gate.Ask(ctx, hc) // made, or found by tool_use_id
			wait = MRTRPromptWait
		} else {
			var a struct {
				ApprovalID  string `json:"approvalId"`
				WaitSeconds int    `json:"waitSeconds"`
			}
			if json.Unmarshal(req.Params.Arguments, &a) != nil || a.ApprovalID == "" || a.WaitSeconds <= 0 || a.WaitSeconds > 60 {
				return h(ctx, req) // the tool answers what is wrong, or answers at once
			}
			r, err = s.svc.Request(ctx, c, a.ApprovalID, 0) // the caller's own, or not_found
			wait = time.Duration(a.WaitSeconds) * time.Second
		}
		if err != nil || r.State != airlock.StatePending {
			return h(ctx, req) // an error, or an answer now
		}
		retry := req.Params.RequestState != "" || req.Params.InputResponses != nil
		if retry {
			// requestState comes back from the client: it is only ever
			// compared with the request this call's own arguments name,
			// read for the caller's token above.
			if req.Params.RequestState != r.ID {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
					Message: "requestState does not name this call's approval request; retry with the requestState Airlock sent, or call again without one"}
			}
			// The wait ends at the request's deadline too, expired.
			r, err = s.svc.Request(ctx, c, r.ID, wait)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil || r.State != airlock.StatePending {
				return h(ctx, req)
			}
		}
		return s.inputRequired(r), nil
	}
}

// inputRequired is the input_required answer for pending request r: one
// URL-mode elicitation of its inbox page.
func (s *Server) inputRequired(r airlock.Request) *mcp.CallToolResult {
	what := r.Tool
	if what == "" {
		what = string(r.Kind)
	}
	deadline := r.DeadlineAt.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("A person must approve or deny %s (approval request %s) in Airlock before the agent may go on: open the link to review it there. Nothing is approved yet; the request expires at %s.",
		what, r.ID, deadline)
	if r.Question != nil {
		// The agent asked a reviewer; only a reviewer answers, in
		// Airlock. The retry carries the answer back (the result's
		// answer), not whatever the client's user typed.
		asked := "free text"
		if len(r.Question.Choices) > 0 {
			asked = "one of " + quoteAll(r.Question.Choices)
		}
		msg = fmt.Sprintf("The agent asked a reviewer in Airlock: %s (approval request %s; answer: %s). A reviewer answers it there: open the link to answer or forward it. No answer yet; the question expires at %s.",
			`"`+r.Title+`"`, r.ID, asked, deadline)
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{mrtrInput: &mcp.ElicitParams{
			Mode:          "url",
			URL:           strings.TrimSuffix(s.cfg.PublicURL, "/") + "/requests/" + r.ID,
			ElicitationID: r.ID,
			Message:       msg,
		}},
		RequestState: r.ID,
	}
}

// quoteAll quotes each of choices, comma-separated, in full: the person
// reading the message needs every choice as it is.
func quoteAll(choices []string) string {
	q := make([]string, len(choices))
	for i, c := range choices {
		q[i] = `"` + c + `"` // at most 120 bytes each (question.choices)
	}
	return strings.Join(q, ", ")
}
