-- The inbox's sign-ins (docs/inbox.md, "Sessions"; sqlcore.WebSessionSQL).

-- name: webSessionCols
ws.id_hash, ws.token_id, ws.principal, ws.name, ws.csrf, ws.created_at, ws.last_seen_at,
	ws.idle, ws.idle_expires_at, ws.expires_at, ws.email, ws.groups

-- name: webSessionTokenCols
-- webSessionTokenCols are tokenCols for the LEFT JOIN of ByID: an OIDC
-- reviewer's session has no token, and reads zero values.
coalesce(t.id, ''), coalesce(t.name, ''), coalesce(t.role, ''), coalesce(t.scopes, '{}'),
	coalesce(t.principal, ''), coalesce(t.hash, ''::bytea), coalesce(t.created_at, 'epoch'), coalesce(t.created_by, ''), t.revoked_at

-- name: WebSessions.CreateForToken
-- The token's row is read FOR SHARE: a revocation committing meanwhile is
-- waited for, and then refuses the sign-in, rather than leaving a session
-- behind it.
{{tick}}
INSERT INTO web_sessions AS ws (id_hash, token_id, token_hash, principal, name, csrf,
	created_at, last_seen_at, idle, idle_expires_at, expires_at)
SELECT @hash::bytea, t.id, t.hash, t.principal, t.name, @csrf::text, tick.now, tick.now, @idle::interval,
	least(tick.now + @idle::interval, tick.now + @max::interval), tick.now + @max::interval
FROM tokens t, tick
WHERE t.id = @token AND t.hash = @token_hash AND t.revoked_at IS NULL
FOR SHARE OF t
RETURNING {{webSessionCols}}

-- name: WebSessions.CreateForReviewer
-- One statement stores the session and upserts the profile.
{{tick}}
, profile AS (
	INSERT INTO reviewer_profiles AS p (principal, name, email, groups, signed_in_at)
	SELECT @principal::text, @name::text, @email::text, @groups::text, tick.now FROM tick
	ON CONFLICT (principal) DO UPDATE SET name = excluded.name, email = excluded.email, groups = excluded.groups,
		signed_in_at = excluded.signed_in_at
)
INSERT INTO web_sessions AS ws (id_hash, token_id, token_hash, principal, name, csrf,
	created_at, last_seen_at, idle, idle_expires_at, expires_at, email, groups)
SELECT @hash::bytea, '', ''::bytea, @principal::text, @name::text, @csrf::text, tick.now, tick.now, @idle::interval,
	least(tick.now + @idle::interval, tick.now + @max::interval), tick.now + @max::interval, @email::text, @groups::text
FROM tick
RETURNING {{webSessionCols}}

-- name: WebSessions.ByID
{{tick}}
SELECT {{webSessionTokenCols}}, {{webSessionCols}}, ws.token_hash
FROM web_sessions ws LEFT JOIN tokens t ON t.id = ws.token_id, tick
WHERE ws.id_hash = @hash AND ws.idle_expires_at > tick.now

-- name: WebSessions.Touch
-- The UPDATE's conditions are re-checked on the row's newest version, so
-- a touch that waited for a sign-out's DELETE finds no row.
{{tick}}
UPDATE web_sessions ws
SET last_seen_at = tick.now, idle_expires_at = least(tick.now + ws.idle, ws.expires_at)
FROM tick
WHERE ws.id_hash = @hash AND ws.idle_expires_at > tick.now AND ws.last_seen_at <= tick.now - @every::interval
RETURNING {{webSessionCols}}

-- name: WebSessions.Live
{{tick}}
SELECT {{webSessionCols}} FROM web_sessions ws, tick
WHERE ws.id_hash = @hash AND ws.idle_expires_at > tick.now

-- name: WebSessions.Delete
DELETE FROM web_sessions WHERE id_hash = @hash

-- name: WebSessions.DeleteOfToken
DELETE FROM web_sessions WHERE token_id = @token AND (@principal::text = '' OR principal = @principal)

-- name: WebSessions.DeleteOfPrincipal
DELETE FROM web_sessions WHERE principal = @principal

-- name: WebSessions.EndProfile
{{tick}}
, ended AS (
	UPDATE reviewer_profiles p SET ended_at = tick.now FROM tick WHERE p.principal = @principal
)
SELECT now FROM tick

-- name: WebSessions.Sweep
-- Rows a touch or a sign-out holds are skipped, for a later sweep.
{{tick}}
DELETE FROM web_sessions WHERE id_hash IN (
	SELECT w.id_hash FROM web_sessions w, tick WHERE w.idle_expires_at <= tick.now
	ORDER BY w.idle_expires_at LIMIT @limit FOR UPDATE OF w SKIP LOCKED)

-- name: WebSessions.SweepLogins
{{tick}}
DELETE FROM oidc_logins WHERE state_hash IN (
	SELECT o.state_hash FROM oidc_logins o, tick WHERE o.expires_at <= tick.now
	ORDER BY o.expires_at LIMIT 100 FOR UPDATE OF o SKIP LOCKED)

-- name: WebSessions.PutLogin
{{tick}}
INSERT INTO oidc_logins (state_hash, binding_hash, next, expires_at)
SELECT @state::bytea, @binding::bytea, @next::text, tick.now + @ttl::interval FROM tick
WHERE (SELECT count(*) FROM oidc_logins o WHERE o.expires_at > tick.now) < @max::int

-- name: WebSessions.TakeLogin
{{tick}}
DELETE FROM oidc_logins o USING tick
WHERE o.state_hash = @state AND o.expires_at > tick.now
RETURNING o.state_hash, o.binding_hash, o.next, o.expires_at

-- name: WebSessions.Profiles
SELECT principal, name, email, groups, signed_in_at, ended_at FROM reviewer_profiles ORDER BY principal
