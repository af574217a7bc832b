-- 0017: the keys approval tokens are signed with (docs/tokens.md).
--
-- One set for every replica. At most one key is active (retired_at
-- NULL): the unique index on the constant expression holds one row of
-- them. A retired key is published until published_until, when the last
-- token it may have signed expires.
CREATE TABLE IF NOT EXISTS signing_keys (
    id              text        PRIMARY KEY,
    seed            bytea       NOT NULL,
    created_at      timestamptz NOT NULL,
    retired_at      timestamptz,
    published_until timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS signing_keys_one_active ON signing_keys ((retired_at IS NULL)) WHERE retired_at IS NULL;
