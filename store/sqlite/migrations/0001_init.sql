-- 0001: instances, approval requests, the audit log and tokens.
--
-- Times are INTEGER unix microseconds (UTC), the precision both drivers
-- share. JSON documents an agent submitted (arguments, context, a command's
-- input, metadata) are TEXT holding the exact submitted bytes: reviewers must
-- see, and adapters must run, what was sent, not a re-encoding of it.

CREATE TABLE instances (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE,
    owner_id   TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    metadata   TEXT,
    created_at INTEGER NOT NULL,
    -- Deleting an instance marks it, so that its requests (and their audit
    -- trail) stay readable.
    deleted_at INTEGER
) STRICT;

CREATE INDEX instances_owner ON instances (owner_id, seq) WHERE deleted_at IS NULL;

CREATE TABLE requests (
    -- seq orders requests by creation and backs cursor pagination.
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    instance_id     TEXT    NOT NULL REFERENCES instances (id),
    owner_id        TEXT    NOT NULL,
    state           TEXT    NOT NULL
        CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
    kind            TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    arguments       TEXT,
    timeout         TEXT    NOT NULL,
    agent_reasoning TEXT    NOT NULL,
    context         TEXT,
    created_at      INTEGER NOT NULL,
    deadline_at     INTEGER NOT NULL,

    -- The decision, set once the request is terminal.
    decided_at      INTEGER,
    decided_by      TEXT,
    note            TEXT    NOT NULL DEFAULT '',
    answer          TEXT    NOT NULL DEFAULT '',
    expires_at      INTEGER,

    -- The one execution attempt, set once claimed.
    claimed_at      INTEGER,
    claimed_by      TEXT,
    exec_status     TEXT,
    finished_at     INTEGER,
    exec_detail     TEXT    NOT NULL DEFAULT '',

    -- NULL when the caller sent no key: such a request is never a replay.
    idempotency_key TEXT,
    fingerprint     TEXT    NOT NULL,

    -- MCP fields (docs/mcp.md); empty for REST tool calls.
    title           TEXT    NOT NULL DEFAULT '',
    description     TEXT    NOT NULL DEFAULT '',
    target_type     TEXT    NOT NULL DEFAULT '',
    target_id       TEXT    NOT NULL DEFAULT '',
    session_id      TEXT    NOT NULL DEFAULT '',
    proposal_mode   TEXT,
    command_method  TEXT,
    command_input   TEXT,
    question        TEXT,

    -- The lifecycle's shape, held by the database as a last line of defence
    -- against a bug in a query: a decision exactly when terminal, expires_at
    -- exactly when approved, an execution only on an approval.
    CHECK ((state = 'pending') = (decided_at IS NULL)),
    CHECK ((state = 'approved') = (expires_at IS NOT NULL)),
    CHECK (claimed_at IS NULL OR state = 'approved'),
    CHECK ((claimed_at IS NULL) = (exec_status IS NULL))
) STRICT;

-- Creation is idempotent per owner and key; the index, not Go, decides a
-- race between two identical creates.
CREATE UNIQUE INDEX requests_idempotency ON requests (owner_id, idempotency_key);
-- The expiry scheduler (ExpireDue, NextDeadline) and every deadline check.
CREATE INDEX requests_due ON requests (state, deadline_at);
-- Deleting an instance cancels its pending requests; reads count them.
CREATE INDEX requests_instance ON requests (instance_id, state);
-- An agent lists its own requests, newest first.
CREATE INDEX requests_owner ON requests (owner_id, seq);

-- A terminal request never changes state and its decision is never
-- rewritten (docs/protocol.md L2). The queries already guarantee it with their
-- WHERE state = 'pending'; this makes a future mistake fail loudly instead.
CREATE TRIGGER requests_terminal_is_final
BEFORE UPDATE OF state, decided_at, decided_by, note, answer, expires_at ON requests
WHEN OLD.state <> 'pending' AND (
       NEW.state IS NOT OLD.state
    OR NEW.decided_at IS NOT OLD.decided_at
    OR NEW.decided_by IS NOT OLD.decided_by
    OR NEW.note IS NOT OLD.note
    OR NEW.answer IS NOT OLD.answer
    OR NEW.expires_at IS NOT OLD.expires_at)
BEGIN
    SELECT RAISE(ABORT, 'a terminal request is final');
END;

CREATE TABLE events (
    -- AUTOINCREMENT: IDs are never reused, so Last-Event-ID resume is exact.
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    type        TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    actor       TEXT    NOT NULL,
    request_id  TEXT    NOT NULL DEFAULT '',
    instance_id TEXT    NOT NULL DEFAULT '',
    token_id    TEXT    NOT NULL DEFAULT '',
    state       TEXT    NOT NULL DEFAULT ''
) STRICT;

-- The audit log is append-only (docs/protocol.md S5).
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

CREATE TABLE tokens (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL,
    role       TEXT    NOT NULL,
    scopes     TEXT    NOT NULL DEFAULT '[]', -- JSON array of strings
    principal  TEXT    NOT NULL,
    hash       BLOB    NOT NULL UNIQUE,       -- SHA-256 of the secret
    created_at INTEGER NOT NULL,
    created_by TEXT    NOT NULL,
    revoked_at INTEGER
) STRICT;
