package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
)

// instructionCols is the column list every instruction query returns, in
// the order scanInstruction reads.
const instructionCols = `seq, id, session_id, request_id, status, note, answer, created_at`

// recordInstruction stores the instruction for request id, which has just
// become approved, denied or expired, when it is linked to a session. One
// INSERT … SELECT: a request without a session (or linked to an ID that
// is no session) inserts nothing. It is called by appendEvent, so it runs
// on every path to those states.
func recordInstruction(ctx context.Context, tx *txn, now time.Time, requestID string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO instructions (id, session_id, request_id, status, note, answer, created_at)
SELECT @iid, r.session_id, r.id, r.state, r.note, r.answer, @now
FROM requests r JOIN instances i ON i.id = r.session_id AND i.kind = 'session'
WHERE r.id = @id AND r.state IN ('approved', 'denied', 'expired')`,
		sql.Named("iid", airlock.NewID(airlock.PrefixInstruction)), sql.Named("id", requestID), sql.Named("now", micros(now)))
	return err
}

// GetSession reads a session, open or closed.
func (s *Store) GetSession(ctx context.Context, id string) (airlock.Instance, error) {
	in, err := scanInstance(s.read.QueryRowContext(ctx,
		`SELECT `+instanceCols+` FROM instances i WHERE i.id = ? AND i.kind = 'session'`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return airlock.Instance{}, airlock.NotFound("session", id)
	}
	return in, translate(err, "session", id)
}

// ListSessions lists sessions, open and closed, newest first.
func (s *Store) ListSessions(ctx context.Context, ownerID string) ([]airlock.Instance, error) {
	out, err := queryAll(ctx, s.read, scanInstance, `SELECT `+instanceCols+` FROM instances i
WHERE i.kind = 'session' AND (? = '' OR i.owner_id = ?) ORDER BY i.seq DESC LIMIT ?`,
		ownerID, ownerID, airlock.MaxSessionsListed)
	return out, translate(err, "sessions", ownerID)
}

// Heartbeat stamps the open session's last_seen_at and takes its
// undelivered instructions with one UPDATE … RETURNING, in one
// transaction: an instruction is returned by exactly one heartbeat.
func (s *Store) Heartbeat(ctx context.Context, sessionID string) (airlock.Instance, []airlock.Instruction, error) {
	var (
		out  airlock.Instance
		took []airlock.Instruction
	)
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		var got string
		err := tx.QueryRowContext(ctx, `UPDATE instances SET last_seen_at = ?
WHERE id = ? AND kind = 'session' AND deleted_at IS NULL RETURNING id`, micros(now), sessionID).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return airlock.NotFound("open session", sessionID)
		}
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `UPDATE instructions SET delivered_at = ?
WHERE session_id = ? AND delivered_at IS NULL RETURNING `+instructionCols, micros(now), sessionID)
		if err != nil {
			return err
		}
		var seqs []int64
		took, seqs, err = scanInstructions(rows)
		if err != nil {
			return err
		}
		// RETURNING has no order: oldest first, as they were decided.
		order := make([]int, len(took))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(seqs[a], seqs[b]) })
		sorted := make([]airlock.Instruction, len(took))
		for i, j := range order {
			sorted[i] = took[j]
		}
		took = sorted
		for _, ist := range took {
			if err := appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventInstructionDelivered, Actor: sessionID,
				RequestID: ist.RequestID, InstanceID: sessionID, Subject: ist.ID}); err != nil {
				return err
			}
		}
		out, err = scanInstance(tx.QueryRowContext(ctx, `SELECT `+instanceCols+` FROM instances i WHERE i.id = ?`, sessionID))
		return err
	})
	if err != nil {
		return airlock.Instance{}, nil, translate(err, "session", sessionID)
	}
	return out, took, nil
}

// scanInstructions reads every row of instructionCols and closes rows.
func scanInstructions(rows *sql.Rows) ([]airlock.Instruction, []int64, error) {
	defer rows.Close()
	var (
		out  []airlock.Instruction
		seqs []int64
	)
	for rows.Next() {
		var (
			ist     airlock.Instruction
			seq     int64
			created int64
		)
		if err := rows.Scan(&seq, &ist.ID, &ist.SessionID, &ist.RequestID, &ist.Status, &ist.Note, &ist.Answer, &created); err != nil {
			return nil, nil, err
		}
		ist.CreatedAt = fromMicros(created)
		out = append(out, ist)
		seqs = append(seqs, seq)
	}
	return out, seqs, rows.Err()
}

// CloseSession closes an open session as DeleteInstance deletes an
// instance, with a session.closed event; a closed session is left as it is.
func (s *Store) CloseSession(ctx context.Context, id, actor string) ([]string, error) {
	var cancelled []string
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		var kind airlock.InstanceKind
		var closed sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT kind, deleted_at FROM instances WHERE id = ?`, id).Scan(&kind, &closed)
		switch {
		case errors.Is(err, sql.ErrNoRows) || (err == nil && kind != airlock.InstanceSession):
			return airlock.NotFound("session", id)
		case err != nil:
			return err
		case closed.Valid:
			return nil
		}
		cancelled, err = closeInstance(ctx, tx, now, id, actor, airlock.EventSessionClosed)
		return err
	})
	if err != nil {
		return nil, translate(err, "session", id)
	}
	return cancelled, nil
}

// MCPInstance returns the owner's live default MCP instance, creating it
// with an INSERT that yields to the partial unique index on live defaults,
// so concurrent first uses end with one.
func (s *Store) MCPInstance(ctx context.Context, ownerID, actor string) (airlock.Instance, error) {
	if ownerID == "" {
		return airlock.Instance{}, airlock.Invalid("owner", "a default MCP instance needs an owner")
	}
	var out airlock.Instance
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		id := airlock.NewID(airlock.PrefixInstance)
		res, err := tx.ExecContext(ctx, `INSERT INTO instances (id, owner_id, name, created_at, kind, mcp_default)
VALUES (?, ?, 'mcp', ?, 'adapter', 1)
ON CONFLICT (owner_id) WHERE mcp_default = 1 AND deleted_at IS NULL DO NOTHING`, id, ownerID, micros(now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			if err := appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventInstanceCreated, Actor: actor, InstanceID: id}); err != nil {
				return err
			}
		}
		out, err = scanInstance(tx.QueryRowContext(ctx, `SELECT `+instanceCols+` FROM instances i
WHERE i.owner_id = ? AND i.mcp_default = 1 AND i.deleted_at IS NULL`, ownerID))
		return err
	})
	if err != nil {
		return airlock.Instance{}, translate(err, "default MCP instance of", ownerID)
	}
	return out, nil
}

// RequestByKey reads the request an owner created with an idempotency key.
func (s *Store) RequestByKey(ctx context.Context, ownerID, key string) (airlock.Request, error) {
	r, err := queryRequest(ctx, s.read, `SELECT `+requestCols+` FROM requests WHERE owner_id = ? AND idempotency_key = ?`, ownerID, key)
	if errors.Is(err, sql.ErrNoRows) {
		return airlock.Request{}, airlock.Errorf(airlock.CodeNotFound, "no request with idempotency key %q", key)
	}
	return r, translate(err, "request with key", key)
}
