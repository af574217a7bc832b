package gate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TasksExtension names MCP's Tasks extension: a client at 2026-07-28 that
// declares it gets a gated call as a task (docs/adapters.md, "Tasks").
const TasksExtension = "io.modelcontextprotocol/tasks"

// taskPollInterval is the polling interval a gated call's task suggests.
const taskPollInterval = 2 * time.Second

// taskKeep is how long a gated call's task stays readable once it ended.
const taskKeep = time.Hour

// gateTask is a gated call answered as a task: it waits for a reviewer and
// runs in the gate, and the client polls it. It lives in the gate's
// process, as the client's connection does; what makes the call run at
// most once is the journal, as for any gated call.
type gateTask struct {
	id      string
	tool    string
	created time.Time
	cancel  context.CancelFunc // withdraws the request while it waits

	approval bool // the tool-approval extension's rules (Config.ToolApproval)

	mu        sync.Mutex
	done      bool
	updated   time.Time
	result    mcp.Result // the answer, once done
	ran       bool       // the upstream answered the call
	claimed   bool       // the call's one execution was claimed
	withdrawn bool       // tasks/cancel (or the client's input ending) withdrew the request
	err       error      // a JSON-RPC error of the upstream's, or why the call ended
}

// clientTasks reports whether req comes from a client at 2026-07-28 that
// declares the Tasks extension on it.
func (p *proxy) clientTasks(req *mcp.CallToolRequest) bool {
	if req.Session == nil || !statelessClient(req) {
		return false
	}
	caps, _ := req.Params.Meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// startTask answers a gated call with a task at once, and runs the call
// (ask, wait, claim, forward) in the gate until it ends, the client
// cancels the task, or the gate stops.
func (p *proxy) startTask(req *mcp.CallToolRequest, tool *mcp.Tool, timeout string) mcp.Result {
	name := req.Params.Name
	now := time.Now()
	t := &gateTask{id: "tsk_" + rand.Text(), tool: name, created: now, updated: now, approval: p.cfg.ToolApproval}
	// The call runs on until the gate stops; waiting for a reviewer ends
	// also with tasks/cancel and when the client's input ends.
	runCtx, stopRun := context.WithCancel(p.ctx)
	waitCtx, cancelWait := context.WithCancel(runCtx)
	context.AfterFunc(p.waitCtx, cancelWait)
	t.cancel = cancelWait
	p.mu.Lock()
	if p.tasks == nil {
		p.tasks = map[string]*gateTask{}
	}
	for id, old := range p.tasks {
		if old.ended(now) {
			delete(p.tasks, id) // kept taskKeep after it ended
		}
	}
	p.tasks[t.id] = t
	p.mu.Unlock()
	p.down.spawn(func(context.Context) {
		defer stopRun()
		// No progress: the Tasks extension has none for tasks.
		res, ran, claimed, err := p.gatedCall(runCtx, waitCtx, req, tool, timeout, &progress{p: p, done: make(chan struct{})})
		withdrawn := false
		if err != nil && !ran && waitCtx.Err() != nil && runCtx.Err() == nil {
			// tasks/cancel (or the client's input ended) while it waited:
			// the request was withdrawn.
			res, err, withdrawn = errorResult("Airlock: the task was cancelled while it waited for a reviewer; the approval request was withdrawn and the call did not run."), nil, true
		}
		t.mu.Lock()
		t.done, t.updated, t.result, t.ran, t.claimed, t.withdrawn, t.err = true, time.Now(), res, ran, claimed, withdrawn, err
		t.mu.Unlock()
	})
	return &taskResult{wire: t.wire(), created: true}
}

// ended reports whether the task ended more than taskKeep before now.
func (t *gateTask) ended(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done && now.Sub(t.updated) > taskKeep
}

// wire is the task as the Tasks extension writes it. A task completes
// only when the upstream answered the call (its result, or with its
// isError); one whose call did not run (denied, expired, withdrawn,
// refused by the rules) is cancelled, saying why; a JSON-RPC error of the
// upstream's, or a call whose outcome is unknown, is failed.
func (t *gateTask) wire() map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := map[string]any{
		"resultType": "complete", "taskId": t.id, "status": "working",
		"statusMessage": "Waiting for a reviewer to approve " + t.tool + " in Airlock.",
		"createdAt":     t.created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": t.updated.UTC().Format(time.RFC3339Nano),
		"ttlMs": nil, "pollIntervalMs": taskPollInterval.Milliseconds(),
	}
	if t.approval {
		w["statusMessage"] = "Waiting for an approval of this call to " + safeName(t.tool) + " in Airlock; it has not run."
	}
	if !t.done {
		return w // ttlMs null: it lives as long as the call waits or runs
	}
	w["ttlMs"] = t.updated.Add(taskKeep).Sub(t.created).Milliseconds()
	if t.approval {
		t.approvalWire(w)
		return w
	}
	var we *jsonrpc.Error
	switch {
	case t.err != nil && errors.As(t.err, &we):
		w["status"], w["statusMessage"] = "failed", "The call to "+t.tool+" failed: "+we.Message
		w["error"] = we
	case t.err != nil:
		w["status"], w["statusMessage"] = "failed", "The call to "+t.tool+" ended without an answer: "+t.err.Error()
		w["error"] = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: t.err.Error()}
	case t.ran:
		w["status"], w["statusMessage"] = "completed", "The call to "+t.tool+" ran once, after a reviewer approved it."
		w["result"] = t.result
	default:
		w["status"], w["statusMessage"] = "cancelled", resultText(t.result)
	}
	return w
}

// resultText joins a result's text content: why a call did not run.
func resultText(res mcp.Result) string {
	r, ok := res.(*mcp.CallToolResult)
	if !ok {
		return "The call did not run."
	}
	var s string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

// taskResult is a CreateTaskResult: a tools/call's answer that is a task.
type taskResult struct {
	mcp.ResultBase
	wire    map[string]any
	created bool
}

// MarshalJSON writes the task with resultType "task".
func (r *taskResult) MarshalJSON() ([]byte, error) {
	if r.created {
		r.wire["resultType"] = "task"
	}
	if len(r.Meta) > 0 {
		r.wire["_meta"] = r.Meta
	}
	return json.Marshal(r.wire)
}

// taskParams reads the params of tasks/get, tasks/update and tasks/cancel
// and finds the task; the JSON-RPC error to answer otherwise.
func (p *proxy) taskParams(method string, params json.RawMessage) (*gateTask, error) {
	var in struct {
		TaskID string                     `json:"taskId"`
		Meta   map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(params, &in)
	var version string
	json.Unmarshal(in.Meta[mcp.MetaKeyProtocolVersion], &version)
	if version < Revision2026 {
		// Before 2026-07-28 the gate has no tasks (and relays none of the
		// upstream's): the method is not there.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("airlock gate: %s is served only to clients at MCP %s that declare the %s extension", method, Revision2026, TasksExtension)}
	}
	if in.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + " needs params.taskId"}
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	json.Unmarshal(in.Meta[mcp.MetaKeyClientCapabilities], &caps)
	if _, ok := caps.Extensions[TasksExtension]; !ok {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
		return nil, &jsonrpc.Error{Code: -32021, Message: "Missing required client capability: " + method + " needs the " + TasksExtension + " extension", Data: data}
	}
	p.mu.Lock()
	t := p.tasks[in.TaskID]
	p.mu.Unlock()
	if t == nil || t.ended(time.Now()) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Failed to retrieve task: task %q not found", in.TaskID)}
	}
	return t, nil
}

// taskMethods are the Tasks extension's methods, which the SDK does not
// know: the gate answers them on the client's connection (peer.serve).
func (p *proxy) taskMethods() map[string]servedMethod {
	ack := json.RawMessage(`{"resultType":"complete"}`)
	return map[string]servedMethod{
		"tasks/get": func(_ context.Context, params json.RawMessage) (json.RawMessage, error) {
			t, err := p.taskParams("tasks/get", params)
			if err != nil {
				return nil, err
			}
			return json.Marshal(t.wire())
		},
		"tasks/cancel": func(_ context.Context, params json.RawMessage) (json.RawMessage, error) {
			t, err := p.taskParams("tasks/cancel", params)
			if err != nil {
				return nil, err
			}
			// Withdraws the request while it waits; a call that started
			// runs on, and the task completes with it.
			t.cancel()
			return ack, nil
		},
		"tasks/update": func(_ context.Context, params json.RawMessage) (json.RawMessage, error) {
			// The gate's tasks never ask for input: nothing is outstanding.
			if _, err := p.taskParams("tasks/update", params); err != nil {
				return nil, err
			}
			return ack, nil
		},
	}
}

// The tool-approval extension (MCP SEP-2848, a draft; docs/adapters.md,
// "Tool approval"), behind Config.ToolApproval.
const (
	// ToolApprovalExtension names the extension, as the draft does.
	ToolApprovalExtension = "io.modelcontextprotocol/tool-approval"
	// DispositionMeta is the _meta key of a completed task's result that
	// says what became of the call.
	DispositionMeta = "io.modelcontextprotocol/tool-approval-disposition"
)

// The execution dispositions of the draft.
const (
	DispositionExecuted = "approved-executed"
	DispositionDenied   = "denied-not-executed"
	DispositionError    = "execution-error"
	DispositionUnknown  = "outcome-unknown"
)

// approvalWire fills in an ended task w by the tool-approval extension's
// rules: a task withdrawn by its client is cancelled; every other one is
// completed, its result carrying the disposition in _meta and saying in
// its text whether the tool ran. Once the call's one execution was
// claimed, nothing ends as failed (which a client may retry): an error of
// the upstream's is an execution-error, a call whose outcome is unknown
// is outcome-unknown. The statusMessage is the gate's own text: nothing
// the upstream, a reviewer or the client wrote, which a model would read.
func (t *gateTask) approvalWire(w map[string]any) {
	tool := safeName(t.tool)
	if t.withdrawn && !t.claimed {
		w["status"], w["statusMessage"] = "cancelled", "The task was cancelled: the approval request was withdrawn and the call to "+tool+" did not run."
		return
	}
	obj, isError := resultObject(t.result)
	var (
		disposition string
		we          *jsonrpc.Error
	)
	switch {
	case !t.claimed:
		disposition = DispositionDenied
		if obj == nil {
			obj, _ = resultObject(errorResult("Airlock: the call to %s was not approved; it did not run.", t.tool))
		}
		w["statusMessage"] = "The call to " + tool + " was not approved (denied, expired or withdrawn); it did not run."
	case t.err != nil && errors.As(t.err, &we):
		disposition = DispositionError
		obj, _ = resultObject(errorResult("Airlock: the call to %s was approved and forwarded once; the server answered with an error, so it may have had effects: %s", t.tool, we.Message))
		w["statusMessage"] = "The call to " + tool + " was approved and forwarded once, and failed; it may have had effects."
	case t.err != nil || !t.ran || obj == nil:
		disposition = DispositionUnknown
		obj, _ = resultObject(errorResult("Airlock: the call to %s was approved and forwarded once, but whether it took effect is unknown; it was not and will not be run again.", t.tool))
		w["statusMessage"] = "The call to " + tool + " was approved and forwarded once; whether it took effect is unknown."
	case isError:
		disposition = DispositionError
		w["statusMessage"] = "The call to " + tool + " was approved and ran once, and returned an error."
	default:
		disposition = DispositionExecuted
		w["statusMessage"] = "The call to " + tool + " was approved and ran once."
	}
	meta, _ := obj["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[DispositionMeta] = disposition
	obj["_meta"] = meta
	w["status"], w["result"] = "completed", obj
}

// resultObject is a tool result as a JSON object, and whether it is an
// isError result; nil when it is not an object.
func resultObject(res mcp.Result) (map[string]any, bool) {
	if res == nil {
		return nil, false
	}
	data, err := json.Marshal(res)
	if err != nil {
		return nil, false
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // the upstream's numbers as they came
	if dec.Decode(&obj) != nil || obj == nil {
		return nil, false
	}
	isError, _ := obj["isError"].(bool)
	return obj, isError
}

// safeName is a tool's name as the gate's statusMessage quotes it: the
// characters a tool name is made of, at most 64 of them; anything else in
// the name the client sent is dropped.
func safeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= 64 {
			break
		}
		if r == '_' || r == '-' || r == '.' || r == '/' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "the tool"
	}
	return b.String()
}
