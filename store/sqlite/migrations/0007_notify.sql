-- 0007: notifications (docs/notifications.md). Endpoints, the deliveries
-- the fan-out queues from the audit log, the one fan-out cursor, and the
-- reminders already sent.

CREATE TABLE endpoints (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    kind            TEXT    NOT NULL,
    url             TEXT    NOT NULL,
    events          TEXT    NOT NULL DEFAULT '[]', -- JSON array; empty: all
    description     TEXT    NOT NULL DEFAULT '',
    secret          TEXT    NOT NULL,               -- kept to sign with, never shown again
    created_at      INTEGER NOT NULL,
    created_by      TEXT    NOT NULL,
    after_event     INTEGER NOT NULL,               -- receives events with ID > after_event
    failing_since   INTEGER,
    disabled_at     INTEGER,
    disabled_reason TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE deliveries (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    endpoint_id     TEXT    NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    event_id        INTEGER,                        -- NULL for a test
    message_id      TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    request_id      TEXT    NOT NULL DEFAULT '',
    payload         BLOB    NOT NULL,
    state           TEXT    NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        TEXT    NOT NULL DEFAULT '[]',  -- JSON array of attempts
    created_at      INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    lease_holder    TEXT    NOT NULL DEFAULT '',
    lease_until     INTEGER
) STRICT;

-- One delivery per endpoint and event, however often the fan-out runs.
CREATE UNIQUE INDEX deliveries_event ON deliveries (endpoint_id, event_id);
CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_attempt_at, seq) WHERE state = 'pending';
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, seq);

-- The last event ID whose deliveries are queued. Events before this
-- migration have no endpoint to go to.
CREATE TABLE fanout_cursor (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    event_id INTEGER NOT NULL
) STRICT;
INSERT INTO fanout_cursor (id, event_id) SELECT 1, coalesce(max(id), 0) FROM events;

-- A request's reminder, recorded once.
CREATE TABLE reminders (
    request_id TEXT    PRIMARY KEY,
    at         INTEGER NOT NULL
) STRICT;
