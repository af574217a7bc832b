package sqlcore

import (
	"cmp"
	"database/sql"
	"slices"

	"github.com/airlockhq/airlock"
)

// StateCols, the columns a statement that changes many requests' states
// returns (an expiry, a close), are a request's seq, id, instance_id,
// owner_id, session_id, state, deadline_at, decided_at and decided_by:
// what their events and a sweep's caller need.

// scanChanged reads StateCols into a request that has only those fields.
func (c *Core) scanChanged(row Row, extra ...any) (airlock.Request, error) {
	var (
		r       airlock.Request
		state   string
		decided NullTime
		by      sql.NullString
	)
	dest := []any{&r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &r.SessionID, &state, c.d.Time(&r.DeadlineAt), c.d.NullTime(&decided), &by}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return airlock.Request{}, err
	}
	r.State = airlock.State(state)
	if decided.Valid {
		r.Decision = Decision(r.State, "", "", decided.Time, by.String, "", nil)
	}
	return r, nil
}

// changeRequests runs a statement that changes requests and returns them
// (StateCols) in creation order: RETURNING has no order of its own, and
// events appended from the result should read the same on every run.
func (c *Core) changeRequests(tx Tx, query string, args Args) ([]airlock.Request, error) {
	rs, err := txAll(tx, func(row Row) (airlock.Request, error) { return c.scanChanged(row) }, query, args)
	slices.SortFunc(rs, func(a, b airlock.Request) int { return cmp.Compare(a.Seq, b.Seq) })
	return rs, err
}
