package gate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callTool handles a client's tools/call: allowed calls go straight
// upstream; gated ones wait for a reviewer's approval of exactly this call.
// The client gets the upstream's result or error as it came.
func (p *proxy) callTool(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	if p.upstream() == nil {
		return nil, errNoUpstream
	}
	name := req.Params.Name
	t, err := p.tool(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("airlock gate: could not list the upstream server's tools to look up %q: %v", name, err)}
	}
	if t == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	if t.err != nil {
		return errorResult("Airlock: airlock gate cannot read the upstream server's definition of %s (%v), so it cannot tell whether the call needs approval; the call was not run.", name, t.err), nil
	}
	if t.taskSupport == "required" {
		// The SDK knows no tasks, so the gate can relay neither the task
		// a call would create nor tasks/get or tasks/result; the upstream
		// refuses the call without one. Say so before anyone is asked.
		return errorResult("Airlock: the tool %s requires task augmentation (its execution.taskSupport is \"required\"), which airlock gate does not relay yet; the call was not run and nobody was asked to approve it. The tool cannot be used through airlock gate.", name), nil
	}
	action, timeout := p.cfg.Rules.Decide(t.tool)
	switch action {
	case ActionAllow:
		return p.forwardAnswer(ctx, req)
	case ActionDeny:
		return errorResult("Airlock: the gate's rules block %s; the call was not run. Do not retry it.", name), nil
	}

	if p.clientTasks(req) {
		return p.startTask(req, t.tool, timeout), nil
	}
	pr := p.newProgress(req)
	defer pr.stop()
	// Waiting ends when the client cancels or its input ends; a call that
	// started runs on with the client's request (ctx).
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.waitCtx, cancel)()
	res, _, _, err := p.gatedCall(ctx, waitCtx, req, t.tool, timeout, pr)
	return res, err
}

// gatedCall asks a reviewer about the call and, on approval, claims its
// one execution and forwards it (under ctx); waiting ends with waitCtx.
// ran reports whether the upstream answered the call: its result, or its
// JSON-RPC error; claimed, whether the call's one execution was claimed
// (it was forwarded, or may have been).
func (p *proxy) gatedCall(ctx, waitCtx context.Context, req *mcp.CallToolRequest, tool *mcp.Tool, timeout string, pr *progress) (res mcp.Result, ran, claimed bool, err error) {
	name := req.Params.Name
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	var result json.RawMessage
	var fwdErr error
	out, err := p.gate.Run(waitCtx, client.Call{
		Tool: name, Arguments: args, AttemptKey: rand.Text(), Timeout: timeout,
		Context:   p.callContext(req, tool),
		OnPending: pr.waiting,
	}, func(runCtx context.Context) error {
		pr.approved()
		ran = true
		// The arguments approved: the call's own, or a reviewer's edit
		// of them when the gate accepts edits.
		result, fwdErr = p.forward(ctx, req, client.ArgumentsFrom(runCtx), pr, client.ApprovalTokenFrom(runCtx))
		if fwdErr != nil && (ctx.Err() != nil || !isRPCError(fwdErr)) {
			// The connection broke or the client cancelled mid-call:
			// whether the tool took effect is unknown.
			return fmt.Errorf("%v: %w", fwdErr, client.ErrOutcomeUnknown)
		}
		if fwdErr != nil {
			return fwdErr // the upstream refused the call
		}
		return toolOutcome(result)
	})
	if out != nil && out.Request != nil && out.Request.DerivedFrom != "" && fwdErr == nil {
		result = editedResult(result, out.Request, args)
	}
	res, err = p.answer(waitCtx, name, result, fwdErr, err)
	return res, ran && (result != nil || isRPCError(fwdErr)), ran, err
}

// editedResult adds to an edited call's result a text saying what the
// reviewer changed: the model asked for one call and another ran.
func editedResult(raw json.RawMessage, r *client.ApprovalRequest, asked json.RawMessage) json.RawMessage {
	var res map[string]json.RawMessage
	if json.Unmarshal(raw, &res) != nil {
		return raw
	}
	var content []json.RawMessage
	if c, ok := res["content"]; ok && json.Unmarshal(c, &content) != nil {
		return raw
	}
	var diff strings.Builder
	for _, l := range airlock.ArgumentsDiff(asked, r.Arguments) {
		fmt.Fprintf(&diff, "%c %s\n", l.Op, l.Text)
	}
	note := ""
	if n := r.Note(); n != "" {
		note = "\nReviewer's note: " + n
	}
	text := fmt.Sprintf("Airlock: a reviewer approved this call with changed arguments (request %s, edited from request %s); "+
		"it ran with the reviewer's arguments, not yours:\n%s\nChanges (- yours, + the reviewer's):\n%s%s",
		r.ID, r.DerivedFrom, r.Arguments, diff.String(), note)
	item, err := json.Marshal(map[string]string{"type": "text", "text": text})
	if err != nil {
		return raw
	}
	content = append([]json.RawMessage{item}, content...)
	if res["content"], err = json.Marshal(content); err != nil {
		return raw
	}
	out, err := json.Marshal(res)
	if err != nil {
		return raw
	}
	return out
}

// toolOutcome is nil for a result that reports success, the tool's error
// for an isError result.
func toolOutcome(raw json.RawMessage) error {
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("the upstream's result cannot be read (%v): %w", err, client.ErrOutcomeUnknown)
	}
	if !r.IsError {
		return nil
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return errors.New("the tool returned an error: " + strings.Join(parts, "\n"))
}

// answer turns the gate's outcome into the client's result.
func (p *proxy) answer(ctx context.Context, tool string, result json.RawMessage, fwdErr, err error) (mcp.Result, error) {
	var (
		te *client.ToolError
		de *client.DeniedError
		ee *client.ExpiredError
		ce *client.CancelledError
		le *client.LapsedError
		ae *client.AlreadyExecutedError
		ie *client.InterruptedError
	)
	switch {
	case err == nil:
		return p.result(result), nil
	case errors.As(err, &te):
		// The call ran: the client gets the upstream's own answer.
		if fwdErr != nil {
			return nil, answerError(ctx, fwdErr)
		}
		return p.result(result), nil
	case errors.As(err, &de) && de.ReplacedBy() != "":
		msg := fmt.Sprintf("Airlock: a reviewer approved this call to %s only with changed arguments (request %s, replacing request %s); "+
			"this gate does not run edited calls (airlock gate --accept-edits), so it did not run.", tool, de.ReplacedBy(), de.Request.ID)
		if note := de.Note(); note != "" {
			msg += "\nReviewer's note: " + note
		}
		return errorResult("%s", msg), nil
	case errors.As(err, &de):
		msg := fmt.Sprintf("Airlock: a reviewer denied this call to %s (request %s); it did not run.", tool, de.Request.ID)
		if note := de.Note(); note != "" {
			msg += "\nReviewer's note: " + note
		}
		return errorResult("%s", msg), nil
	case errors.As(err, &ee):
		return errorResult("Airlock: nobody decided on this call to %s in time (request %s, deadline %s); it did not run. Call it again to ask again if it is still needed.",
			tool, ee.Request.ID, ee.Request.DeadlineAt.UTC().Format(time.RFC3339)), nil
	case errors.As(err, &ce):
		if ce.Abandoned && ctx.Err() != nil {
			return nil, ctx.Err() // the client cancelled; it reads no answer
		}
		return errorResult("Airlock: the approval request for %s was cancelled (request %s); the call did not run.", tool, ce.Request.ID), nil
	case errors.As(err, &le):
		return errorResult("Airlock: the approval of this call to %s expired before it could start (request %s); it did not run. Call it again to ask anew.", tool, le.Request.ID), nil
	case errors.As(err, &ae), errors.As(err, &ie):
		return errorResult("Airlock: %v", err), nil
	}
	p.log.Warn("could not ask for approval", "tool", tool, "err", err)
	return errorResult("Airlock: could not ask for approval of this call to %s, so it did not run: %v", tool, err), nil
}

// forward sends the call upstream as the client made it (same name,
// arguments and _meta), but with args, the arguments approved, when set
// (a reviewer's edit, with AcceptEdits), and returns the upstream's raw
// result. For a gated
// call (pr not nil) whose client asked for progress, the progress token is
// one of the gate's own, so that the upstream's progress can be renumbered
// after the progress sent while waiting.
func (p *proxy) forward(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage, pr *progress, approvalToken string) (json.RawMessage, error) {
	// A retry at 2026-07-28 carries the client's answers to the upstream's
	// inputRequests and the state the upstream asked to have echoed.
	params := &mcp.CallToolParamsRaw{Name: req.Params.Name, Arguments: req.Params.Arguments,
		InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState}
	if args != nil {
		params.Arguments = args
	}
	if params.Arguments == nil {
		params.Arguments = json.RawMessage(`{}`)
	}
	if m := req.Params.Meta; len(m) > 0 {
		params.Meta = mcp.Meta{}
		maps.Copy(params.Meta, m)
		// Only a token the gate's own claim returned reaches the
		// upstream: one the client wrote is dropped.
		delete(params.Meta, ApprovalTokenMeta)
	}
	if approvalToken != "" {
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		params.Meta[ApprovalTokenMeta] = approvalToken
	}
	if pr != nil {
		if tok := pr.route(); tok != "" {
			params.SetProgressToken(tok)
			defer p.unroute(tok)
		}
	}
	data, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return p.upCall(ctx, "tools/call", data)
}

// ApprovalTokenMeta is the key of params._meta under which the gate hands
// the upstream the approval token of an approved call (docs/tokens.md).
const ApprovalTokenMeta = "io.airlock/approval-token"

// forwardAnswer forwards a call that needs no approval and answers with
// the upstream's result or error.
func (p *proxy) forwardAnswer(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	raw, err := p.forward(ctx, req, nil, nil, "")
	if err != nil {
		return nil, answerError(ctx, err)
	}
	return p.result(raw), nil
}

// isRPCError reports whether err is a JSON-RPC error the upstream answered.
func isRPCError(err error) bool {
	var re *jsonrpc.Error
	return errors.As(err, &re)
}

// callContext is what the gate observed about the call: the request's
// context field, shown to reviewers apart from the agent's claims, with
// the tool's input schema (input_schema) for the inbox's editor.
func (p *proxy) callContext(req *mcp.CallToolRequest, tool *mcp.Tool) json.RawMessage {
	c := map[string]any{"adapter": "airlock gate", "upstream": p.upstreamName()}
	if tool != nil && tool.InputSchema != nil {
		// The upstream's input schema, by which the inbox checks a
		// reviewer's edit of the arguments (docs/inbox.md), when it is
		// small enough to leave room in the context.
		if s, err := json.Marshal(tool.InputSchema); err == nil && len(s) <= maxContextSchema {
			c["input_schema"] = json.RawMessage(s)
		}
	}
	if ss := req.Session; ss != nil {
		if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			c["mcp_client"] = ip.ClientInfo.Name + " " + ip.ClientInfo.Version
		}
	}
	data, _ := json.Marshal(c)
	return data
}

// maxContextSchema bounds the input schema a call's context carries: the
// context is at most 64 KiB.
const maxContextSchema = 32 << 10

// errorResult is an isError tool result the agent reads.
func errorResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// progress sends a call's progress notifications: for a gated call, one per
// interval while it waits for a reviewer; then the upstream's own, moved
// up by what was sent while waiting, so the value keeps increasing.
type progress struct {
	p     *proxy
	ss    *mcp.ServerSession
	token any // the client's; nil when it asked for none

	mu      sync.Mutex
	n       float64 // the last progress value sent
	started bool
	done    chan struct{}
	stopped bool
}

func (p *proxy) newProgress(req *mcp.CallToolRequest) *progress {
	return &progress{p: p, ss: req.Session, token: req.Params.GetProgressToken(), done: make(chan struct{})}
}

// waiting is the gate's OnPending: the first call starts the ticker.
func (pr *progress) waiting(r *client.ApprovalRequest) {
	if pr.token == nil {
		return
	}
	pr.mu.Lock()
	if pr.started || pr.stopped {
		pr.mu.Unlock()
		return
	}
	pr.started = true
	pr.mu.Unlock()
	msg := fmt.Sprintf("Waiting for a reviewer to approve %s in Airlock (request %s, deadline %s).",
		r.Tool, r.ID, r.DeadlineAt.UTC().Format(time.RFC3339))
	pr.tick(msg)
	go func() {
		t := time.NewTicker(pr.p.cfg.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				pr.tick(msg)
			case <-pr.done:
				return
			}
		}
	}()
}

// approved stops the waiting notifications.
func (pr *progress) approved() { pr.stop() }

func (pr *progress) stop() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.stopped {
		pr.stopped = true
		close(pr.done)
	}
}

// tick tells the client the call still waits: one more unit of progress.
func (pr *progress) tick(msg string) {
	pr.mu.Lock()
	if pr.stopped {
		pr.mu.Unlock()
		return
	}
	pr.n++
	v := pr.n
	pr.mu.Unlock()
	pr.ss.NotifyProgress(pr.p.ctx, &mcp.ProgressNotificationParams{ProgressToken: pr.token, Progress: v, Message: msg})
}

// route registers a token of the gate's own for the upstream call, so the
// upstream's progress reaches this client's request. "" when the client
// asked for no progress.
func (pr *progress) route() string {
	if pr.token == nil || pr.ss == nil {
		return ""
	}
	tok := pr.p.idPrefix + "progress-" + strconv.FormatInt(pr.p.nextTok.Add(1), 10)
	pr.mu.Lock()
	base := pr.n
	pr.mu.Unlock()
	pr.p.mu.Lock()
	pr.p.progress[tok] = &progressRoute{pr: pr, base: base}
	pr.p.mu.Unlock()
	return tok
}

// progressRoute maps an upstream progress token to a client's request.
type progressRoute struct {
	pr   *progress
	base float64 // progress already sent while waiting
}

func (p *proxy) unroute(tok string) {
	p.mu.Lock()
	delete(p.progress, tok)
	p.mu.Unlock()
}

// upstreamProgress renumbers the upstream's progress of a gated call for
// the client whose call it is, reporting whether the token was the gate's.
func (p *proxy) upstreamProgress(params json.RawMessage) bool {
	var n mcp.ProgressNotificationParams
	if json.Unmarshal(params, &n) != nil {
		return false
	}
	tok, _ := n.ProgressToken.(string)
	if !strings.HasPrefix(tok, p.idPrefix) {
		return false // a token of the client's: it goes through as it came
	}
	p.mu.Lock()
	rt := p.progress[tok]
	p.mu.Unlock()
	if rt == nil {
		return true // the call has ended
	}
	pr := rt.pr
	pr.mu.Lock()
	v := rt.base + n.Progress
	if v <= pr.n {
		pr.mu.Unlock()
		return true // never let progress go backwards
	}
	pr.n = v
	pr.mu.Unlock()
	out := &mcp.ProgressNotificationParams{Meta: n.Meta, ProgressToken: pr.token, Progress: v, Message: n.Message}
	if n.Total > 0 {
		out.Total = rt.base + n.Total
	}
	pr.ss.NotifyProgress(p.ctx, out)
	return true
}
