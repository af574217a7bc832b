-- 0013: OIDC sign-in to the inbox (docs/teams.md).
--
-- A web session may belong to a reviewer the identity provider signed in,
-- with no token: token_id is '' and token_hash empty, and email and
-- groups (newline-joined; no group name holds a newline) come from the
-- provider's claims.
ALTER TABLE web_sessions ADD COLUMN email TEXT NOT NULL DEFAULT '';
ALTER TABLE web_sessions ADD COLUMN groups TEXT NOT NULL DEFAULT '';

-- The reviewer directory: each OIDC reviewer as of their last sign-in,
-- by which every surface names them (decided_by_name) once their session
-- is over. ended_at is when an admin last ended the principal's sessions
-- (revocation): mail stops until a sign-in after it. Times are in
-- microseconds.
CREATE TABLE reviewer_profiles (
    principal    TEXT    PRIMARY KEY,
    name         TEXT    NOT NULL,
    email        TEXT    NOT NULL,
    groups       TEXT    NOT NULL,
    signed_in_at INTEGER NOT NULL,
    ended_at     INTEGER
) STRICT, WITHOUT ROWID;

-- Sign-ins in progress: one row from the redirect to the identity
-- provider to its callback, on any process. Only hashes are kept: of the
-- state parameter, and of the browser's cookie secret the PKCE verifier
-- and nonce derive from.
CREATE TABLE oidc_logins (
    state_hash   BLOB    PRIMARY KEY,
    binding_hash BLOB    NOT NULL,
    next         TEXT    NOT NULL,
    expires_at   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX oidc_logins_expires ON oidc_logins (expires_at);
