package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/airlockhq/airlock"
)

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
