-- 0002: MCP agent sessions and their instructions, agents' default MCP
-- instances, the work board, and command proposals' observed state and
-- outcome (docs/mcp.md). The same schema as the SQLite driver's 0002.

-- Sessions are instances of kind 'session'. Closing one sets deleted_at
-- (as deleting an instance does) and keeps the row readable.
ALTER TABLE instances
    ADD COLUMN kind text NOT NULL DEFAULT 'adapter' CHECK (kind IN ('adapter', 'session')),
    ADD COLUMN last_seen_at timestamptz,
    -- true for an agent's default MCP instance, which owns its MCP requests
    -- made without a sessionId. It is an adapter, never a session.
    ADD COLUMN mcp_default boolean NOT NULL DEFAULT false,
    ADD CHECK (NOT mcp_default OR kind = 'adapter'),
    -- Only sessions heartbeat.
    ADD CHECK (last_seen_at IS NULL OR kind = 'session');

-- At most one live default MCP instance per owner: the index, not Go,
-- decides a race between two first uses (INSERT … ON CONFLICT DO NOTHING).
CREATE UNIQUE INDEX instances_mcp_default ON instances (owner_id)
    WHERE mcp_default AND deleted_at IS NULL;
-- Sessions are listed open and closed, newest first: of one owner, or all.
CREATE INDEX instances_sessions ON instances (owner_id, seq) WHERE kind = 'session';
CREATE INDEX instances_all_sessions ON instances (seq) WHERE kind = 'session';

-- A command proposal's target as the provider saw it when requested, and
-- the command's outcome, recorded in the transaction of the approval.
ALTER TABLE requests
    ADD COLUMN command_observed text,
    ADD COLUMN command_status text
        CHECK (command_status IS NULL OR (command_status = 'applied' AND state = 'approved')),
    ADD COLUMN command_detail text NOT NULL DEFAULT '',
    ADD COLUMN command_applied_at timestamptz,
    ADD CHECK ((command_status IS NULL) = (command_applied_at IS NULL)),
    ADD CHECK (command_status IS NULL OR command_method IS NOT NULL);

-- A command's outcome is written once.
CREATE FUNCTION requests_command_result_is_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.command_status IS NOT NULL AND (
           NEW.command_status IS DISTINCT FROM OLD.command_status
        OR NEW.command_detail IS DISTINCT FROM OLD.command_detail
        OR NEW.command_applied_at IS DISTINCT FROM OLD.command_applied_at) THEN
        RAISE EXCEPTION 'a command result is final' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER requests_command_result_is_final
BEFORE UPDATE OF command_status, command_detail, command_applied_at ON requests
FOR EACH ROW EXECUTE FUNCTION requests_command_result_is_final();

-- Each decision on a request linked to a session, stored until that
-- session's next heartbeat takes it. One per request: a request becomes
-- terminal once.
CREATE TABLE instructions (
    seq          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           text        NOT NULL UNIQUE,
    session_id   text        NOT NULL REFERENCES instances (id),
    request_id   text        NOT NULL UNIQUE REFERENCES requests (id),
    status       text        NOT NULL CHECK (status IN ('approved', 'denied', 'expired')),
    note         text        NOT NULL DEFAULT '',
    answer       text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    delivered_at timestamptz
);

-- A heartbeat takes its session's undelivered instructions.
CREATE INDEX instructions_undelivered ON instructions (session_id, seq) WHERE delivered_at IS NULL;

-- Delivery is the only change an instruction ever sees, and only once.
CREATE FUNCTION instructions_delivered_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.delivered_at IS NOT NULL
        OR NEW.id IS DISTINCT FROM OLD.id OR NEW.session_id IS DISTINCT FROM OLD.session_id
        OR NEW.request_id IS DISTINCT FROM OLD.request_id OR NEW.status IS DISTINCT FROM OLD.status
        OR NEW.note IS DISTINCT FROM OLD.note OR NEW.answer IS DISTINCT FROM OLD.answer
        OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'an instruction is delivered once and never changed' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER instructions_delivered_once
BEFORE UPDATE ON instructions
FOR EACH ROW EXECUTE FUNCTION instructions_delivered_once();

-- The work board.
CREATE TABLE board_columns (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    column_key text        NOT NULL UNIQUE,
    name       text        NOT NULL,
    position   integer     NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE work_items (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         text        NOT NULL UNIQUE,
    title      text        NOT NULL,
    column_key text        NOT NULL REFERENCES board_columns (column_key),
    version    integer     NOT NULL CHECK (version >= 1),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE INDEX work_items_column ON work_items (column_key, seq);

-- Board events name the column or item they changed.
ALTER TABLE events ADD COLUMN subject text NOT NULL DEFAULT '';
