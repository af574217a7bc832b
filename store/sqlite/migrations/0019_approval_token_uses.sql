-- 0019: the single use of approval tokens (docs/tokens.md, "Single use").
--
-- One row per request whose approval token a tool server consumed: the
-- primary key lets one consume of a request in, whatever the token's jti,
-- since a request is claimed, and so approved to run, once. consumed_by is
-- the consuming token's ID. Times are in microseconds.
CREATE TABLE approval_token_uses (
    request_id  TEXT    PRIMARY KEY REFERENCES requests (id),
    jti         TEXT    NOT NULL,
    consumed_at INTEGER NOT NULL,
    consumed_by TEXT    NOT NULL
) STRICT, WITHOUT ROWID;
