-- 0019: the single use of approval tokens (docs/tokens.md, "Single use").
--
-- One row per request whose approval token a tool server consumed: the
-- primary key lets one consume of a request in, whatever the token's jti,
-- since a request is claimed, and so approved to run, once; of replicas
-- inserting at once, one row goes in and the others insert nothing.
-- consumed_by is the consuming token's ID.
CREATE TABLE IF NOT EXISTS approval_token_uses (
    request_id  text        PRIMARY KEY REFERENCES requests (id),
    jti         text        NOT NULL,
    consumed_at timestamptz NOT NULL,
    consumed_by text        NOT NULL
);
