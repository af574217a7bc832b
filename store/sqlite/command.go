package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
)

// Fault points of WithFaultHook: where, inside the transaction that
// records an approval of a command proposal, a test may make it fail. The
// same points as the PostgreSQL driver's (sqlcore.FaultAfterApproval).
const (
	FaultAfterApproval = sqlcore.FaultAfterApproval
	FaultAfterEffect   = sqlcore.FaultAfterEffect
)

// WithFaultHook installs a test hook called at each fault point (the
// Fault* constants) of a command's approval. When it returns an error the
// transaction fails with that error and rolls back. Tests use it to show
// that an approval and its command's effect commit together or not at
// all (T12 in docs/reliability.md). Never set it in production.
func WithFaultHook(hook func(point string) error) Option {
	return func(cfg *config) { cfg.fault = hook }
}

// applyApprovedCommand runs, in the transaction that has just approved r,
// the command r proposes, re-checking at this moment that the requesting
// token may still run it and that the target is as it was when requested;
// then it records the command's result on r. It returns r unchanged when
// r is not an approved command proposal. Any error rolls the approval back.
func (s *Store) applyApprovedCommand(ctx context.Context, tx *txn, now time.Time, r airlock.Request) (airlock.Request, error) {
	if r.State != airlock.StateApproved || r.Proposal == nil || r.Proposal.Command == nil {
		return r, nil
	}
	detail, err := sqlcore.ApplyCommand(r, s.fault, func() (string, error) { return workMove(ctx, tx, now, r) })
	if err != nil {
		return r, err
	}
	return queryRequest(ctx, tx, `UPDATE requests
SET command_status = @status, command_detail = @detail, command_applied_at = @now
WHERE id = @id AND state = 'approved' AND command_status IS NULL
RETURNING `+requestCols, sql.Named("id", r.ID), sql.Named("now", micros(now)),
		sql.Named("status", airlock.CommandApplied), sql.Named("detail", detail))
}

// workMove moves a work_move's item with one compare-and-set on the column
// it was in when requested, after checking the requesting token.
func workMove(ctx context.Context, tx *txn, now time.Time, r airlock.Request) (string, error) {
	m, err := r.StoredWorkMove()
	if err != nil {
		return "", err
	}
	var owner *airlock.Token
	tok, err := scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, r.OwnerID))
	switch {
	case err == nil:
		owner = &tok
	case !errors.Is(err, sql.ErrNoRows):
		return "", err
	}
	if err := m.CheckToken(owner); err != nil {
		return "", err
	}

	item, err := scanWorkItem(tx.QueryRowContext(ctx, `UPDATE work_items
SET column_key = @to, version = version + 1, updated_at = @now
WHERE id = @id AND column_key = @from
  AND EXISTS (SELECT 1 FROM board_columns WHERE column_key = @to)
RETURNING `+workItemCols,
		sql.Named("id", m.Input.ItemID), sql.Named("from", m.Observed.FromColumnKey), sql.Named("to", m.Input.ColumnKey), sql.Named("now", micros(now))))
	if errors.Is(err, sql.ErrNoRows) {
		cur, err := scanWorkItem(tx.QueryRowContext(ctx, `SELECT `+workItemCols+` FROM work_items WHERE id = ?`, m.Input.ItemID))
		return "", sqlcore.MoveLost(m, cur, err)
	}
	if err != nil {
		return "", err
	}
	if err := appendEvent(ctx, tx, now, m.Event(item)); err != nil {
		return "", err
	}
	return m.Detail(item), nil
}
