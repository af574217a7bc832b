-- The VAPID key pair Web Push is signed with (docs/phone.md; sqlcore.PushKeySQL).

-- name: PushKeys.Insert
-- Of replicas inserting at once, the one row's key lets one in; the
-- others wait for it and insert nothing.
{{tick}}
INSERT INTO vapid_keys (id, private_key, public_key, created_at)
SELECT 1, @private::bytea, @public::bytea, tick.now FROM tick
ON CONFLICT DO NOTHING
RETURNING created_at

-- name: PushKeys.Select
SELECT private_key, public_key, created_at FROM vapid_keys WHERE id = 1
