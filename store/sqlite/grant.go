package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
)

// grantStateSQL and grantLiveSQL are a grant's state and its liveness,
// judged at @now; the table is aliased g.
const (
	grantStateSQL = sqlcore.GrantStateBeforeClock + "@now" + sqlcore.GrantStateAfterClock
	grantLiveSQL  = sqlcore.GrantLiveBeforeClock + "@now" + sqlcore.GrantLiveAfterClock
)

// grantMayCoverSQL selects the live grants that could cover a request
// being created (store.NewRequestParams.UnlessGranted): of its tool, in
// its scope, made by another principal than @unless_granted, whatever
// their match.
const grantMayCoverSQL = `SELECT 1 FROM grants g
	WHERE g.tool = @tool AND (g.instance_id = @instance OR g.agent_id = @owner)
	AND g.created_by_principal <> @unless_granted AND ` + grantLiveSQL

// grantCols is what every grant query selects, in scanGrant's order.
const grantCols = `g.id, g.tool, g.match_kind, g.arguments_fingerprint, g.expression, g.instance_id, g.agent_id,
	g.uses, g.uses_left, g.validity, g.created_at, g.expires_at, g.created_by, g.created_by_principal,
	g.request_id, g.revoked_at, g.revoked_by, ` + grantStateSQL

// useGrantSQL counts one use of grant @grant if it is live and covers the
// request being created (its tool, its scope, another principal's, the
// same arguments for a same_arguments grant), and returns its validity.
// No row: it does not cover the request now.
const useGrantSQL = `UPDATE grants AS g SET uses_left = g.uses_left - 1
WHERE g.id = @grant AND g.tool = @tool AND (g.instance_id = @instance OR g.agent_id = @owner)
	AND g.created_by_principal <> @principal
	AND (g.match_kind <> 'same_arguments' OR g.arguments_fingerprint = @args)
	AND ` + grantLiveSQL + `
RETURNING validity`

func scanGrant(sc scanner) (airlock.Grant, error) {
	var (
		g                airlock.Grant
		uses, left       sql.NullInt64
		validity         int64
		created, expires int64
		revoked          sql.NullInt64
		kind, state      string
	)
	if err := sc.Scan(&g.ID, &g.Tool, &kind, &g.Match.ArgumentsFingerprint, &g.Match.Expression, &g.InstanceID, &g.AgentID,
		&uses, &left, &validity, &created, &expires, &g.CreatedBy, &g.CreatedByPrincipal,
		&g.RequestID, &revoked, &g.RevokedBy, &state); err != nil {
		return airlock.Grant{}, err
	}
	g.Match.Kind, g.State = airlock.GrantMatchKind(kind), airlock.GrantState(state)
	if uses.Valid {
		g.Uses = new(int(uses.Int64))
	}
	if left.Valid {
		g.UsesLeft = new(int(left.Int64))
	}
	g.Validity = time.Duration(validity) * time.Microsecond
	g.CreatedAt, g.ExpiresAt, g.RevokedAt = fromMicros(created), fromMicros(expires), nullMicros(revoked)
	return g, nil
}

// CreateGrant stores a new grant, if its instance (when it is scoped to
// one) is live, with its grant.created event.
func (s *Store) CreateGrant(ctx context.Context, p store.NewGrantParams) (airlock.Grant, error) {
	if err := p.Validate(); err != nil {
		return airlock.Grant{}, err
	}
	g := p.Grant
	var out airlock.Grant
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO grants (id, tool, match_kind, arguments_fingerprint, expression,
	instance_id, agent_id, uses, uses_left, validity, created_at, expires_at, created_by, created_by_principal, request_id)
SELECT @id, @tool, @kind, @args, @expr, @instance, @agent, @uses, @uses, @validity, @now, @expires, @by, @principal, @request
WHERE @instance = '' OR EXISTS (SELECT 1 FROM instances i WHERE i.id = @instance AND i.deleted_at IS NULL)`,
			sql.Named("id", g.ID), sql.Named("tool", g.Tool), sql.Named("kind", string(g.Match.Kind)),
			sql.Named("args", g.Match.ArgumentsFingerprint), sql.Named("expr", g.Match.Expression),
			sql.Named("instance", g.InstanceID), sql.Named("agent", g.AgentID), sql.Named("uses", sqlcore.Value(g.Uses)),
			sql.Named("validity", g.Validity.Microseconds()), sql.Named("now", micros(now)),
			sql.Named("expires", micros(now.Add(p.Lifetime))), sql.Named("by", g.CreatedBy),
			sql.Named("principal", g.CreatedByPrincipal), sql.Named("request", g.RequestID))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return airlock.NotFound("instance", g.InstanceID)
		}
		if err := insertEvent(ctx, tx, now, airlock.Event{Type: airlock.EventGrantCreated, Actor: g.CreatedBy,
			InstanceID: g.InstanceID, RequestID: g.RequestID, Subject: g.ID}); err != nil {
			return err
		}
		out, err = getGrant(ctx, tx, g.ID, now)
		return err
	})
	if err != nil {
		return airlock.Grant{}, translate(err, "grant", g.ID)
	}
	return out, nil
}

func getGrant(ctx context.Context, q queryer, id string, now time.Time) (airlock.Grant, error) {
	return scanGrant(q.QueryRowContext(ctx, `SELECT `+grantCols+` FROM grants g WHERE g.id = @id`,
		sql.Named("id", id), sql.Named("now", micros(now))))
}

// GetGrant reads a grant with its state.
func (s *Store) GetGrant(ctx context.Context, id string) (airlock.Grant, error) {
	g, err := getGrant(ctx, s.read, id, s.now())
	return g, translate(err, "grant", id)
}

// ListGrants lists grants, newest first.
func (s *Store) ListGrants(ctx context.Context, f store.GrantFilter) ([]airlock.Grant, error) {
	q := `SELECT ` + grantCols + ` FROM grants g WHERE (@tool = '' OR g.tool = @tool)`
	if f.Live {
		q += ` AND ` + grantLiveSQL
	}
	q += ` ORDER BY g.seq DESC LIMIT @limit`
	out, err := queryAll(ctx, s.read, scanGrant, q, sql.Named("tool", f.Tool), sql.Named("now", micros(s.now())),
		sql.Named("limit", store.RequestFilter{Limit: f.Limit}.PageSize()))
	return out, translate(err, "grants", "list")
}

// RevokeGrant ends a grant with a compare-and-set on revoked_at IS NULL,
// so a second revocation keeps the first time and appends no event.
func (s *Store) RevokeGrant(ctx context.Context, id, actor string) (airlock.Grant, error) {
	var out airlock.Grant
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		var instance string
		err := tx.QueryRowContext(ctx, `UPDATE grants SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL RETURNING instance_id`,
			micros(now), actor, id).Scan(&instance)
		switch {
		case err == nil:
			if err := insertEvent(ctx, tx, now, airlock.Event{Type: airlock.EventGrantRevoked, Actor: actor,
				InstanceID: instance, Subject: id}); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		out, err = getGrant(ctx, tx, id, now)
		return err
	})
	if err != nil {
		return airlock.Grant{}, translate(err, "grant", id)
	}
	return out, nil
}

// useGrant counts one use of the first of u.IDs that covers request in,
// and returns the decision it makes; nil when none does.
func useGrant(ctx context.Context, tx *txn, now time.Time, u *store.GrantUse, in airlock.Request) (*airlock.InitialDecision, error) {
	for _, id := range u.IDs {
		var validity int64
		err := tx.QueryRowContext(ctx, useGrantSQL, sql.Named("grant", id), sql.Named("tool", in.Tool),
			sql.Named("instance", in.InstanceID), sql.Named("owner", in.OwnerID), sql.Named("principal", u.Principal),
			sql.Named("args", u.ArgumentsFingerprint), sql.Named("now", micros(now))).Scan(&validity)
		switch {
		case err == nil:
			return &airlock.InitialDecision{Status: airlock.StateApproved, DecidedBy: airlock.GrantActor(id),
				Validity: time.Duration(validity) * time.Microsecond}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, err
		}
	}
	return nil, nil
}
