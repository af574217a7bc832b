-- 0030: reviewers' passkeys and the WebAuthn ceremonies in progress
-- (docs/phone.md, "Passkeys").
--
-- A passkey is a WebAuthn credential of a reviewer principal (and of the
-- token it was registered through, '' for an OIDC reviewer): its ID (the
-- authenticator's), its COSE public key, the signature counter of its
-- last use, the transports the browser reported (joined by commas), the
-- authenticator's AAGUID (empty when none) and the backup flags of the
-- registration.
CREATE TABLE IF NOT EXISTS passkeys (
    id              bytea       PRIMARY KEY,
    principal       text        NOT NULL,
    token_id        text        NOT NULL,
    name            text        NOT NULL,
    public_key      bytea       NOT NULL,
    sign_count      bigint      NOT NULL,
    transports      text        NOT NULL,
    aaguid          bytea       NOT NULL,
    backup_eligible boolean     NOT NULL,
    backup_state    boolean     NOT NULL,
    created_at      timestamptz NOT NULL,
    last_used_at    timestamptz
);
CREATE INDEX IF NOT EXISTS passkeys_principal ON passkeys (principal, created_at);

-- Ceremonies in progress: one row from the options a browser is given to
-- its answer, on any replica, by the hash of the challenge.
CREATE TABLE IF NOT EXISTS passkey_ceremonies (
    challenge_hash bytea       PRIMARY KEY,
    kind           text        NOT NULL,
    principal      text        NOT NULL,
    state          bytea       NOT NULL,
    expires_at     timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS passkey_ceremonies_expires ON passkey_ceremonies (expires_at);

-- Decisions and quorum votes signed with a passkey: the assertion, kept
-- with what it signed besides the request's ID and arguments (the status,
-- valid_for as submitted, the note), one per request and principal.
CREATE TABLE IF NOT EXISTS passkey_decisions (
    request_id         text        NOT NULL,
    principal          text        NOT NULL,
    actor              text        NOT NULL,
    state              text        NOT NULL,
    valid_for          text        NOT NULL,
    note               text        NOT NULL,
    credential_id      bytea       NOT NULL,
    authenticator_data bytea       NOT NULL,
    client_data_json   bytea       NOT NULL,
    signature          bytea       NOT NULL,
    at                 timestamptz NOT NULL,
    PRIMARY KEY (request_id, principal)
);
