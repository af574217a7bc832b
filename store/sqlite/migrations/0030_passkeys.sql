-- 0030: reviewers' passkeys and the WebAuthn ceremonies in progress
-- (docs/phone.md, "Passkeys").
--
-- A passkey is a WebAuthn credential of a reviewer principal (and of the
-- token it was registered through, '' for an OIDC reviewer): its ID (the
-- authenticator's), its COSE public key, the signature counter of its
-- last use, the transports the browser reported (joined by commas), the
-- authenticator's AAGUID (empty when none) and the backup flags of the
-- registration. Times are in microseconds.
CREATE TABLE passkeys (
    id              BLOB    PRIMARY KEY,
    principal       TEXT    NOT NULL,
    token_id        TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    public_key      BLOB    NOT NULL,
    sign_count      INTEGER NOT NULL,
    transports      TEXT    NOT NULL,
    aaguid          BLOB    NOT NULL,
    backup_eligible INTEGER NOT NULL,
    backup_state    INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    last_used_at    INTEGER
) STRICT, WITHOUT ROWID;
CREATE INDEX passkeys_principal ON passkeys (principal, created_at);

-- Ceremonies in progress: one row from the options a browser is given to
-- its answer, on any process, by the hash of the challenge.
CREATE TABLE passkey_ceremonies (
    challenge_hash BLOB    PRIMARY KEY,
    kind           TEXT    NOT NULL,
    principal      TEXT    NOT NULL,
    state          BLOB    NOT NULL,
    expires_at     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX passkey_ceremonies_expires ON passkey_ceremonies (expires_at);

-- Decisions and quorum votes signed with a passkey: the assertion, kept
-- with what it signed besides the request's ID and arguments (the status,
-- valid_for as submitted, the note), one per request and principal.
CREATE TABLE passkey_decisions (
    request_id         TEXT    NOT NULL,
    principal          TEXT    NOT NULL,
    actor              TEXT    NOT NULL,
    state              TEXT    NOT NULL,
    valid_for          TEXT    NOT NULL,
    note               TEXT    NOT NULL,
    credential_id      BLOB    NOT NULL,
    authenticator_data BLOB    NOT NULL,
    client_data_json   BLOB    NOT NULL,
    signature          BLOB    NOT NULL,
    at                 INTEGER NOT NULL,
    PRIMARY KEY (request_id, principal)
) STRICT, WITHOUT ROWID;
