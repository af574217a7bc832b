package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
)

// appendEvent appends one audit event in the caller's transaction, so an
// event exists exactly when its change committed.
//
// The event of a request becoming approved, denied or expired also stores
// the session's instruction when the request is linked to a session: every
// path to those states appends this event, so none can forget the
// instruction, and an instruction exists exactly when its decision does.
func appendEvent(ctx context.Context, tx *txn, now time.Time, e airlock.Event) error {
	if err := insertEvent(ctx, tx, now, e); err != nil {
		return err
	}
	switch e.Type {
	case airlock.EventRequestApproved, airlock.EventRequestDenied, airlock.EventRequestExpired:
		return recordInstruction(ctx, tx, now, e.RequestID)
	}
	return nil
}

// appendRequestEvent is appendEvent for the event of request r, as the
// caller's transaction holds it: a request linked to no session stores no
// instruction, so its query is skipped (it was a tenth of a decision's
// time in the writer).
func appendRequestEvent(ctx context.Context, tx *txn, now time.Time, e airlock.Event, r airlock.Request) error {
	if r.SessionID != "" {
		return appendEvent(ctx, tx, now, e)
	}
	return insertEvent(ctx, tx, now, e)
}

func insertEvent(ctx context.Context, tx *txn, now time.Time, e airlock.Event) error {
	tx.appended = true
	traceID, spanID := sqlcore.TraceOf(ctx, e)
	_, err := tx.ExecContext(ctx, `INSERT INTO events (type, at, actor, request_id, instance_id, token_id, state, subject, policy_hash, uid, trace_id, span_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, lower(hex(randomblob(16))), ?, ?)`, e.Type, micros(now), e.Actor, e.RequestID, e.InstanceID, e.TokenID, e.State, e.Subject, e.PolicyHash, traceID, spanID)
	return err
}

// appendStateEvents appends, in order, the event of each request's new
// state, all by actor, in one INSERT — a sweep expires hundreds of requests
// in one transaction that holds the writer, and one statement per event
// was most of its time — and stores the instructions of the requests
// linked to a session, as appendEvent does.
func appendStateEvents(ctx context.Context, tx *txn, now time.Time, actor string, rs []airlock.Request) error {
	if len(rs) == 0 {
		return nil
	}
	tx.appended = true
	rows := make([][4]string, len(rs))
	for i, r := range rs {
		rows[i] = [4]string{string(airlock.StateEvent(r.State)), r.ID, r.InstanceID, string(r.State)}
	}
	js, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	traceID, spanID := sqlcore.TraceOf(ctx, airlock.Event{})
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (type, at, actor, request_id, instance_id, state, uid, trace_id, span_id)
SELECT j.value ->> 0, @at, @actor, j.value ->> 1, j.value ->> 2, j.value ->> 3, lower(hex(randomblob(16))), @trace_id, @span_id
FROM json_each(@rows) j ORDER BY j.key`, sql.Named("at", micros(now)), sql.Named("actor", actor), sql.Named("rows", string(js)),
		sql.Named("trace_id", traceID), sql.Named("span_id", spanID)); err != nil {
		return err
	}
	return recordInstructions(ctx, tx, now, rs)
}

// recordInstructions stores the instructions of the decided or expired
// requests of rs that are linked to a session.
func recordInstructions(ctx context.Context, tx *txn, now time.Time, rs []airlock.Request) error {
	for _, r := range rs {
		// recordInstruction stores nothing for a request without a
		// session; skip its query.
		if r.SessionID == "" {
			continue
		}
		switch r.State {
		case airlock.StateApproved, airlock.StateDenied, airlock.StateExpired:
			if err := recordInstruction(ctx, tx, now, r.ID); err != nil {
				return err
			}
		}
	}
	return nil
}
