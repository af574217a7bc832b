-- 0006: notifications (docs/notifications.md). Endpoints, the deliveries
-- the fan-out queues from the audit log, the one fan-out cursor, and the
-- reminders already sent.

CREATE TABLE endpoints (
    seq             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text        NOT NULL UNIQUE,
    kind            text        NOT NULL,
    url             text        NOT NULL,
    events          text[]      NOT NULL DEFAULT '{}', -- empty: all
    description     text        NOT NULL DEFAULT '',
    secret          text        NOT NULL,              -- kept to sign with, never shown again
    created_at      timestamptz NOT NULL,
    created_by      text        NOT NULL,
    after_event     bigint      NOT NULL,              -- receives events with ID > after_event
    failing_since   timestamptz,
    disabled_at     timestamptz,
    disabled_reason text        NOT NULL DEFAULT ''
);

CREATE TABLE deliveries (
    seq             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text        NOT NULL UNIQUE,
    endpoint_id     text        NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    event_id        bigint,                            -- NULL for a test
    message_id      text        NOT NULL,
    type            text        NOT NULL,
    request_id      text        NOT NULL DEFAULT '',
    payload         bytea       NOT NULL,
    state           text        NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        jsonb       NOT NULL DEFAULT '[]',
    created_at      timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    lease_holder    text        NOT NULL DEFAULT '',
    lease_until     timestamptz
);

-- One delivery per endpoint and event, however often the fan-out runs.
CREATE UNIQUE INDEX deliveries_event ON deliveries (endpoint_id, event_id);
CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_attempt_at, seq) WHERE state = 'pending';
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, seq);

-- The last event ID whose deliveries are queued; replicas move it by
-- compare-and-set. Events before this migration have no endpoint to go to.
CREATE TABLE fanout_cursor (
    id       integer PRIMARY KEY CHECK (id = 1),
    event_id bigint  NOT NULL
);
INSERT INTO fanout_cursor (id, event_id) SELECT 1, coalesce(max(id), 0) FROM events;

-- A request's reminder, recorded once: the primary key makes replicas
-- that find it due together record it once.
CREATE TABLE reminders (
    request_id text        PRIMARY KEY,
    at         timestamptz NOT NULL
);
