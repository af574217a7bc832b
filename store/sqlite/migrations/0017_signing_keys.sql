-- 0017: the keys approval tokens are signed with (docs/tokens.md).
--
-- One set for every process on the database. At most one key is active
-- (retired_at NULL): the unique index on the constant expression holds
-- one row of them. A retired key is published until published_until, when
-- the last token it may have signed expires. Times are in microseconds.
CREATE TABLE signing_keys (
    id              TEXT    PRIMARY KEY,
    seed            BLOB    NOT NULL,
    created_at      INTEGER NOT NULL,
    retired_at      INTEGER,
    published_until INTEGER
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys ((retired_at IS NULL)) WHERE retired_at IS NULL;
