-- The keys approval tokens are signed with (docs/tokens.md; sqlcore.SigningKeySQL).

-- name: signingKeyCols
k.id, k.seed, k.created_at, k.retired_at, k.published_until, k.activates_at

-- name: SigningKeys.Insert
-- Of replicas inserting at once, the unique index on the active key lets
-- one row in; the others wait for it and insert nothing.
{{tick}}
INSERT INTO signing_keys (id, seed, created_at, activates_at)
SELECT @id::text, @seed::bytea, tick.now, tick.now + @delay::interval FROM tick
WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE retired_at IS NULL)
ON CONFLICT DO NOTHING
RETURNING created_at

-- name: SigningKeys.Active
SELECT {{signingKeyCols}} FROM signing_keys k WHERE k.retired_at IS NULL

-- name: SigningKeys.Retire
{{tick}}
UPDATE signing_keys k SET retired_at = tick.now + @delay::interval, published_until = tick.now + @delay::interval + @keep::interval
FROM tick WHERE k.retired_at IS NULL RETURNING k.id, tick.now

-- name: SigningKeys.Published
{{tick}}
SELECT {{signingKeyCols}} FROM signing_keys k, tick
WHERE k.retired_at IS NULL OR k.published_until > tick.now
ORDER BY k.retired_at IS NOT NULL, k.created_at DESC
