package sqlcore

import (
	"context"
	"database/sql"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// HistorySQL are the statements of store.History. Both read the index of
// approvals and denials by decision time (migration 0028,
// requests_decided) over decided_at > @now - @age.
type HistorySQL struct {
	// Times yields decided_by, state, created_at, decided_at and the
	// arguments' size in bytes of every approval and denial in the window.
	Times string
	// TimesBy is Times for one decider, @decided_by.
	TimesBy string
	// Calls yields id, instance_id, tool, state, decided_by and arguments
	// of every approved or denied tool call (kind tool_call, no question,
	// no command) in the window, but the approvals of a rule, a grant or
	// the system (decided_by policy:…, grant:…, system:…) and those of an
	// edit's replacement (derived_from set: approved with changes, not
	// unchanged; its original's denial is in).
	Calls string
}

// DecisionTimes reads the decision times of the window (store.History).
func (c *Core) DecisionTimes(ctx context.Context, p store.HistoryParams, fn func(store.DecidedRequest) error) error {
	if err := p.Validate(); err != nil {
		return err
	}
	q, args := c.q.History.Times, Args{{"age", p.Age}}
	if p.DecidedBy != "" {
		q, args = c.q.History.TimesBy, append(args, Arg{"decided_by", p.DecidedBy})
	}
	rows, err := c.d.Query(ctx, q, args)
	if err != nil {
		return c.d.Translate(err, "requests", "decision times")
	}
	defer rows.Close()
	for rows.Next() {
		var (
			d     store.DecidedRequest
			state string
			size  sql.NullInt64
		)
		if err := rows.Scan(&d.DecidedBy, &state, c.d.Time(&d.CreatedAt), c.d.Time(&d.DecidedAt), &size); err != nil {
			return c.d.Translate(err, "requests", "decision times")
		}
		d.State, d.ArgumentsBytes = airlock.State(state), int(size.Int64)
		if err := fn(d); err != nil {
			return err
		}
	}
	return c.d.Translate(rows.Err(), "requests", "decision times")
}

// DecidedCalls reads the tool calls decided in the window (store.History).
func (c *Core) DecidedCalls(ctx context.Context, p store.HistoryParams, fn func(store.DecidedRequest) error) error {
	if err := p.Validate(); err != nil {
		return err
	}
	rows, err := c.d.Query(ctx, c.q.History.Calls, Args{{"age", p.Age}})
	if err != nil {
		return c.d.Translate(err, "requests", "decided calls")
	}
	defer rows.Close()
	for rows.Next() {
		var (
			d     store.DecidedRequest
			state string
			args  []byte
		)
		if err := rows.Scan(&d.ID, &d.InstanceID, &d.Tool, &state, &d.DecidedBy, &args); err != nil {
			return c.d.Translate(err, "requests", "decided calls")
		}
		d.State, d.Arguments, d.ArgumentsBytes = airlock.State(state), args, len(args)
		if err := fn(d); err != nil {
			return err
		}
	}
	return c.d.Translate(rows.Err(), "requests", "decided calls")
}
