package postgres

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

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
