package sqlstore

import "strings"

// A grant's state is one rule (docs/policy.md, "Grants") both dialects
// write in the same SQL, but for where the instant it is judged at comes
// from: a statement's tick.now in PostgreSQL, the @now parameter in
// SQLite. The fragments below hold it as clockMark, which GrantStateSQL
// and GrantLiveSQL replace with the driver's expression, once, when the
// driver's package is initialised.
//
// A grant's creator is revoked when the token that made it is, or, for an
// OIDC reviewer's grant (created_by is their principal), when an admin
// ended their sessions at or after it was made.
const (
	clockMark = "{now}"

	grantStateSQL = `CASE
	WHEN g.revoked_at IS NOT NULL THEN 'revoked'
	WHEN EXISTS (SELECT 1 FROM tokens t WHERE t.id = g.created_by AND t.revoked_at IS NOT NULL)
		OR EXISTS (SELECT 1 FROM reviewer_profiles p WHERE p.principal = g.created_by AND p.ended_at >= g.created_at) THEN 'creator_revoked'
	WHEN g.instance_id <> '' AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = g.instance_id AND i.deleted_at IS NULL) THEN 'instance_deleted'
	WHEN g.uses_left = 0 THEN 'used_up'
	WHEN g.expires_at <= {now} THEN 'expired'
	ELSE 'live' END`

	grantLiveSQL = `g.revoked_at IS NULL AND g.expires_at > {now} AND (g.uses_left IS NULL OR g.uses_left > 0)
	AND NOT EXISTS (SELECT 1 FROM tokens t WHERE t.id = g.created_by AND t.revoked_at IS NOT NULL)
	AND NOT EXISTS (SELECT 1 FROM reviewer_profiles p WHERE p.principal = g.created_by AND p.ended_at >= g.created_at)
	AND (g.instance_id = '' OR EXISTS (SELECT 1 FROM instances i WHERE i.id = g.instance_id AND i.deleted_at IS NULL))`
)

// GrantStateSQL is a grant's airlock.GrantState, judged at the SQL
// expression now; the table is aliased g.
func GrantStateSQL(now string) string { return strings.ReplaceAll(grantStateSQL, clockMark, now) }

// GrantLiveSQL holds when grant g is live at the SQL expression now:
// GrantStateSQL is 'live', written out so the conditions on g's own
// columns come first.
func GrantLiveSQL(now string) string { return strings.ReplaceAll(grantLiveSQL, clockMark, now) }
