package sqlcore

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// TaskSQL are the statements of store.Tasks. A task is read as its id,
// request_id, owner_id, kind, call and created_at.
type TaskSQL struct {
	// Insert stores task @id of kind @kind with @call on request
	// @request_id, created at @now, when that request's owner is @owner,
	// and returns its instant; no row when the request is not @owner's.
	Insert string
	// Get selects task @id.
	Get string
	// Sweep deletes up to @limit tasks whose request was decided, or
	// whose deadline passed, @keep before @now (whichever is later).
	Sweep string
}

// CreateTask stores a task on a request of its owner's.
func (c *Core) CreateTask(ctx context.Context, t store.Task) (store.Task, error) {
	if err := t.Validate(); err != nil {
		return store.Task{}, err
	}
	err := c.d.Write(ctx, func(tx Tx) error {
		err := tx.QueryRow(c.q.Tasks.Insert, Args{{"id", t.ID}, {"request_id", t.RequestID}, {"owner", t.Owner},
			{"kind", t.Kind}, {"call", Text(t.Call)}}).Scan(c.d.Time(&t.CreatedAt))
		if noRows(err) {
			return airlock.NotFound("approval request", t.RequestID)
		}
		return err
	})
	if err != nil {
		return store.Task{}, c.d.Translate(err, "task", t.ID)
	}
	return t, nil
}

// GetTask reads a task.
func (c *Core) GetTask(ctx context.Context, id string) (store.Task, error) {
	var (
		t    store.Task
		call *string
	)
	err := c.d.QueryRow(ctx, c.q.Tasks.Get, Args{{"id", id}}).Scan(&t.ID, &t.RequestID, &t.Owner, &t.Kind, &call, c.d.Time(&t.CreatedAt))
	if err != nil {
		return store.Task{}, c.d.Translate(err, "task", id)
	}
	if call != nil {
		t.Call = []byte(*call)
	}
	return t, nil
}

// SweepTasks deletes, in one write, up to limit tasks whose lifetime is
// over.
func (c *Core) SweepTasks(ctx context.Context, keep time.Duration, limit int) (int, error) {
	var n int64
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		n, err = tx.Exec(c.q.Tasks.Sweep, Args{{"keep", keep}, {"limit", store.Batch(limit)}})
		return err
	})
	return int(n), c.d.Translate(err, "tasks", "sweep")
}
