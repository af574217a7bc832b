package sqlite

import (
	"strings"

	"github.com/airlockhq/airlock/store/sqlcore"
)

// The inbox's sign-ins (docs/inbox.md, "Sessions").

const webSessionCols = `ws.id_hash, ws.token_id, ws.principal, ws.name, ws.csrf, ws.created_at, ws.last_seen_at,
	ws.idle, ws.idle_expires_at, ws.expires_at, ws.email, ws.groups`

// webSessionReturning is webSessionCols for a RETURNING clause, which in
// SQLite names the table's columns without an alias.
var webSessionReturning = strings.ReplaceAll(webSessionCols, "ws.", "")

var webSessionSQL = sqlcore.WebSessionSQL{
	CreateForToken: `INSERT INTO web_sessions (id_hash, token_id, token_hash, principal, name, csrf,
	created_at, last_seen_at, idle, idle_expires_at, expires_at)
SELECT @hash, t.id, t.hash, t.principal, t.name, @csrf, @now, @now, @idle, @now + min(@idle, @max), @now + @max
FROM tokens t WHERE t.id = @token AND t.hash = @token_hash AND t.revoked_at IS NULL
RETURNING ` + webSessionReturning,
	CreateForReviewer: `INSERT INTO web_sessions (id_hash, token_id, token_hash, principal, name, csrf,
	created_at, last_seen_at, idle, idle_expires_at, expires_at, email, groups)
VALUES (@hash, '', X'', @principal, @name, @csrf, @now, @now, @idle, @now + min(@idle, @max), @now + @max, @email, @groups)
RETURNING ` + webSessionReturning,
	PutProfile: `INSERT INTO reviewer_profiles (principal, name, email, groups, signed_in_at)
VALUES (@principal, @name, @email, @groups, @now)
ON CONFLICT (principal) DO UPDATE SET name = excluded.name, email = excluded.email, groups = excluded.groups,
	signed_in_at = excluded.signed_in_at`,
	ByID: `SELECT coalesce(t.id, ''), coalesce(t.name, ''), coalesce(t.role, ''), coalesce(t.scopes, '[]'),
	coalesce(t.principal, ''), coalesce(t.hash, X''), coalesce(t.created_at, 0), coalesce(t.created_by, ''), t.revoked_at,
	` + webSessionCols + `, ws.token_hash
FROM web_sessions ws LEFT JOIN tokens t ON t.id = ws.token_id
WHERE ws.id_hash = @hash AND ws.idle_expires_at > @now`,
	Touch: `UPDATE web_sessions
SET last_seen_at = @now, idle_expires_at = min(@now + idle, expires_at)
WHERE id_hash = @hash AND idle_expires_at > @now AND last_seen_at <= @now - @every
RETURNING ` + webSessionReturning,
	Live:              `SELECT ` + webSessionCols + ` FROM web_sessions ws WHERE ws.id_hash = @hash AND ws.idle_expires_at > @now`,
	Delete:            `DELETE FROM web_sessions WHERE id_hash = @hash`,
	DeleteOfToken:     `DELETE FROM web_sessions WHERE token_id = @token AND (@principal = '' OR principal = @principal)`,
	DeleteOfPrincipal: `DELETE FROM web_sessions WHERE principal = @principal`,
	EndProfile:        `UPDATE reviewer_profiles SET ended_at = @now WHERE principal = @principal RETURNING @now`,
	Sweep: `DELETE FROM web_sessions WHERE id_hash IN (
	SELECT id_hash FROM web_sessions WHERE idle_expires_at <= @now ORDER BY idle_expires_at LIMIT @limit)`,

	SweepLogins: `DELETE FROM oidc_logins WHERE state_hash IN (
	SELECT state_hash FROM oidc_logins WHERE expires_at <= @now ORDER BY expires_at LIMIT 100)`,
	PutLogin: `INSERT INTO oidc_logins (state_hash, binding_hash, next, expires_at)
SELECT @state, @binding, @next, @now + @ttl WHERE (SELECT count(*) FROM oidc_logins WHERE expires_at > @now) < @max`,
	TakeLogin: `DELETE FROM oidc_logins WHERE state_hash = @state AND expires_at > @now
RETURNING state_hash, binding_hash, next, expires_at`,
	Profiles: `SELECT principal, name, email, groups, signed_in_at, ended_at FROM reviewer_profiles ORDER BY principal`,
}
