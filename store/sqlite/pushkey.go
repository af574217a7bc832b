package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// The VAPID key pair Web Push is signed with (docs/phone.md).

var pushKeySQL = sqlcore.PushKeySQL{
	Insert: `INSERT INTO vapid_keys (id, private_key, public_key, created_at) VALUES (1, @private, @public, @now)
ON CONFLICT DO NOTHING RETURNING created_at`,
	Select: `SELECT private_key, public_key, created_at FROM vapid_keys WHERE id = 1`,
}
