package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// TaskKeep is how long an MCP task stays readable after its request was
// decided or its deadline passed, whichever is later: long enough for a
// client that polls at the suggested interval, or came back after a
// restart, to read the outcome (docs/mcp.md, "Tasks").
const TaskKeep = time.Hour

// TaskExpiresAt is when a task on request r stops being readable: TaskKeep
// after r was decided, or after its deadline while it is pending.
func TaskExpiresAt(r airlock.Request) time.Time {
	end := r.DeadlineAt
	if d := r.Decision; d != nil && d.DecidedAt.After(end) {
		end = d.DecidedAt
	}
	return end.Add(TaskKeep)
}

// taskSweepBatch bounds one write of SweepTasks.
const taskSweepBatch = 500

// SweepTasks deletes every MCP task past its TaskExpiresAt, in store writes
// of up to taskSweepBatch rows each, and returns how many it deleted. The
// retention loop calls it every purgeEvery on every replica (a task it
// deletes is already unreadable: Task answers not_found past that time);
// it is exported for tests, which step it on their clock.
func (s *Service) SweepTasks(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.system.SweepTasks(ctx, TaskKeep, taskSweepBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("sweep tasks: %w", err)
		}
		if n < taskSweepBatch {
			return total, nil
		}
	}
}

// CreateTask makes an MCP task of kind (store.TaskApprovalStatus, …) on
// request requestID of c's, with what its answer needs besides the request
// (call), and returns it with the request as it was read. A request c
// cannot read is not_found.
func (s *Service) CreateTask(ctx context.Context, c airlock.Caller, kind, requestID string, call json.RawMessage) (store.Task, airlock.Request, error) {
	r, err := s.read(ctx, c, requestID)
	if err != nil {
		return store.Task{}, airlock.Request{}, err
	}
	if r.OwnerID != c.ID {
		return store.Task{}, airlock.Request{}, airlock.NotFound("approval request", requestID)
	}
	t, err := s.storeFor(c).CreateTask(ctx, store.Task{ID: airlock.NewID("tsk_"), RequestID: r.ID, Owner: c.ID, Kind: kind, Call: call})
	if err != nil {
		return store.Task{}, airlock.Request{}, err
	}
	return t, r, nil
}

// Task reads task id of c's with its request as it is now (expired first
// when its deadline has passed). Another's task, and one past its
// TaskExpiresAt, is not_found.
func (s *Service) Task(ctx context.Context, c airlock.Caller, id string) (store.Task, airlock.Request, error) {
	t, err := s.storeFor(c).GetTask(ctx, id)
	if err != nil {
		return store.Task{}, airlock.Request{}, err
	}
	if t.Owner != c.ID {
		return store.Task{}, airlock.Request{}, airlock.NotFound("task", id)
	}
	r, err := s.read(ctx, c, t.RequestID)
	if err != nil {
		return store.Task{}, airlock.Request{}, err
	}
	if !s.clock.Now().Before(TaskExpiresAt(r)) {
		return store.Task{}, airlock.Request{}, airlock.NotFound("task", id)
	}
	return t, r, nil
}
