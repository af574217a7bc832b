-- 0024: the VAPID key pair Web Push is signed with (docs/phone.md).
--
-- One pair for every replica: the table holds one row (id 1). Push
-- subscriptions are endpoints of kind 'push' (0006's table).
CREATE TABLE IF NOT EXISTS vapid_keys (
    id          integer     PRIMARY KEY CHECK (id = 1),
    private_key bytea       NOT NULL,
    public_key  bytea       NOT NULL,
    created_at  timestamptz NOT NULL
);
