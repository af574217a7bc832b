package store

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Tasks keeps MCP tasks (docs/mcp.md, "Tasks"): the handle an MCP client
// polls, instead of waiting inside one call, while a call waits for a
// person. A task names the request it waits on and holds nothing the
// request does not decide, so every replica answers it with the request's
// one outcome, and it outlives the process that made it.
type Tasks interface {
	// CreateTask stores t, a task on request t.RequestID of owner
	// t.Owner, created at the store's now, and returns it as stored. A
	// request that is not the owner's, or none, is not_found; an invalid
	// task is invalid_request.
	CreateTask(ctx context.Context, t Task) (Task, error)
	// GetTask reads task id; not_found when there is none. Whose it is
	// (Owner) is the caller's to check.
	GetTask(ctx context.Context, id string) (Task, error)
	// SweepTasks deletes up to limit tasks (store.Batch(limit)) whose
	// lifetime is over: keep after their request was decided, or after
	// its deadline while it is pending, whichever is later, by the
	// store's clock. It returns how many it deleted: fewer than the limit
	// means none is left.
	SweepTasks(ctx context.Context, keep time.Duration, limit int) (int, error)
}

// Task is an MCP task: a call that answers with a handle on the request
// it waits for.
type Task struct {
	// ID is the task's own, "tsk_" and random text: the taskId a client
	// polls with.
	ID        string
	RequestID string
	// Owner is the ID of the agent token that made the call.
	Owner string
	// Kind is the call the task answers for: TaskApprovalStatus,
	// TaskApprovalPrompt.
	Kind string
	// Call is what the call's answer needs besides the request, as JSON
	// (approval_prompt's input, say); at most MaxTaskCall bytes, may be
	// empty.
	Call      json.RawMessage
	CreatedAt time.Time
}

// The kinds of calls a task answers for.
const (
	TaskApprovalStatus = "approval_status"
	TaskApprovalPrompt = "approval_prompt"
)

// MaxTaskCall bounds Task.Call.
const MaxTaskCall = 64 << 10

// Validate reports what is wrong with a task to create.
func (t Task) Validate() error {
	switch {
	case !strings.HasPrefix(t.ID, "tsk_") || len(t.ID) < 20 || len(t.ID) > 64:
		return airlock.Invalid("id", "a task id is tsk_ and 16 to 60 more characters")
	case t.RequestID == "":
		return airlock.Invalid("request_id", "a task needs its request")
	case t.Owner == "":
		return airlock.Invalid("owner", "a task needs its owner")
	case t.Kind != TaskApprovalStatus && t.Kind != TaskApprovalPrompt:
		return airlock.Invalid("kind", "a task's kind is approval_status or approval_prompt")
	case len(t.Call) > MaxTaskCall:
		return airlock.Invalid("call", "a task's call is at most 64 KiB")
	case len(t.Call) > 0 && !json.Valid(t.Call):
		return airlock.Invalid("call", "a task's call is JSON")
	}
	return nil
}
