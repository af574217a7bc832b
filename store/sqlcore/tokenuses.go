package sqlcore

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// TokenUseSQL are the statements of store.TokenUses.
type TokenUseSQL struct {
	// Insert records the use of request @request_id's approval token
	// @jti by @actor at @now, unless the request's token was used
	// before, and returns the instant and the request's instance; no row
	// when it was used, or when there is no such request.
	Insert string
	// Get selects request @request_id's use: its jti, consumed_at and
	// consumed_by.
	Get string
}

// ConsumeApprovalToken records the one use of a request's approval token
// with one conditional write: the insert that finds the request's use
// already there inserts nothing, and the use it then reads names when the
// first was.
func (c *Core) ConsumeApprovalToken(ctx context.Context, requestID, jti, actor string) (store.TokenUse, error) {
	q := &c.q.TokenUses
	var out store.TokenUse
	err := c.d.Write(ctx, func(tx Tx) error {
		var (
			at       time.Time
			instance string
		)
		err := tx.QueryRow(q.Insert, Args{{"request_id", requestID}, {"jti", jti}, {"actor", actor}}).Scan(c.d.Time(&at), &instance)
		if err == nil {
			out = store.TokenUse{RequestID: requestID, JTI: jti, ConsumedAt: at, ConsumedBy: actor}
			tx.Changed(requestID)
			return tx.Event(airlock.Event{Type: airlock.EventExecutionTokenConsumed, At: at, Actor: actor,
				RequestID: requestID, InstanceID: instance, Subject: jti})
		}
		if !noRows(err) {
			return err
		}
		first := store.TokenUse{RequestID: requestID}
		if err := tx.QueryRow(q.Get, Args{{"request_id", requestID}}).Scan(&first.JTI, c.d.Time(&first.ConsumedAt), &first.ConsumedBy); err != nil {
			if noRows(err) {
				return airlock.NotFound("approval request", requestID)
			}
			return err
		}
		return alreadyUsed(first)
	})
	if err != nil {
		return store.TokenUse{}, c.d.Translate(err, "approval request", requestID)
	}
	return out, nil
}

// alreadyUsed is the refusal of a consume that came after first.
func alreadyUsed(first store.TokenUse) *airlock.Error {
	at := first.ConsumedAt.UTC()
	return &airlock.Error{Code: airlock.CodeAlreadyUsed, ConsumedAt: &at,
		Message: "the approval token of request " + first.RequestID + " was already used at " + at.Format(time.RFC3339Nano) +
			": an approval runs once"}
}
