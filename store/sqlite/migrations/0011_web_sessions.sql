-- 0011: the inbox's sign-ins (docs/inbox.md, "Sessions"), kept here so
-- that every process on the file serves every reviewer, and a sign-out or
-- revocation ends the session at its next request.
--
-- id_hash is the SHA-256 of the session ID the cookie carries: the ID
-- itself is never stored. token_hash is the hash of the token signed in
-- with, so a token whose secret was replaced (PutToken) no longer serves
-- the session. Times and idle are in microseconds. idle_expires_at is
-- last_seen_at + idle, never past expires_at (the absolute end): a
-- session is live while the store's now is before idle_expires_at, one
-- column to judge and to sweep by.

CREATE TABLE web_sessions (
    id_hash         BLOB    PRIMARY KEY,
    token_id        TEXT    NOT NULL,
    token_hash      BLOB    NOT NULL,
    principal       TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    csrf            TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL,
    idle            INTEGER NOT NULL,
    idle_expires_at INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    CHECK (idle_expires_at <= expires_at)
) STRICT, WITHOUT ROWID;

-- Revocation ends a token's sessions; an admin may end a principal's.
CREATE INDEX web_sessions_token ON web_sessions (token_id);
CREATE INDEX web_sessions_principal ON web_sessions (principal);
-- The sweep of sessions that are over.
CREATE INDEX web_sessions_idle_expires ON web_sessions (idle_expires_at);
