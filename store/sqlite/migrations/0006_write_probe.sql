-- 0006: where readiness tries a write once the store's writes have failed
-- because it could not write (Store.Ping, sqlite/health.go). The probe
-- inserts a row padded to the size of a modest request and deletes it in
-- the same transaction, which commits: it needs new pages and log frames
-- as any write does, and leaves nothing behind.

CREATE TABLE write_probe (
    id  INTEGER PRIMARY KEY,
    pad BLOB    NOT NULL
) STRICT;
