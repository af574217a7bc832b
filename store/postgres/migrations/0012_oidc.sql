-- 0012: OIDC sign-in to the inbox (docs/teams.md).
--
-- A web session may belong to a reviewer the identity provider signed in,
-- with no token: token_id is '' and token_hash empty, and email and
-- groups (newline-joined; no group name holds a newline) come from the
-- provider's claims. Every statement may run again (IF NOT EXISTS): a
-- test re-applies the migrations after 0011 to check that one.
ALTER TABLE web_sessions ADD COLUMN IF NOT EXISTS email text NOT NULL DEFAULT '';
ALTER TABLE web_sessions ADD COLUMN IF NOT EXISTS groups text NOT NULL DEFAULT '';

-- The reviewer directory: each OIDC reviewer as of their last sign-in,
-- by which every surface names them (decided_by_name) once their session
-- is over. ended_at is when an admin last ended the principal's sessions
-- (revocation): mail stops until a sign-in after it.
CREATE TABLE IF NOT EXISTS reviewer_profiles (
    principal    text        PRIMARY KEY,
    name         text        NOT NULL,
    email        text        NOT NULL,
    groups       text        NOT NULL,
    signed_in_at timestamptz NOT NULL,
    ended_at     timestamptz
);

-- Sign-ins in progress: one row from the redirect to the identity
-- provider to its callback, on any replica. Only hashes are kept: of the
-- state parameter, and of the browser's cookie secret the PKCE verifier
-- and nonce derive from.
CREATE TABLE IF NOT EXISTS oidc_logins (
    state_hash   bytea       PRIMARY KEY,
    binding_hash bytea       NOT NULL,
    next         text        NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS oidc_logins_expires ON oidc_logins (expires_at);
