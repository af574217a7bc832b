-- The single use of approval tokens (docs/tokens.md; sqlcore.TokenUseSQL).

-- name: TokenUses.Insert
-- Of replicas inserting at once, the primary key lets one row in; the
-- others wait for it and insert nothing.
{{tick}}
INSERT INTO approval_token_uses (request_id, jti, consumed_at, consumed_by)
SELECT r.id, @jti::text, tick.now, @actor::text FROM requests r, tick WHERE r.id = @request_id::text
ON CONFLICT (request_id) DO NOTHING
RETURNING consumed_at, (SELECT q.instance_id FROM requests q WHERE q.id = @request_id::text)

-- name: TokenUses.Get
SELECT u.jti, u.consumed_at, u.consumed_by FROM approval_token_uses u WHERE u.request_id = @request_id::text
