package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
)

// Fault points of WithFaultHook: where, inside the transaction that
// records an approval of a command proposal, a test may make it fail. The
// same points as the SQLite driver's (sqlcore.FaultAfterApproval).
const (
	FaultAfterApproval = sqlcore.FaultAfterApproval
	FaultAfterEffect   = sqlcore.FaultAfterEffect
)

// WithFaultHook installs a test hook called at each fault point (the
// Fault* constants) of a command's approval. When it returns an error the
// transaction fails with that error, rolls back and is not retried, so
// the caller sees it. Tests use it to show that an approval and its
// command's effect commit together or not at all (T12 in docs/reliability.md).
// Never set it in production.
func WithFaultHook(hook func(point string) error) Option {
	return func(c *config) { c.fault = hook }
}

// faultError is an error a fault hook injected. It is never retried,
// whatever it wraps (a test may inject a lost connection).
type faultError = sqlcore.FaultError

// lockedCommand is what an approval of a command proposal locked before
// its compare-and-set read the clock: the requesting token (FOR SHARE, so
// a revocation or a change of scopes waits for the approval or goes
// first) and the command's target (for work_move, the item, FOR NO KEY
// UPDATE, so a concurrent move waits or goes first). A nil field is a row
// that did not exist.
type lockedCommand struct {
	token *airlock.Token
	item  *airlock.WorkItem
}

// lockCommand locks the rows that approving request id's command will
// read and change, before the approval's compare-and-set reads the clock:
// a lock waited for after the clock was read would let the approval commit
// later than the instant it was judged by, perhaps past the deadline (a
// replica that froze holding the item, rolled back a minute later). It
// returns nil when id is no pending command proposal (or does not
// exist); the compare-and-set then decides (a request that is not pending
// never is again, so it cannot approve one).
//
// Its locks come in one order, token then target then request, and no
// other transaction takes a token or an item lock after a request lock, so
// they cannot deadlock.
func (s *Store) lockCommand(ctx context.Context, t *tx, id string) (*lockedCommand, error) {
	var (
		owner         string
		method, input *string
	)
	err := t.QueryRow(ctx, `SELECT r.owner_id, r.command_method, r.command_input FROM requests r WHERE r.id = @id AND r.state = 'pending'`,
		named{"id": id}).Scan(&owner, &method, &input)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && method == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var locked lockedCommand
	tok, err := scanToken(t.QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens t WHERE t.id = @id FOR SHARE`, named{"id": owner}))
	switch {
	case err == nil:
		locked.token = &tok
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, err
	}
	if *method == airlock.MethodWorkMove && input != nil {
		var in airlock.WorkMoveInput
		if json.Unmarshal([]byte(*input), &in) == nil {
			w, err := scanWorkItem(t.QueryRow(ctx, `SELECT `+workItemCols+` FROM work_items w WHERE w.id = @id FOR NO KEY UPDATE`,
				named{"id": in.ItemID}))
			switch {
			case err == nil:
				locked.item = &w
			case !errors.Is(err, pgx.ErrNoRows):
				return nil, err
			}
		}
	}
	return &locked, nil
}

// applyApprovedCommand runs, in the transaction that has just approved r
// at the instant at, the command r proposes, re-checking at this moment
// that the requesting token may still run it and that the target is as it
// was when requested; then it records the command's result on r. It
// returns r unchanged when r is not an approved command proposal. Any
// error rolls the approval back.
func (s *Store) applyApprovedCommand(ctx context.Context, t *tx, locked *lockedCommand, r airlock.Request, at time.Time) (airlock.Request, error) {
	if r.State != airlock.StateApproved || r.Proposal == nil || r.Proposal.Command == nil {
		return r, nil
	}
	if locked == nil {
		// lockCommand saw no command on a request the compare-and-set then
		// approved as one: a stored command never changes, so this is a bug.
		return r, fmt.Errorf("request %s: its command was not locked before its approval", r.ID)
	}
	detail, err := sqlcore.ApplyCommand(r, s.fault, func() (string, error) { return workMove(ctx, t, locked, r, at) })
	if err != nil {
		return r, err
	}
	return scanRequest(t.QueryRow(ctx, `UPDATE requests r
SET command_status = @status, command_detail = @detail, command_applied_at = @now
WHERE r.id = @id AND r.state = 'approved' AND r.command_status IS NULL
RETURNING `+requestCols, named{"id": r.ID, "now": at, "status": airlock.CommandApplied, "detail": detail}))
}

// workMove moves a work_move's item with one compare-and-set on the column
// it was in when requested, after checking the requesting token. Both rows
// are locked by this transaction (lockCommand), so what it reads here is
// what holds until it commits.
func workMove(ctx context.Context, t *tx, locked *lockedCommand, r airlock.Request, at time.Time) (string, error) {
	m, err := r.StoredWorkMove()
	if err != nil {
		return "", err
	}
	if err := m.CheckToken(locked.token); err != nil {
		return "", err
	}

	item, err := scanWorkItem(t.QueryRow(ctx, `UPDATE work_items w
SET column_key = @to, version = w.version + 1, updated_at = @now
WHERE w.id = @id AND w.column_key = @from
  AND EXISTS (SELECT 1 FROM board_columns c WHERE c.column_key = @to)
RETURNING `+workItemCols, named{"id": m.Input.ItemID, "from": m.Observed.FromColumnKey, "to": m.Input.ColumnKey, "now": at}))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := scanWorkItem(t.QueryRow(ctx, `SELECT `+workItemCols+` FROM work_items w WHERE w.id = @id`, named{"id": m.Input.ItemID}))
		return "", sqlcore.MoveLost(m, cur, err)
	}
	if err != nil {
		return "", err
	}
	ev := m.Event(item)
	ev.At = at
	t.event(ev)
	return m.Detail(item), nil
}
