-- 0010: the inbox's sign-ins (docs/inbox.md, "Sessions"), kept here so
-- that every replica serves every reviewer, and a sign-out or revocation
-- on one ends the session on all of them.
--
-- id_hash is the SHA-256 of the session ID the cookie carries: the ID
-- itself is never stored. token_hash is the hash of the token signed in
-- with, so a token whose secret was replaced (PutToken) no longer serves
-- the session. idle_expires_at is last_seen_at + idle, never past
-- expires_at (the absolute end): a session is live while the store's now
-- is before idle_expires_at, one column to judge and to sweep by.

CREATE TABLE web_sessions (
    id_hash         bytea       PRIMARY KEY,
    token_id        text        NOT NULL,
    token_hash      bytea       NOT NULL,
    principal       text        NOT NULL,
    name            text        NOT NULL,
    csrf            text        NOT NULL,
    created_at      timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL,
    idle            interval    NOT NULL,
    idle_expires_at timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    CHECK (idle_expires_at <= expires_at)
);

-- Revocation ends a token's sessions; an admin may end a principal's.
CREATE INDEX web_sessions_token ON web_sessions (token_id);
CREATE INDEX web_sessions_principal ON web_sessions (principal);
-- The sweep of sessions that are over.
CREATE INDEX web_sessions_idle_expires ON web_sessions (idle_expires_at);
