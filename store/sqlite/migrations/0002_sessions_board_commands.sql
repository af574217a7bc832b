-- 0002: MCP agent sessions and their instructions, agents' default MCP
-- instances, the work board, and command proposals' observed state and
-- outcome (docs/mcp.md).

-- Sessions are instances of kind 'session'. Closing one sets deleted_at
-- (as deleting an instance does) and keeps the row readable.
ALTER TABLE instances ADD COLUMN kind TEXT NOT NULL DEFAULT 'adapter'
    CHECK (kind IN ('adapter', 'session'));
ALTER TABLE instances ADD COLUMN last_seen_at INTEGER;
-- 1 for an agent's default MCP instance, which owns its MCP requests made
-- without a sessionId. At most one live one per owner: the index, not Go,
-- decides a race between two first uses.
ALTER TABLE instances ADD COLUMN mcp_default INTEGER NOT NULL DEFAULT 0
    CHECK (mcp_default IN (0, 1));
CREATE UNIQUE INDEX instances_mcp_default ON instances (owner_id)
    WHERE mcp_default = 1 AND deleted_at IS NULL;
-- Sessions are listed open and closed, newest first.
CREATE INDEX instances_sessions ON instances (owner_id, seq) WHERE kind = 'session';

-- A command proposal's target as the provider saw it when requested, and
-- the command's outcome, recorded in the transaction of the approval.
ALTER TABLE requests ADD COLUMN command_observed TEXT;
ALTER TABLE requests ADD COLUMN command_status TEXT
    CHECK (command_status IS NULL OR (command_status = 'applied' AND state = 'approved'));
ALTER TABLE requests ADD COLUMN command_detail TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN command_applied_at INTEGER;

-- A command's outcome is written once.
CREATE TRIGGER requests_command_result_is_final
BEFORE UPDATE OF command_status, command_detail, command_applied_at ON requests
WHEN OLD.command_status IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'a command result is final');
END;

-- Each decision on a request linked to a session, stored until that
-- session's next heartbeat takes it. One per request: a request becomes
-- terminal once.
CREATE TABLE instructions (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT    NOT NULL UNIQUE,
    session_id   TEXT    NOT NULL REFERENCES instances (id),
    request_id   TEXT    NOT NULL UNIQUE REFERENCES requests (id),
    status       TEXT    NOT NULL CHECK (status IN ('approved', 'denied', 'expired')),
    note         TEXT    NOT NULL DEFAULT '',
    answer       TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    delivered_at INTEGER
) STRICT;

-- A heartbeat takes its session's undelivered instructions.
CREATE INDEX instructions_undelivered ON instructions (session_id, seq) WHERE delivered_at IS NULL;

-- Delivery is the only change an instruction ever sees, and only once.
CREATE TRIGGER instructions_delivered_once
BEFORE UPDATE ON instructions
WHEN OLD.delivered_at IS NOT NULL
  OR NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id OR NEW.request_id IS NOT OLD.request_id
  OR NEW.status IS NOT OLD.status OR NEW.note IS NOT OLD.note OR NEW.answer IS NOT OLD.answer
BEGIN
    SELECT RAISE(ABORT, 'an instruction is delivered once and never changed');
END;

-- The work board.
CREATE TABLE board_columns (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    column_key TEXT    NOT NULL UNIQUE,
    name       TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE work_items (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE,
    title      TEXT    NOT NULL,
    column_key TEXT    NOT NULL REFERENCES board_columns (column_key),
    version    INTEGER NOT NULL CHECK (version >= 1),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE INDEX work_items_column ON work_items (column_key, seq);

-- Board events name the column or item they changed.
ALTER TABLE events ADD COLUMN subject TEXT NOT NULL DEFAULT '';
