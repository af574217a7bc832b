package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
)

// grantStateSQL and grantLiveSQL are a grant's state and its liveness,
// judged at tick.now; the table is aliased g.
const (
	grantStateSQL = sqlcore.GrantStateBeforeClock + "tick.now" + sqlcore.GrantStateAfterClock
	grantLiveSQL  = sqlcore.GrantLiveBeforeClock + "tick.now" + sqlcore.GrantLiveAfterClock
)

// grantMayCoverSQL selects the live grants that could cover a request
// being created (store.NewRequestParams.UnlessGranted): of its tool, in
// its scope, made by another principal than @unless_granted, whatever
// their match. It reads tick.now and inst, as createInsertSQL has them.
const grantMayCoverSQL = `SELECT 1 FROM grants g
	WHERE g.tool = @tool::text AND (g.instance_id = inst.id OR g.agent_id = inst.owner_id)
	AND g.created_by_principal <> @unless_granted::text AND ` + grantLiveSQL

// grantCols is what every grant query selects, in scanGrant's order.
const grantCols = `g.id, g.tool, g.match_kind, g.arguments_fingerprint, g.expression, g.instance_id, g.agent_id,
	g.uses, g.uses_left, (extract(epoch FROM g.validity) * 1000000)::bigint, g.created_at, g.expires_at,
	g.created_by, g.created_by_principal, g.request_id, g.revoked_at, g.revoked_by, ` + grantStateSQL

// useGrantSQL counts one use of grant @grant if it is live and covers the
// request being created (its tool, its scope, another principal's, the
// same arguments for a same_arguments grant), and returns its validity in
// microseconds. No row: it does not cover the request now. Two creates
// racing for a grant's last use serialize on its row lock, and the second
// re-checks uses_left once the first commits, so it finds none left.
const useGrantSQL = tickCTE + `UPDATE grants AS g SET uses_left = g.uses_left - 1 FROM tick
WHERE g.id = @grant AND g.tool = @tool AND (g.instance_id = @instance OR g.agent_id = @owner)
	AND g.created_by_principal <> @principal
	AND (g.match_kind <> 'same_arguments' OR g.arguments_fingerprint = @args)
	AND ` + grantLiveSQL + `
RETURNING (extract(epoch FROM g.validity) * 1000000)::bigint`

func scanGrant(row pgx.Row) (airlock.Grant, error) {
	var (
		g           airlock.Grant
		uses, left  *int32
		validity    int64
		revoked     *time.Time
		kind, state string
	)
	if err := row.Scan(&g.ID, &g.Tool, &kind, &g.Match.ArgumentsFingerprint, &g.Match.Expression, &g.InstanceID, &g.AgentID,
		&uses, &left, &validity, &g.CreatedAt, &g.ExpiresAt, &g.CreatedBy, &g.CreatedByPrincipal,
		&g.RequestID, &revoked, &g.RevokedBy, &state); err != nil {
		return airlock.Grant{}, err
	}
	g.Match.Kind, g.State = airlock.GrantMatchKind(kind), airlock.GrantState(state)
	if uses != nil {
		g.Uses = new(int(*uses))
	}
	if left != nil {
		g.UsesLeft = new(int(*left))
	}
	g.Validity = time.Duration(validity) * time.Microsecond
	g.CreatedAt, g.ExpiresAt = g.CreatedAt.UTC(), g.ExpiresAt.UTC()
	if revoked != nil {
		g.RevokedAt = new(revoked.UTC())
	}
	return g, nil
}

const selectGrantSQL = tickCTE + `SELECT ` + grantCols + ` FROM grants g, tick WHERE g.id = @id`

// CreateGrant stores a new grant, if its instance (when it is scoped to
// one) is live, with its grant.created event.
func (s *Store) CreateGrant(ctx context.Context, p store.NewGrantParams) (airlock.Grant, error) {
	if err := p.Validate(); err != nil {
		return airlock.Grant{}, err
	}
	g := p.Grant
	var out airlock.Grant
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var at time.Time
		err := t.QueryRow(ctx, tickCTE+`INSERT INTO grants (id, tool, match_kind, arguments_fingerprint, expression,
	instance_id, agent_id, uses, uses_left, validity, created_at, expires_at, created_by, created_by_principal, request_id)
SELECT @id::text, @tool::text, @kind::text, @args::text, @expr::text, @instance::text, @agent::text, @uses::integer, @uses::integer,
	@validity::interval, tick.now, tick.now + @lifetime::interval, @by::text, @principal::text, @request::text
FROM tick
WHERE @instance::text = '' OR EXISTS (SELECT 1 FROM instances i WHERE i.id = @instance::text AND i.deleted_at IS NULL)
RETURNING created_at`,
			named{"now": s.now(), "id": g.ID, "tool": g.Tool, "kind": string(g.Match.Kind),
				"args": g.Match.ArgumentsFingerprint, "expr": g.Match.Expression,
				"instance": g.InstanceID, "agent": g.AgentID, "uses": sqlcore.Value(g.Uses),
				"validity": g.Validity, "lifetime": p.Lifetime, "by": g.CreatedBy,
				"principal": g.CreatedByPrincipal, "request": g.RequestID}).Scan(&at)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return airlock.NotFound("instance", g.InstanceID)
		case err != nil:
			return err
		}
		t.event(airlock.Event{Type: airlock.EventGrantCreated, At: at.UTC(), Actor: g.CreatedBy,
			InstanceID: g.InstanceID, RequestID: g.RequestID, Subject: g.ID})
		out, err = scanGrant(t.QueryRow(ctx, selectGrantSQL, named{"now": s.now(), "id": g.ID}))
		return err
	})
	if err != nil {
		return airlock.Grant{}, translate(err, "grant", g.ID)
	}
	return out, nil
}

// GetGrant reads a grant with its state.
func (s *Store) GetGrant(ctx context.Context, id string) (airlock.Grant, error) {
	g, err := scanGrant(s.queryRow(ctx, selectGrantSQL, named{"now": s.now(), "id": id}))
	return g, translate(err, "grant", id)
}

// ListGrants lists grants, newest first.
func (s *Store) ListGrants(ctx context.Context, f store.GrantFilter) ([]airlock.Grant, error) {
	q := tickCTE + `SELECT ` + grantCols + ` FROM grants g, tick WHERE (@tool::text = '' OR g.tool = @tool::text)`
	if f.Live {
		q += ` AND ` + grantLiveSQL
	}
	q += ` ORDER BY g.seq DESC LIMIT @limit`
	out, err := queryAll(ctx, checked{s}, scanGrant, q,
		named{"now": s.now(), "tool": f.Tool, "limit": store.RequestFilter{Limit: f.Limit}.PageSize()})
	return out, translate(err, "grants", "list")
}

// RevokeGrant ends a grant with a compare-and-set on revoked_at IS NULL,
// so a second revocation keeps the first time and appends no event.
func (s *Store) RevokeGrant(ctx context.Context, id, actor string) (airlock.Grant, error) {
	var out airlock.Grant
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var (
			at       time.Time
			instance string
		)
		err := t.QueryRow(ctx, tickCTE+`UPDATE grants g SET revoked_at = tick.now, revoked_by = @actor FROM tick
WHERE g.id = @id AND g.revoked_at IS NULL RETURNING g.instance_id, tick.now`,
			named{"now": s.now(), "id": id, "actor": actor}).Scan(&instance, &at)
		switch {
		case err == nil:
			t.event(airlock.Event{Type: airlock.EventGrantRevoked, At: at.UTC(), Actor: actor, InstanceID: instance, Subject: id})
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		out, err = scanGrant(t.QueryRow(ctx, selectGrantSQL, named{"now": s.now(), "id": id}))
		return err
	})
	if err != nil {
		return airlock.Grant{}, translate(err, "grant", id)
	}
	return out, nil
}

// useGrant counts one use of the first of u.IDs that covers request in,
// and returns the decision it makes; nil when none does.
func (s *Store) useGrant(ctx context.Context, t *tx, u *store.GrantUse, in airlock.Request) (*airlock.InitialDecision, error) {
	for _, id := range u.IDs {
		var validity int64
		err := t.QueryRow(ctx, useGrantSQL, named{"now": s.now(), "grant": id, "tool": in.Tool,
			"instance": in.InstanceID, "owner": in.OwnerID, "principal": u.Principal,
			"args": u.ArgumentsFingerprint}).Scan(&validity)
		switch {
		case err == nil:
			return &airlock.InitialDecision{Status: airlock.StateApproved, DecidedBy: airlock.GrantActor(id),
				Validity: time.Duration(validity) * time.Microsecond}, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, err
		}
	}
	return nil, nil
}

// errGrantUnused rolls back a create that inserted nothing after counting
// a grant's use.
var errGrantUnused = errors.New("postgres: a create that inserted nothing undoes its grant's use")
