-- 0005: where readiness tries a write once the store's writes have failed
-- because the database could not serve them (Store.Ping,
-- postgres/health.go). The probe rewrites the one row: a write that needs
-- a transaction ID and a WAL flush at commit, which a standby, a read-only
-- database or one that cannot write its WAL refuses.

CREATE TABLE write_probe (
    id integer     PRIMARY KEY CHECK (id = 1),
    at timestamptz NOT NULL
);
