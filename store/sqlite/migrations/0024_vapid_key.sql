-- 0024: the VAPID key pair Web Push is signed with (docs/phone.md).
--
-- One pair for every process on the database: the table holds one row
-- (id 1). Push subscriptions are endpoints of kind 'push' (0007's
-- table). Times are in microseconds.
CREATE TABLE vapid_keys (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    private_key BLOB    NOT NULL,
    public_key  BLOB    NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
