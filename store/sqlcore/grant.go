package sqlcore

import (
	"context"
	"database/sql"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// A grant's state is one rule (docs/policy.md, "Grants") that both
// dialects write in the same SQL, but for where the instant it is judged
// at comes from: a statement's tick.now in PostgreSQL, the @now parameter
// in SQLite. Each fragment is therefore in two constants, before and after
// that instant, and a driver's constant is
//
//	GrantStateBeforeClock + clock + GrantStateAfterClock
//
// (likewise GrantLive…), a constant still: built by the compiler, not per
// statement.
//
// A grant's creator is revoked when the token that made it is, or, for an
// OIDC reviewer's grant (created_by is their principal), when an admin
// ended their sessions at or after it was made.
const (
	// GrantStateBeforeClock and GrantStateAfterClock make a grant's
	// airlock.GrantState; the table is aliased g.
	GrantStateBeforeClock = `CASE
	WHEN g.revoked_at IS NOT NULL THEN 'revoked'
	WHEN EXISTS (SELECT 1 FROM tokens t WHERE t.id = g.created_by AND t.revoked_at IS NOT NULL)
		OR EXISTS (SELECT 1 FROM reviewer_profiles p WHERE p.principal = g.created_by AND p.ended_at >= g.created_at) THEN 'creator_revoked'
	WHEN g.instance_id <> '' AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = g.instance_id AND i.deleted_at IS NULL) THEN 'instance_deleted'
	WHEN g.uses_left = 0 THEN 'used_up'
	WHEN g.expires_at <= `
	GrantStateAfterClock = ` THEN 'expired'
	ELSE 'live' END`

	// GrantLiveBeforeClock and GrantLiveAfterClock make a condition that
	// holds when grant g is live: its state is 'live', written out so the
	// conditions on g's own columns come first.
	GrantLiveBeforeClock = `g.revoked_at IS NULL AND g.expires_at > `
	GrantLiveAfterClock  = ` AND (g.uses_left IS NULL OR g.uses_left > 0)
	AND NOT EXISTS (SELECT 1 FROM tokens t WHERE t.id = g.created_by AND t.revoked_at IS NOT NULL)
	AND NOT EXISTS (SELECT 1 FROM reviewer_profiles p WHERE p.principal = g.created_by AND p.ended_at >= g.created_at)
	AND (g.instance_id = '' OR EXISTS (SELECT 1 FROM instances i WHERE i.id = g.instance_id AND i.deleted_at IS NULL))`
)

// GrantSQL are the statements of store.Grants. A grant is read as its
// id, tool, match_kind, arguments_fingerprint, expression, instance_id,
// agent_id, uses, uses_left, validity, created_at, expires_at,
// created_by, created_by_principal, request_id, revoked_at, revoked_by
// and state (GrantStateBeforeClock), judged at @now.
type GrantSQL struct {
	// Create stores grant @id (@tool, @kind, @args, @expr, @instance,
	// @agent, @uses, @validity, @by, @principal, @request), created at
	// @now and expiring @lifetime later, if its instance is live or it
	// has none (else no row), and returns its instant.
	Create string
	// Grant selects grant @id.
	Grant string
	// List selects up to @limit grants of tool @tool (any when ''),
	// newest first; Live, those of them that are live.
	List, Live string
	// Revoke is the compare-and-set of a revocation: grant @id, unless
	// revoked, is revoked at @now by @actor; it returns its instance_id
	// and the instant, or no row.
	Revoke string
}

func (c *Core) scanGrant(row Row) (airlock.Grant, error) {
	var (
		g           airlock.Grant
		uses, left  sql.NullInt64
		revoked     NullTime
		kind, state string
	)
	if err := row.Scan(&g.ID, &g.Tool, &kind, &g.Match.ArgumentsFingerprint, &g.Match.Expression, &g.InstanceID, &g.AgentID,
		&uses, &left, c.d.Duration(&g.Validity), c.d.Time(&g.CreatedAt), c.d.Time(&g.ExpiresAt), &g.CreatedBy, &g.CreatedByPrincipal,
		&g.RequestID, c.d.NullTime(&revoked), &g.RevokedBy, &state); err != nil {
		return airlock.Grant{}, err
	}
	g.Match.Kind, g.State, g.RevokedAt = airlock.GrantMatchKind(kind), airlock.GrantState(state), revoked.Ptr()
	if uses.Valid {
		g.Uses = new(int(uses.Int64))
	}
	if left.Valid {
		g.UsesLeft = new(int(left.Int64))
	}
	return g, nil
}

// CreateGrant stores a new grant, if its instance (when it is scoped to
// one) is live, with its grant.created event.
func (c *Core) CreateGrant(ctx context.Context, p store.NewGrantParams) (airlock.Grant, error) {
	if err := p.Validate(); err != nil {
		return airlock.Grant{}, err
	}
	q := &c.q.Grants
	g := p.Grant
	var out airlock.Grant
	err := c.d.Write(ctx, func(tx Tx) error {
		var at time.Time
		err := tx.QueryRow(q.Create, Args{{"id", g.ID}, {"tool", g.Tool}, {"kind", string(g.Match.Kind)},
			{"args", g.Match.ArgumentsFingerprint}, {"expr", g.Match.Expression}, {"instance", g.InstanceID}, {"agent", g.AgentID},
			{"uses", Value(g.Uses)}, {"validity", g.Validity}, {"lifetime", p.Lifetime}, {"by", g.CreatedBy},
			{"principal", g.CreatedByPrincipal}, {"request", g.RequestID}}).Scan(c.d.Time(&at))
		switch {
		case noRows(err):
			return airlock.NotFound("instance", g.InstanceID)
		case err != nil:
			return err
		}
		if err := tx.Event(airlock.Event{Type: airlock.EventGrantCreated, At: at, Actor: g.CreatedBy,
			InstanceID: g.InstanceID, RequestID: g.RequestID, Subject: g.ID}); err != nil {
			return err
		}
		out, err = c.scanGrant(tx.QueryRow(q.Grant, Args{{"id", g.ID}}))
		return err
	})
	if err != nil {
		return airlock.Grant{}, c.d.Translate(err, "grant", g.ID)
	}
	return out, nil
}

// GetGrant reads a grant with its state.
func (c *Core) GetGrant(ctx context.Context, id string) (airlock.Grant, error) {
	g, err := c.scanGrant(c.d.QueryRow(ctx, c.q.Grants.Grant, Args{{"id", id}}))
	return g, c.d.Translate(err, "grant", id)
}

// ListGrants lists grants, newest first.
func (c *Core) ListGrants(ctx context.Context, f store.GrantFilter) ([]airlock.Grant, error) {
	q := c.q.Grants.List
	if f.Live {
		q = c.q.Grants.Live
	}
	out, err := all(ctx, c.d, c.scanGrant, q, Args{{"tool", f.Tool}, {"limit", store.RequestFilter{Limit: f.Limit}.PageSize()}})
	return out, c.d.Translate(err, "grants", "list")
}

// RevokeGrant ends a grant with a compare-and-set on revoked_at IS NULL,
// so a second revocation keeps the first time and appends no event.
func (c *Core) RevokeGrant(ctx context.Context, id, actor string) (airlock.Grant, error) {
	q := &c.q.Grants
	var out airlock.Grant
	err := c.d.Write(ctx, func(tx Tx) error {
		var (
			at       time.Time
			instance string
		)
		err := tx.QueryRow(q.Revoke, Args{{"id", id}, {"actor", actor}}).Scan(&instance, c.d.Time(&at))
		switch {
		case err == nil:
			if err := tx.Event(airlock.Event{Type: airlock.EventGrantRevoked, At: at, Actor: actor, InstanceID: instance, Subject: id}); err != nil {
				return err
			}
		case !noRows(err):
			return err
		}
		out, err = c.scanGrant(tx.QueryRow(q.Grant, Args{{"id", id}}))
		return err
	})
	if err != nil {
		return airlock.Grant{}, c.d.Translate(err, "grant", id)
	}
	return out, nil
}
