package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names (docs/mcp.md, "The tools").
const (
	ToolApprovalRequest  = "approval_request"
	ToolApprovalStatus   = "approval_status"
	ToolApprovalCancel   = "approval_cancel"
	ToolSessionOpen      = "session_open"
	ToolSessionHeartbeat = "session_heartbeat"
	ToolSessionClose     = "session_close"
	ToolWorkList         = "work_list"
	ToolWorkGet          = "work_get"
)

// ToolNames lists every tool in the order tools/list shows them.
var ToolNames = []string{
	ToolApprovalRequest, ToolApprovalStatus, ToolApprovalCancel,
	ToolSessionOpen, ToolSessionHeartbeat, ToolSessionClose,
	ToolWorkList, ToolWorkGet, ToolApprovalPrompt,
}

// approvalRequestDescription is the brief's description, then what the
// result means and what to do next.
const approvalRequestDescription = `Request a human decision. Advisory proposals record the decision but execute nothing; supported command proposals execute atomically only after approval. Link the request to your session with sessionId so the session shows as waiting. An agent_request may ask a question instead: send question {} for a free-text answer or { choices } for up to 6 options. The answer appears in approval_status and, with a sessionId, as an instruction on your next session_heartbeat. With expiresInMinutes, an unresolved request expires and a command proposal never executes.

The result is the request, normally with status "pending": a person will decide, and nothing has happened yet — accepted is not approved, and approved is not done. Check approval_status or your next session_heartbeat. Without expiresInMinutes the request expires at the server's longest window. A work_move command proposal is checked now (the item and column exist, your token has the work:write scope) and is executed by Airlock only when a reviewer approves it, and only if the item is still in the column it is in now. To retry safely after an error, send the same arguments with the same idempotencyKey: you get the same request back (replayed: true); the same key with different arguments is refused.`

func bptr(b bool) *bool { return &b }

// tools returns every tool with its definition and call.
func (s *Server) tools() []tool {
	approvalRequestIn := schema(approvalRequestSchema)
	approvalRequestResolved := resolve(approvalRequestIn)
	approvalOut := schema([]byte(approvalOutSchema))

	return []tool{
		{
			def: &mcp.Tool{
				Name: ToolApprovalRequest, Title: "Ask a person to decide",
				Description: approvalRequestDescription,
				InputSchema: approvalRequestIn, OutputSchema: approvalOut,
				Annotations: &mcp.ToolAnnotations{Title: "Ask a person to decide", IdempotentHint: true, DestructiveHint: bptr(false), OpenWorldHint: bptr(false)},
			},
			call: func(ctx context.Context, c airlock.Caller, args []byte) (string, any, error) {
				in, err := parseApprovalRequest(args, approvalRequestResolved)
				if err != nil {
					return "", nil, err
				}
				r, created, err := s.svc.CreateMCPRequest(ctx, c, in)
				if err != nil {
					return "", nil, err
				}
				out := newApprovalOut(r)
				out.Replayed = !created
				summary := fmt.Sprintf("Approval request %s — %s", r.ID, out.Next)
				if !created {
					summary = fmt.Sprintf("Approval request %s (replayed: this idempotencyKey was used before) — %s", r.ID, out.Next)
				}
				return summary, out, nil
			},
		},
		{
			def: &mcp.Tool{
				Name: ToolApprovalStatus, Title: "Check an approval request",
				Description: `Read one of your approval requests: its status (pending, approved, denied, expired, cancelled), the reviewer's decision (note, answer, and for an approval the expiresAt after which you must not start acting on it), the answer to your question, and for a command proposal whether Airlock ran it (commandOutcome). A question is answered by an approval carrying answer; a denial means the reviewer declined, and decision.note says why. With waitSeconds (up to 60), waits for a decision before answering. Status pending means a person has not decided yet: do not act; check again later or wait for your next session_heartbeat.`,
				InputSchema: schema([]byte(approvalStatusSchema)), OutputSchema: approvalOut,
				Annotations: &mcp.ToolAnnotations{Title: "Check an approval request", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: bptr(false)},
			},
			call: s.approvalStatus(resolve(schema([]byte(approvalStatusSchema)))),
		},
		{
			def: &mcp.Tool{
				Name: ToolApprovalCancel, Title: "Withdraw an approval request",
				Description: `Withdraw one of your pending approval requests when you no longer need it. It becomes cancelled, and will never be approved or executed. A request that is already decided, expired or cancelled cannot be withdrawn: the error names the state it is in.`,
				InputSchema: schema([]byte(approvalIDSchema)), OutputSchema: approvalOut,
				Annotations: &mcp.ToolAnnotations{Title: "Withdraw an approval request", DestructiveHint: bptr(true), IdempotentHint: false, OpenWorldHint: bptr(false)},
			},
			call: s.approvalCancel(resolve(schema([]byte(approvalIDSchema)))),
		},
		{
			def: &mcp.Tool{
				Name: ToolSessionOpen, Title: "Open a session",
				Description: `Open a session: a named piece of your work that reviewers see. Pass its sessionId to approval_request, and the session shows as waiting while one of its requests is pending; each decision or answer on its requests is delivered to you exactly once as an instruction on your next session_heartbeat. Heartbeat regularly (at least every staleAfterSeconds, or reviewers see the session as stale — display only: nothing is cancelled). Close it with session_close when you are done; closing cancels its pending requests.`,
				InputSchema: schema([]byte(sessionOpenSchema)), OutputSchema: schema([]byte(sessionOpenOutSchema)),
				Annotations: &mcp.ToolAnnotations{Title: "Open a session", DestructiveHint: bptr(false), OpenWorldHint: bptr(false)},
			},
			call: s.sessionOpen(resolve(schema([]byte(sessionOpenSchema)))),
		},
		{
			def: &mcp.Tool{
				Name: ToolSessionHeartbeat, Title: "Heartbeat a session",
				Description: `Tell Airlock one of your sessions is alive, and take its new instructions: each decision or answer on the session's requests since the last heartbeat, delivered exactly once (keep them: a later heartbeat does not repeat them; approval_status still shows each request). Act on an instruction only as it says: approved lets you act on exactly what was approved, before its expiresAt; denied and expired mean do not proceed.`,
				InputSchema: schema([]byte(sessionIDSchema)), OutputSchema: schema([]byte(heartbeatOutSchema)),
				Annotations: &mcp.ToolAnnotations{Title: "Heartbeat a session", DestructiveHint: bptr(false), OpenWorldHint: bptr(false)},
			},
			call: s.sessionHeartbeat(resolve(schema([]byte(sessionIDSchema)))),
		},
		{
			def: &mcp.Tool{
				Name: ToolSessionClose, Title: "Close a session",
				Description: `Close one of your sessions when its work is done or abandoned. Its pending approval requests are cancelled in the same step (the result says how many), so none of them can be approved or executed afterwards. A closed session cannot be used again; open a new one.`,
				InputSchema: schema([]byte(sessionIDSchema)), OutputSchema: schema([]byte(sessionCloseOutSchema)),
				Annotations: &mcp.ToolAnnotations{Title: "Close a session", DestructiveHint: bptr(true), IdempotentHint: true, OpenWorldHint: bptr(false)},
			},
			call: s.sessionClose(resolve(schema([]byte(sessionIDSchema)))),
		},
		{
			def: &mcp.Tool{
				Name: ToolWorkList, Title: "Read the work board",
				Description: `Read the work board: its columns in order, each with its items. A work_move command proposal (approval_request with proposal {mode: "command", command: {method: "work_move", input: {itemId, columnKey}}}) moves one item to another column, and only once a reviewer approves it. Reading changes nothing.`,
				InputSchema: schema([]byte(workListSchema)), OutputSchema: schema([]byte(boardOutSchema)),
				Annotations: &mcp.ToolAnnotations{Title: "Read the work board", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: bptr(false)},
			},
			call: s.workList(resolve(schema([]byte(workListSchema)))),
		},
		{
			def: &mcp.Tool{
				Name: ToolWorkGet, Title: "Read a work item",
				Description: `Read one work item: its title, the column it is in, and its version (which grows with every change). Reading changes nothing.`,
				InputSchema: schema([]byte(workGetSchema)), OutputSchema: schema([]byte(itemOutSchema)),
				Annotations: &mcp.ToolAnnotations{Title: "Read a work item", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: bptr(false)},
			},
			call: s.workGet(resolve(schema([]byte(workGetSchema)))),
		},
	}
}

// required refuses an empty required string argument.
func required(field, v string) error {
	if v == "" {
		return airlock.Invalid(field, "%s is required", field)
	}
	return nil
}

func (s *Server) approvalStatus(in *jsonschema.Resolved) func(context.Context, airlock.Caller, []byte) (string, any, error) {
	return func(ctx context.Context, c airlock.Caller, args []byte) (string, any, error) {
		var a struct {
			ApprovalID  string `json:"approvalId"`
			WaitSeconds *int   `json:"waitSeconds"`
		}
		if err := decodeWith(args, &a, in, func() error {
			if err := required("approvalId", a.ApprovalID); err != nil {
				return err
			}
			if a.WaitSeconds != nil && (*a.WaitSeconds < 0 || *a.WaitSeconds > 60) {
				return airlock.Invalid("waitSeconds", "waitSeconds must be between 0 and 60 (got %d)", *a.WaitSeconds)
			}
			return nil
		}); err != nil {
			return "", nil, err
		}
		var wait time.Duration
		if a.WaitSeconds != nil {
			wait = time.Duration(*a.WaitSeconds) * time.Second
		}
		r, err := s.svc.Request(ctx, c, a.ApprovalID, wait)
		if err != nil {
			return "", nil, err
		}
		out := newApprovalOut(r)
		return fmt.Sprintf("Approval request %s — %s", r.ID, out.Next), out, nil
	}
}

func (s *Server) approvalCancel(in *jsonschema.Resolved) func(context.Context, airlock.Caller, []byte) (string, any, error) {
	return func(ctx context.Context, c airlock.Caller, args []byte) (string, any, error) {
		var a struct {
			ApprovalID string `json:"approvalId"`
		}
		if err := decodeWith(args, &a, in, func() error { return required("approvalId", a.ApprovalID) }); err != nil {
			return "", nil, err
		}
		r, err := s.svc.Cancel(ctx, c, a.ApprovalID)
		if err != nil {
			return "", nil, err
		}
		out := newApprovalOut(r)
		return fmt.Sprintf("Approval request %s — %s", r.ID, out.Next), out, nil
	}
}

func (s *Server) sessionOpen(in *jsonschema.Resolved) func(context.Context, airlock.Caller, []byte) (string, any, error) {
	return func(ctx context.Context, c airlock.Caller, args []byte) (string, any, error) {
		var a struct {
			Name     string          `json:"name"`
			Metadata json.RawMessage `json:"metadata"`
		}
		check := func() error {
			ii := airlock.InstanceInput{Name: a.Name, Metadata: a.Metadata}
			return ii.Validate()
		}
		if err := decodeWith(args, &a, in, check); err != nil {
			return "", nil, err
		}
		inst, err := s.svc.OpenSession(ctx, c, a.Name, a.Metadata)
		if err != nil {
			return "", nil, err
		}
		out := sessionOpenOut{sessionOut: s.newSessionOut(inst)}
		out.Next = fmt.Sprintf("Pass sessionId %s to approval_request; call session_heartbeat at least every %d seconds to take decisions and answers; call session_close when done.", inst.ID, out.StaleAfterSeconds)
		return fmt.Sprintf("Session %s is open.", inst.ID) + " " + out.Next, out, nil
	}
}

func (s *Server) sessionHeartbeat(in *jsonschema.Resolved) func(context.Context, airlock.Caller, []byte) (string, any, error) {
	return func(ctx context.Context, c airlock.Caller, args []byte) (string, any, error) {
		var a struct {
			SessionID string `json:"sessionId"`
		}
		if err := decodeWith(args, &a, in, func() error { return required("sessionId", a.SessionID) }); err != nil {
			return "", nil, err
		}
		inst, instructions, err := s.svc.Heartbeat(ctx, c, a.SessionID)
		if err != nil {
			return "", nil, err
		}
		out := heartbeatOut{Session: s.newSessionOut(inst), Instructions: []instructionOut{}}
		for _, ins := range instructions {
			out.Instructions = append(out.Instructions, newInstructionOut(ins))
		}
		switch {
		case len(out.Instructions) > 0:
			out.Next = fmt.Sprintf("%s delivered (each only this once): act on each as its message says.", plural(len(out.Instructions), "instruction", "instructions"))
		case inst.PendingCount > 0:
			out.Next = fmt.Sprintf("No new instructions; %s still pending: a person will decide. Heartbeat again later.", plural(inst.PendingCount, "request is", "requests are"))
		default:
			out.Next = "No new instructions and nothing pending."
		}
		return fmt.Sprintf("Session %s is %s.", inst.ID, out.Session.Status) + " " + out.Next, out, nil
	}
}

func (s *Server) sessionClose(in *jsonschema.Resolved) func(context.Context, airlock.Caller, []byte) (string, any, error) {
	return func(ctx context.Context, c airlock.Caller, args []byte) (string, any, error) {
		var a struct {
			SessionID string `json:"sessionId"`
		}
		if err := decodeWith(args, &a, in, func() error { return required("sessionId", a.SessionID) }); err != nil {
			return "", nil, err
		}
		n, err := s.svc.CloseSession(ctx, c, a.SessionID)
		if err != nil {
			return "", nil, err
		}
		out := sessionCloseOut{SessionID: a.SessionID, Status: string(airlock.SessionClosed), CancelledCount: n}
		if n == 0 {
			out.Next = "It had no pending requests. Open a new session for new work."
		} else {
			out.Next = fmt.Sprintf("%s cancelled: none of them will be approved or executed.", plural(n, "pending request was", "pending requests were"))
		}
		return fmt.Sprintf("Session %s is closed. %s", a.SessionID, out.Next), out, nil
	}
}

func (s *Server) workList(in *jsonschema.Resolved) func(context.Context, airlock.Caller, []byte) (string, any, error) {
	return func(ctx context.Context, c airlock.Caller, args []byte) (string, any, error) {
		var a struct{}
		if err := decodeWith(args, &a, in, nil); err != nil {
			return "", nil, err
		}
		cols, err := s.svc.Board(ctx, c)
		if err != nil {
			return "", nil, err
		}
		out := boardOut{Columns: []columnOut{}}
		items := 0
		for _, col := range cols {
			co := columnOut{Key: col.Key, Name: col.Name, Position: col.Position, Items: []itemOut{}}
			for _, w := range col.Items {
				io := newItemOut(w)
				io.ColumnName = col.Name
				co.Items = append(co.Items, io)
				items++
			}
			out.Columns = append(out.Columns, co)
		}
		out.Next = "To move an item, propose a work_move command with approval_request; it runs only when a reviewer approves."
		return fmt.Sprintf("The board has %s and %s.", plural(len(cols), "column", "columns"), plural(items, "item", "items")), out, nil
	}
}

type itemGetOut struct {
	itemOut
	Next string `json:"next"`
}

func (s *Server) workGet(in *jsonschema.Resolved) func(context.Context, airlock.Caller, []byte) (string, any, error) {
	return func(ctx context.Context, c airlock.Caller, args []byte) (string, any, error) {
		var a struct {
			ItemID string `json:"itemId"`
		}
		if err := decodeWith(args, &a, in, func() error { return required("itemId", a.ItemID) }); err != nil {
			return "", nil, err
		}
		w, err := s.svc.WorkItem(ctx, c, a.ItemID)
		if err != nil {
			return "", nil, err
		}
		out := itemGetOut{itemOut: newItemOut(w)}
		out.Next = "To move it, propose a work_move command with approval_request; it runs only when a reviewer approves."
		return fmt.Sprintf("Work item %s %q is in column %s (version %d).", w.ID, w.Title, w.ColumnKey, w.Version), out, nil
	}
}

// decodeWith decodes arguments strictly, runs the tool's own checks (whose
// messages name the field and the rule), then the schema check.
func decodeWith(args []byte, dst any, schema *jsonschema.Resolved, check func() error) error {
	data, err := objectArgs(args)
	if err != nil {
		return err
	}
	if err := airlock.DecodeObject(data, dst); err != nil {
		return argError(err)
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	return checkSchema(data, schema)
}
