-- Tokens (sqlcore.TokenSQL).

-- name: tokenCols
t.id, t.name, t.role, t.scopes, t.principal, t.hash, t.created_at, t.created_by, t.revoked_at

-- name: insertToken
-- insertToken stores a token, dated tick.now unless @created_at is set.
{{tick}}
INSERT INTO tokens AS t (id, name, role, scopes, principal, hash, created_at, created_by)
SELECT @id::text, @name::text, @role::text, @scopes::text[], @principal::text, @hash::bytea,
	coalesce(@created_at::timestamptz, tick.now), @created_by::text
FROM tick

-- name: Tokens.Create
{{insertToken}}
RETURNING (SELECT now FROM tick)

-- name: Tokens.Put
{{insertToken}}
ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role,
	scopes = excluded.scopes, principal = excluded.principal, hash = excluded.hash, revoked_at = NULL
RETURNING (SELECT now FROM tick)

-- name: Tokens.EndReplacedSessions
DELETE FROM web_sessions ws USING tokens t
WHERE ws.token_id = @id AND t.id = @id AND (ws.token_hash <> @hash OR t.revoked_at IS NOT NULL)

-- name: Tokens.ByHash
SELECT {{tokenCols}} FROM tokens t WHERE t.hash = @hash

-- name: Tokens.ByID
SELECT {{tokenCols}} FROM tokens t WHERE t.id = @id

-- name: Tokens.List
SELECT {{tokenCols}} FROM tokens t ORDER BY t.created_at DESC, t.seq DESC

-- name: Tokens.Revoke
{{tick}}
UPDATE tokens t SET revoked_at = tick.now FROM tick
WHERE t.id = @id AND t.revoked_at IS NULL RETURNING {{tokenCols}}, tick.now
