package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
)

// Fault points of WithFaultHook: where, inside the transaction that
// records an approval of a command proposal, a test may make it fail.
const (
	// FaultAfterApproval is after the approval is written and before the
	// command's effect.
	FaultAfterApproval = "decide.after_approval"
	// FaultAfterEffect is after the command's effect and before its result
	// is written on the request.
	FaultAfterEffect = "decide.after_effect"
)

// WithFaultHook installs a test hook called at each fault point (the
// Fault* constants) of a command's approval. When it returns an error the
// transaction fails with that error and rolls back. Tests use it to show
// that an approval and its command's effect commit together or not at
// all (T12 in docs/reliability.md). Never set it in production.
func WithFaultHook(hook func(point string) error) Option {
	return func(cfg *config) { cfg.fault = hook }
}

func (s *Store) injectFault(point string) error {
	if s.fault == nil {
		return nil
	}
	if err := s.fault(point); err != nil {
		return fmt.Errorf("fault injected at %s: %w", point, err)
	}
	return nil
}

// commandFailed is the error of an approval whose command cannot apply:
// the transaction rolls back, so the request is still pending.
func commandFailed(r airlock.Request, format string, args ...any) *airlock.Error {
	return airlock.Conflict(airlock.CodeCommandFailed, airlock.StatePending,
		"%s cannot apply: %s; nothing was recorded and request %s is still pending (deny it, or let it expire)",
		r.Proposal.Command.Method, fmt.Sprintf(format, args...), r.ID)
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
	if err := s.injectFault(FaultAfterApproval); err != nil {
		return r, err
	}
	var (
		detail string
		err    error
	)
	switch r.Proposal.Command.Method {
	case airlock.MethodWorkMove:
		detail, err = workMove(ctx, tx, now, r)
	default:
		err = commandFailed(r, "this server does not know the command %q", r.Proposal.Command.Method)
	}
	if err != nil {
		return r, err
	}
	if err := s.injectFault(FaultAfterEffect); err != nil {
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
	cmd := r.Proposal.Command
	var (
		in  airlock.WorkMoveInput
		obs airlock.WorkMoveObserved
	)
	if err := json.Unmarshal(cmd.Input, &in); err != nil {
		return "", fmt.Errorf("request %s: stored work_move input: %w", r.ID, err)
	}
	if len(cmd.Observed) == 0 {
		return "", commandFailed(r, "the request records no observed state of item %s to check it against", in.ItemID)
	}
	if err := json.Unmarshal(cmd.Observed, &obs); err != nil {
		return "", fmt.Errorf("request %s: stored work_move observation: %w", r.ID, err)
	}

	tok, err := scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, r.OwnerID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", commandFailed(r, "the requesting token %s no longer exists", r.OwnerID)
	case err != nil:
		return "", err
	case tok.RevokedAt != nil:
		return "", commandFailed(r, "the requesting agent's token %s was revoked at %s", tok.ID, tok.RevokedAt.Format(time.RFC3339Nano))
	case !tok.HasScope(airlock.ScopeWorkWrite):
		return "", commandFailed(r, "the requesting agent's token %s no longer has the %s scope", tok.ID, airlock.ScopeWorkWrite)
	}

	item, err := scanWorkItem(tx.QueryRowContext(ctx, `UPDATE work_items
SET column_key = @to, version = version + 1, updated_at = @now
WHERE id = @id AND column_key = @from
  AND EXISTS (SELECT 1 FROM board_columns WHERE column_key = @to)
RETURNING `+workItemCols,
		sql.Named("id", in.ItemID), sql.Named("from", obs.FromColumnKey), sql.Named("to", in.ColumnKey), sql.Named("now", micros(now))))
	if errors.Is(err, sql.ErrNoRows) {
		cur, err := scanWorkItem(tx.QueryRowContext(ctx, `SELECT `+workItemCols+` FROM work_items WHERE id = ?`, in.ItemID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return "", commandFailed(r, "item %s no longer exists", in.ItemID)
		case err != nil:
			return "", err
		case cur.ColumnKey != obs.FromColumnKey:
			return "", commandFailed(r, "item %s is no longer in column %s (now in %s)", in.ItemID, obs.FromColumnKey, cur.ColumnKey)
		default:
			return "", commandFailed(r, "column %s no longer exists", in.ColumnKey)
		}
	}
	if err != nil {
		return "", err
	}
	actor := ""
	if r.Decision != nil {
		actor = r.Decision.DecidedBy
	}
	if err := appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventWorkItemMoved, Actor: actor,
		RequestID: r.ID, InstanceID: r.InstanceID, Subject: item.ID}); err != nil {
		return "", err
	}
	return fmt.Sprintf("moved work item %s from %s to %s (now version %d)", item.ID, obs.FromColumnKey, item.ColumnKey, item.Version), nil
}
