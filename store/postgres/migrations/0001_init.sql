-- 0001: instances, approval requests, the audit log and tokens.
--
-- Times are timestamptz, which keeps microseconds: the precision both
-- drivers share. JSON documents an agent submitted (arguments, context, a
-- command's input, metadata) are text holding the exact submitted bytes, not
-- jsonb (which re-encodes numbers, reorders keys and drops duplicates):
-- reviewers must see, and adapters must run, what was sent.
--
-- Every object is created unqualified, in the schema the connection's
-- search_path names, so one database can hold several isolated Airlocks
-- (tests use one schema each).

CREATE TABLE instances (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         text        NOT NULL UNIQUE,
    owner_id   text        NOT NULL,
    name       text        NOT NULL,
    metadata   text,
    created_at timestamptz NOT NULL,
    -- Deleting an instance marks it, so that its requests (and their audit
    -- trail) stay readable.
    deleted_at timestamptz
);

CREATE INDEX instances_owner ON instances (owner_id, seq) WHERE deleted_at IS NULL;

CREATE TABLE requests (
    -- seq orders requests by creation and backs cursor pagination.
    seq             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text        NOT NULL UNIQUE,
    instance_id     text        NOT NULL REFERENCES instances (id),
    owner_id        text        NOT NULL,
    state           text        NOT NULL
        CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
    kind            text        NOT NULL,
    tool            text        NOT NULL,
    arguments       text,
    timeout         text        NOT NULL,
    agent_reasoning text        NOT NULL,
    context         text,
    created_at      timestamptz NOT NULL,
    deadline_at     timestamptz NOT NULL,

    -- The decision, set once the request is terminal.
    decided_at      timestamptz,
    decided_by      text,
    note            text        NOT NULL DEFAULT '',
    answer          text        NOT NULL DEFAULT '',
    expires_at      timestamptz,

    -- The one execution attempt, set once claimed.
    claimed_at      timestamptz,
    claimed_by      text,
    exec_status     text,
    finished_at     timestamptz,
    exec_detail     text        NOT NULL DEFAULT '',

    -- NULL when the caller sent no key: such a request is never a replay.
    idempotency_key text,
    fingerprint     text        NOT NULL,

    -- MCP fields (docs/mcp.md); empty for REST tool calls.
    title           text        NOT NULL DEFAULT '',
    description     text        NOT NULL DEFAULT '',
    target_type     text        NOT NULL DEFAULT '',
    target_id       text        NOT NULL DEFAULT '',
    session_id      text        NOT NULL DEFAULT '',
    proposal_mode   text,
    command_method  text,
    command_input   text,
    question        text,

    -- The lifecycle's shape, held by the database as a last line of defence
    -- against a bug in a query: a decision exactly when terminal, expires_at
    -- exactly when approved and after the decision, an execution only on an
    -- approval, and no outcome but expiry at or after the deadline.
    CHECK ((state = 'pending') = (decided_at IS NULL)),
    CHECK ((state = 'approved') = (expires_at IS NOT NULL)),
    CHECK (expires_at IS NULL OR expires_at > decided_at),
    CHECK (state IN ('pending', 'expired') OR decided_at < deadline_at),
    CHECK (claimed_at IS NULL OR state = 'approved'),
    CHECK ((claimed_at IS NULL) = (exec_status IS NULL))
);

-- Creation is idempotent per owner and key; the index, not Go, decides a
-- race between two identical creates (INSERT … ON CONFLICT DO NOTHING).
CREATE UNIQUE INDEX requests_idempotency ON requests (owner_id, idempotency_key);
-- The expiry scheduler (ExpireDue, NextDeadline, CountPending) reads only
-- pending rows, which stay few however long the history grows.
CREATE INDEX requests_due ON requests (deadline_at, seq) WHERE state = 'pending';
-- Deleting an instance cancels its pending requests; reads count them.
CREATE INDEX requests_instance ON requests (instance_id, state);
-- An agent lists its own requests, newest first.
CREATE INDEX requests_owner ON requests (owner_id, seq);
-- Reviewers list by state, newest first.
CREATE INDEX requests_state ON requests (state, seq);

-- A terminal request never changes state and its decision is never
-- rewritten (docs/protocol.md L2). The queries already guarantee it with their
-- WHERE state = 'pending'; this makes a future mistake fail loudly instead.
CREATE FUNCTION requests_terminal_is_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state <> 'pending' AND (
           NEW.state IS DISTINCT FROM OLD.state
        OR NEW.decided_at IS DISTINCT FROM OLD.decided_at
        OR NEW.decided_by IS DISTINCT FROM OLD.decided_by
        OR NEW.note IS DISTINCT FROM OLD.note
        OR NEW.answer IS DISTINCT FROM OLD.answer
        OR NEW.expires_at IS DISTINCT FROM OLD.expires_at) THEN
        RAISE EXCEPTION 'a terminal request is final' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER requests_terminal_is_final
BEFORE UPDATE OF state, decided_at, decided_by, note, answer, expires_at ON requests
FOR EACH ROW EXECUTE FUNCTION requests_terminal_is_final();

CREATE TABLE events (
    -- IDs come from a sequence, drawn before commit. Writers hold the
    -- schema's events advisory lock (shared) from their append to their
    -- commit, and readers list only IDs they have settled with it
    -- (postgres/event.go), so a stream resuming after ID n (SSE
    -- Last-Event-ID) never misses an event that commits later with a
    -- smaller ID.
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type        text        NOT NULL,
    at          timestamptz NOT NULL,
    actor       text        NOT NULL,
    request_id  text        NOT NULL DEFAULT '',
    instance_id text        NOT NULL DEFAULT '',
    token_id    text        NOT NULL DEFAULT '',
    state       text        NOT NULL DEFAULT ''
);

-- The audit log is append-only (docs/protocol.md S5).
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only' USING ERRCODE = 'integrity_constraint_violation';
END
$$;

CREATE TRIGGER events_append_only
BEFORE UPDATE OR DELETE ON events
FOR EACH ROW EXECUTE FUNCTION events_append_only();

CREATE TRIGGER events_no_truncate
BEFORE TRUNCATE ON events
FOR EACH STATEMENT EXECUTE FUNCTION events_append_only();

CREATE TABLE tokens (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         text        NOT NULL UNIQUE,
    name       text        NOT NULL,
    role       text        NOT NULL,
    scopes     text[]      NOT NULL DEFAULT '{}',
    principal  text        NOT NULL,
    hash       bytea       NOT NULL UNIQUE, -- SHA-256 of the secret
    created_at timestamptz NOT NULL,
    created_by text        NOT NULL,
    revoked_at timestamptz
);
