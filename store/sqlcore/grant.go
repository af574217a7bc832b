package sqlcore

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
