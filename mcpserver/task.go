package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/hook"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TasksExtension names the MCP Tasks extension (docs/mcp.md, "Tasks"): a
// client at 2026-07-28 that declares it in its request's
// clientCapabilities.extensions may get a task instead of a call that
// waits for a person.
const TasksExtension = "io.modelcontextprotocol/tasks"

// TaskPollInterval is the polling interval a task suggests.
const TaskPollInterval = 2 * time.Second

// The methods of the Tasks extension. The SDK (v1.8.0) knows none of
// them, so the HTTP handler answers them itself (serveTask).
var taskMethods = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// CodeMissingClientCapability is the JSON-RPC error of a request that
// needs a capability its client did not declare.
const CodeMissingClientCapability = -32021

// declaresTasks reports whether the request in ss (a stateless session:
// one request) is made at 2026-07-28 by a client declaring the Tasks
// extension.
func declaresTasks(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.ProtocolVersion < Revision2026 || ip.Capabilities == nil {
		return false
	}
	_, ok := ip.Capabilities.Extensions[TasksExtension]
	return ok
}

// taskMiddleware answers approval_status with a wait with a task, instead
// of waiting, when the client declares the Tasks extension and the request
// is still pending; every other call goes on as it came.
func (s *Server) taskMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || !declaresTasks(call.Session) {
			return next(ctx, method, req)
		}
		switch call.Params.Name {
		case ToolApprovalPrompt:
			return s.promptTask(ctx, call, func() (mcp.Result, error) { return next(ctx, method, req) })
		case ToolApprovalStatus:
		default:
			return next(ctx, method, req)
		}
		var a struct {
			ApprovalID  string `json:"approvalId"`
			WaitSeconds int    `json:"waitSeconds"`
		}
		if json.Unmarshal(call.Params.Arguments, &a) != nil || a.ApprovalID == "" || a.WaitSeconds <= 0 || a.WaitSeconds > 60 {
			return next(ctx, method, req) // the tool answers what is wrong, or answers at once
		}
		c, ok := callerOf(ctx, call)
		if !ok {
			return next(ctx, method, req)
		}
		if r, err := s.svc.Request(ctx, c, a.ApprovalID, 0); err != nil || r.State.Terminal() {
			return next(ctx, method, req) // an error, or an answer now: no task
		}
		t, r, err := s.svc.CreateTask(ctx, c, store.TaskApprovalStatus, a.ApprovalID, nil)
		if err != nil {
			return next(ctx, method, req)
		}
		return &taskResult{task: s.detailedTask(ctx, c, t, r), created: true}, nil
	}
}

// promptTask answers approval_prompt with a task: the request is made (or
// found by tool_use_id) at once, and the task follows it. A call that
// cannot be asked, or whose request is already decided, is answered at
// once by the tool itself (blocking).
func (s *Server) promptTask(ctx context.Context, call *mcp.CallToolRequest, blocking func() (mcp.Result, error)) (mcp.Result, error) {
	c, ok := callerOf(ctx, call)
	if !ok {
		return blocking()
	}
	in, err := parsePrompt(call.Params.Arguments)
	if err != nil {
		return blocking()
	}
	gate, hc := s.promptGate(c, in)
	r, err := gate.Ask(ctx, hc)
	if err != nil || r.State != airlock.StatePending {
		return blocking()
	}
	t, r, err := s.svc.CreateTask(ctx, c, store.TaskApprovalPrompt, r.ID, call.Params.Arguments)
	if err != nil {
		return blocking()
	}
	return &taskResult{task: s.detailedTask(ctx, c, t, r), created: true}, nil
}

// wireTask is a task as the Tasks extension writes it: the Task shape,
// and for a completed one its result.
type wireTask struct {
	ResultType     string         `json:"resultType"`
	TaskID         string         `json:"taskId"`
	Status         string         `json:"status"`
	StatusMessage  string         `json:"statusMessage,omitempty"`
	CreatedAt      string         `json:"createdAt"`
	LastUpdatedAt  string         `json:"lastUpdatedAt"`
	TTLMs          int64          `json:"ttlMs"`
	PollIntervalMs int64          `json:"pollIntervalMs"`
	Result         any            `json:"result,omitempty"`
	Meta           map[string]any `json:"_meta,omitempty"`
}

// detailedTask is task t as its request r makes it now. An approval_status
// task is working while r is pending, cancelled once r is, and completed,
// with the result approval_status gives now, once r is otherwise
// terminal: the call it stands for is a read, which then runs.
func (s *Server) detailedTask(ctx context.Context, c airlock.Caller, t store.Task, r airlock.Request) wireTask {
	updated := t.CreatedAt
	if d := r.Decision; d != nil && d.DecidedAt.After(updated) {
		updated = d.DecidedAt
	}
	w := wireTask{
		ResultType: "complete", TaskID: t.ID, Status: "working",
		StatusMessage: fmt.Sprintf("Waiting for a person to decide approval request %s (deadline %s).", r.ID, r.DeadlineAt.UTC().Format(time.RFC3339)),
		CreatedAt:     t.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: updated.UTC().Format(time.RFC3339Nano),
		TTLMs:          provider.TaskExpiresAt(r).Sub(t.CreatedAt).Milliseconds(),
		PollIntervalMs: TaskPollInterval.Milliseconds(),
	}
	switch r.State {
	case airlock.StatePending:
		return w
	case airlock.StateCancelled:
		// Withdrawn (tasks/cancel, approval_cancel, a closed session or
		// instance): the task is cancelled, as its request.
		w.Status, w.StatusMessage = "cancelled", "Approval request "+r.ID+" was cancelled; nothing was approved."
		return w
	}
	if t.Kind == store.TaskApprovalPrompt {
		w.Status = "completed"
		out := s.promptAnswer(ctx, c, t, r)
		w.StatusMessage = "Approval request " + r.ID + " is " + string(r.State) + ": " + out.Behavior + "."
		w.Result = promptResult(out)
		return w
	}
	out := newApprovalOut(r)
	summary := fmt.Sprintf("Approval request %s — %s", r.ID, out.Next)
	text, err := airlock.EncodeJSON(out)
	if err != nil {
		text = []byte(`{}`)
	}
	w.Status, w.StatusMessage = "completed", "Approval request "+r.ID+" is "+string(r.State)+"."
	w.Result = &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: summary}, &mcp.TextContent{Text: string(text)}},
		StructuredContent: out,
	}
	return w
}

// taskResult is a CreateTaskResult: a tools/call's answer that is a task.
type taskResult struct {
	mcp.ResultBase // the SDK's serverInfo, in _meta
	task           wireTask
	created        bool
}

// MarshalJSON writes the task with resultType "task".
func (r *taskResult) MarshalJSON() ([]byte, error) {
	w := r.task
	if r.created {
		w.ResultType = "task"
	}
	w.Meta = r.Meta
	return json.Marshal(w)
}

// serveTask answers tasks/get, tasks/update and tasks/cancel at 2026-07-28
// for caller c (docs/mcp.md, "Tasks"). Every replica answers them: a task
// is a record in the store.
func (h *httpHandler) serveTask(w http.ResponseWriter, r *http.Request, c airlock.Caller, id json.RawMessage, method string, params json.RawMessage) {
	var p struct {
		TaskID string `json:"taskId"`
		Meta   struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
			Caps    struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.TaskID == "" {
		writeRPCError(w, http.StatusOK, id, -32602, method+" needs params.taskId", nil)
		return
	}
	if p.Meta.Version == "" {
		writeRPCError(w, http.StatusBadRequest, id, -32602, `missing or invalid _meta field "io.modelcontextprotocol/protocolVersion"`, nil)
		return
	}
	if r.Header.Get(headerProtocolVersion) == "" {
		writeRPCError(w, http.StatusBadRequest, id, -32020, "Mcp-Protocol-Version header is required for a request that names its revision in _meta", nil)
		return
	}
	if got := r.Header.Get("Mcp-Method"); got != method {
		writeRPCError(w, http.StatusBadRequest, id, -32020, "Mcp-Method header "+quote(got)+" does not match the body's method "+quote(method), nil)
		return
	}
	if got := r.Header.Get("Mcp-Name"); got != p.TaskID {
		writeRPCError(w, http.StatusBadRequest, id, -32020, "Mcp-Name header "+quote(got)+" does not match params.taskId "+quote(p.TaskID), nil)
		return
	}
	if _, ok := p.Meta.Caps.Extensions[TasksExtension]; !ok {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
		writeRPCError(w, http.StatusOK, id, CodeMissingClientCapability, "Missing required client capability: "+method+" needs the "+TasksExtension+" extension in clientCapabilities", data)
		return
	}
	ctx := r.Context()
	t, req, err := h.s.svc.Task(ctx, c, p.TaskID)
	if err != nil {
		h.taskError(w, id, method, p.TaskID, err)
		return
	}
	var result any
	switch method {
	case "tasks/get":
		result = h.s.detailedTask(ctx, c, t, req)
	case "tasks/cancel":
		// Withdraws the request. A decision that came first holds: the
		// task then completes with it (the one outcome), and the cancel
		// is still acknowledged, as cancellation is cooperative.
		if !req.State.Terminal() {
			_, err := h.s.svc.Cancel(ctx, c, req.ID)
			if code := airlock.ErrorCode(err); err != nil && code != airlock.CodeNotPending && code != airlock.CodeDeadlinePassed {
				h.taskError(w, id, method, p.TaskID, err)
				return
			}
		}
		result = map[string]string{"resultType": "complete"}
	case "tasks/update":
		// Airlock's tasks never ask their client for input
		// (input_required), so no inputResponses are outstanding: they
		// are ignored, as the extension says.
		result = map[string]string{"resultType": "complete"}
	}
	body, err := airlock.EncodeJSON(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
	if err != nil {
		h.taskError(w, id, method, p.TaskID, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(body, '\n'))
}

// taskError answers a task method that failed: -32602 for a task that is
// not the caller's (or none, or expired), 503 while the store cannot
// serve, -32603 otherwise.
func (h *httpHandler) taskError(w http.ResponseWriter, id json.RawMessage, method, taskID string, err error) {
	switch airlock.ErrorCode(err) {
	case airlock.CodeNotFound:
		writeRPCError(w, http.StatusOK, id, -32602, "Failed to retrieve task: task "+quote(taskID)+" not found (another's, expired, or never made)", nil)
	case airlock.CodeUnavailable:
		w.Header().Set("Retry-After", fmt.Sprint(int(airlock.UnavailableRetryAfter.Seconds())))
		writeRPCError(w, http.StatusServiceUnavailable, id, -32000, "unavailable: the store cannot serve now; poll again", nil)
	default:
		h.log.Error("MCP task method", "method", method, "task", taskID, "err", err)
		writeRPCError(w, http.StatusOK, id, -32603, "internal error", nil)
	}
}

// promptAnswer is what an approval_prompt task answers once its request r
// is decided: allow only with its one execution claimed, by this task's
// owner (now, by the first tasks/get to see the approval, or before, by an
// earlier one: the answer does not change between polls); deny otherwise.
func (s *Server) promptAnswer(ctx context.Context, c airlock.Caller, t store.Task, r airlock.Request) promptOut {
	in, err := parsePrompt(t.Call)
	if err != nil {
		return promptOut{Behavior: "deny", Message: "Airlock: the task's call cannot be read: " + err.Error()}
	}
	ours := func(r airlock.Request) bool {
		return r.State == airlock.StateApproved && r.Execution != nil && r.Execution.ClaimedBy == t.Owner
	}
	if ours(r) {
		return promptOut{Behavior: "allow", UpdatedInput: in.Input}
	}
	gate, _ := s.promptGate(c, in)
	ans := gate.Conclude(ctx, r)
	if ans.Verdict == hook.Allow {
		return promptOut{Behavior: "allow", UpdatedInput: in.Input}
	}
	if r.State == airlock.StateApproved {
		// Another tasks/get of this task may have claimed it a moment ago.
		if again, err := s.svc.Request(ctx, c, r.ID, 0); err == nil && ours(again) {
			return promptOut{Behavior: "allow", UpdatedInput: in.Input}
		}
	}
	return promptOut{Behavior: "deny", Message: ans.Reason}
}
