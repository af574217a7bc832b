package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/jackc/pgx/v5"
)

// instructionCols is the column list every instruction query returns, in
// the order scanInstructions reads.
const instructionCols = `n.seq, n.id, n.session_id, n.request_id, n.status, n.note, n.answer, n.created_at`

// recordInstructionsSQL stores, for each request the transaction made
// approved, denied or expired, the instruction of the session it is linked
// to, dated by the decision's instant. One INSERT … SELECT: a request
// without a session (or linked to an ID that is no session) inserts
// nothing. Requests come in the order they were decided, so instruction
// seqs (a heartbeat's order) follow it.
const recordInstructionsSQL = `INSERT INTO instructions (id, session_id, request_id, status, note, answer, created_at)
SELECT d.iid, r.session_id, r.id, r.state, r.note, r.answer, d.at
FROM unnest(@iids::text[], @requests::text[], @ats::timestamptz[]) WITH ORDINALITY AS d(iid, request_id, at, ord)
JOIN requests r ON r.id = d.request_id AND r.state IN ('approved', 'denied', 'expired')
JOIN instances i ON i.id = r.session_id AND i.kind = 'session'
ORDER BY d.ord`

// recordInstructions stores the instructions of the requests t decided,
// after everything else t did and before its tail (appendTail). Its
// foreign keys take KEY SHARE locks on the sessions and requests, which
// must come before the tail's advisory lock.
func recordInstructions(ctx context.Context, t *tx) error {
	if len(t.decided) == 0 {
		return nil
	}
	n := len(t.decided)
	iids, reqs, ats := make([]string, n), make([]string, n), make([]time.Time, n)
	for i, e := range t.decided {
		iids[i], reqs[i], ats[i] = airlock.NewID(airlock.PrefixInstruction), e.RequestID, e.At
	}
	_, err := t.Exec(ctx, recordInstructionsSQL, named{"iids": iids, "requests": reqs, "ats": ats})
	return err
}

// GetSession reads a session, open or closed.
func (s *Store) GetSession(ctx context.Context, id string) (airlock.Instance, error) {
	in, err := scanInstance(s.queryRow(ctx,
		`SELECT `+instanceCols+` FROM instances i WHERE i.id = @id AND i.kind = 'session'`, named{"id": id}))
	if errors.Is(err, pgx.ErrNoRows) {
		return airlock.Instance{}, airlock.NotFound("session", id)
	}
	return in, translate(err, "session", id)
}

// ListSessions lists sessions, open and closed, newest first.
func (s *Store) ListSessions(ctx context.Context, ownerID string) ([]airlock.Instance, error) {
	out, err := queryAll(ctx, checked{s}, scanInstance, `SELECT `+instanceCols+` FROM instances i
WHERE i.kind = 'session' AND (@owner::text = '' OR i.owner_id = @owner::text) ORDER BY i.seq DESC LIMIT @limit`,
		named{"owner": ownerID, "limit": airlock.MaxSessionsListed})
	return out, translate(err, "sessions", ownerID)
}

// heartbeatSQL stamps an open session's last_seen_at. It locks the session
// row first and reads the clock after, so heartbeats of one session queue
// on that lock (and their stamps grow in that order), and a close that
// committed while it waited leaves nothing to stamp.
const heartbeatSQL = `WITH locked AS MATERIALIZED (
	SELECT l.id FROM instances l WHERE l.id = @id AND l.kind = 'session' AND l.deleted_at IS NULL FOR NO KEY UPDATE
),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM locked)
UPDATE instances i SET last_seen_at = tick.now
FROM tick
WHERE i.id = @id AND i.kind = 'session' AND i.deleted_at IS NULL
RETURNING tick.now`

// Heartbeat stamps the open session's last_seen_at and takes its
// undelivered instructions with one UPDATE … RETURNING, in one
// transaction: an instruction is returned by exactly one heartbeat. Under
// READ COMMITTED, a second heartbeat's UPDATE either waits for the first
// (the session row lock) and then reads its deliveries as committed, or
// re-checks delivered_at IS NULL on each row the first changed: either
// way it skips them.
func (s *Store) Heartbeat(ctx context.Context, sessionID string) (airlock.Instance, []airlock.Instruction, error) {
	var (
		out  airlock.Instance
		took []airlock.Instruction
	)
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		took = nil
		var now time.Time
		err := t.QueryRow(ctx, heartbeatSQL, named{"now": s.now(), "id": sessionID}).Scan(&now)
		if errors.Is(err, pgx.ErrNoRows) {
			return airlock.NotFound("open session", sessionID)
		}
		if err != nil {
			return err
		}
		now = now.UTC()
		rows, err := t.Query(ctx, `UPDATE instructions n SET delivered_at = @now
WHERE n.session_id = @id AND n.delivered_at IS NULL RETURNING `+instructionCols, named{"now": now, "id": sessionID})
		if err != nil {
			return err
		}
		if took, err = scanInstructions(rows); err != nil {
			return err
		}
		for _, ist := range took {
			t.event(airlock.Event{Type: airlock.EventInstructionDelivered, At: now, Actor: sessionID,
				RequestID: ist.RequestID, InstanceID: sessionID, Subject: ist.ID})
		}
		out, err = scanInstance(t.QueryRow(ctx, `SELECT `+instanceCols+` FROM instances i WHERE i.id = @id`, named{"id": sessionID}))
		return err
	})
	if err != nil {
		return airlock.Instance{}, nil, translate(err, "session", sessionID)
	}
	return out, took, nil
}

// scanInstructions reads every row of instructionCols, oldest first
// (RETURNING has no order: they are sorted as they were decided), and
// closes rows.
func scanInstructions(rows pgx.Rows) ([]airlock.Instruction, error) {
	defer rows.Close()
	type seqd struct {
		seq int64
		ist airlock.Instruction
	}
	var all []seqd
	for rows.Next() {
		var (
			x      seqd
			status string
		)
		if err := rows.Scan(&x.seq, &x.ist.ID, &x.ist.SessionID, &x.ist.RequestID, &status, &x.ist.Note, &x.ist.Answer, &x.ist.CreatedAt); err != nil {
			return nil, err
		}
		x.ist.Status, x.ist.CreatedAt = airlock.State(status), x.ist.CreatedAt.UTC()
		all = append(all, x)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b seqd) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]airlock.Instruction, 0, len(all)) // empty, not nil, as the SQLite driver returns
	for _, x := range all {
		out = append(out, x.ist)
	}
	return out, nil
}

// CloseSession closes an open session as DeleteInstance deletes an
// instance, with a session.closed event; a closed session is left as it
// is. It locks the session row before anything else (closeInstance says
// why FOR NO KEY UPDATE), so a close and a heartbeat or a create on the
// session serialize.
func (s *Store) CloseSession(ctx context.Context, id, actor string) ([]string, error) {
	var cancelled []string
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		cancelled = nil
		var (
			kind   string
			closed *time.Time
		)
		err := t.QueryRow(ctx, `SELECT kind, deleted_at FROM instances WHERE id = @id FOR NO KEY UPDATE`,
			named{"id": id}).Scan(&kind, &closed)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || (err == nil && airlock.InstanceKind(kind) != airlock.InstanceSession):
			return airlock.NotFound("session", id)
		case err != nil:
			return err
		case closed != nil:
			return nil
		}
		cancelled, err = s.closeInstance(ctx, t, id, actor, airlock.EventSessionClosed)
		return err
	})
	if err != nil {
		return nil, translate(err, "session", id)
	}
	return cancelled, nil
}

// mcpInstanceAttempts bounds how often MCPInstance tries again when the
// default instance it yielded to was deleted before it could read it.
const mcpInstanceAttempts = 3

// MCPInstance returns the owner's live default MCP instance, creating it
// with an INSERT that yields to the partial unique index on live defaults,
// so concurrent first uses end with one: under READ COMMITTED the loser's
// INSERT waits for the winner's to commit, then does nothing, and the
// SELECT after it (a new snapshot) reads the winner's row. Should that
// row be deleted in between, it inserts again.
func (s *Store) MCPInstance(ctx context.Context, ownerID, actor string) (airlock.Instance, error) {
	if ownerID == "" {
		return airlock.Instance{}, airlock.Invalid("owner", "a default MCP instance needs an owner")
	}
	var out airlock.Instance
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		for range mcpInstanceAttempts {
			id := airlock.NewID(airlock.PrefixInstance)
			var at time.Time
			err := t.QueryRow(ctx, tickCTE+`INSERT INTO instances (id, owner_id, name, created_at, kind, mcp_default)
SELECT @id::text, @owner::text, 'mcp', tick.now, 'adapter', true FROM tick
ON CONFLICT (owner_id) WHERE mcp_default AND deleted_at IS NULL DO NOTHING
RETURNING created_at`, named{"now": s.now(), "id": id, "owner": ownerID}).Scan(&at)
			switch {
			case err == nil:
				t.event(airlock.Event{Type: airlock.EventInstanceCreated, At: at.UTC(), Actor: actor, InstanceID: id})
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
			out, err = scanInstance(t.QueryRow(ctx, `SELECT `+instanceCols+` FROM instances i
WHERE i.owner_id = @owner AND i.mcp_default AND i.deleted_at IS NULL`, named{"owner": ownerID}))
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		return fmt.Errorf("the default MCP instance of %s was deleted %d times while it was being read; try again", ownerID, mcpInstanceAttempts)
	})
	if err != nil {
		return airlock.Instance{}, translate(err, "default MCP instance of", ownerID)
	}
	return out, nil
}

// RequestByKey reads the request an owner created with an idempotency key.
func (s *Store) RequestByKey(ctx context.Context, ownerID, key string) (airlock.Request, error) {
	r, err := scanRequest(s.queryRow(ctx, `SELECT `+requestCols+` FROM requests r WHERE r.owner_id = @owner AND r.idempotency_key = @key`,
		named{"owner": ownerID, "key": key}))
	if errors.Is(err, pgx.ErrNoRows) {
		return airlock.Request{}, airlock.Errorf(airlock.CodeNotFound, "no request with idempotency key %q", key)
	}
	return r, translate(err, "request with key", key)
}
