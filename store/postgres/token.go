package postgres

import (
	"github.com/airlockhq/airlock/store/sqlcore"
)

const tokenCols = `t.id, t.name, t.role, t.scopes, t.principal, t.hash, t.created_at, t.created_by, t.revoked_at`

// insertTokenSQL stores a token, dated tick.now unless @created_at is set.
const insertTokenSQL = tickCTE + `INSERT INTO tokens AS t (id, name, role, scopes, principal, hash, created_at, created_by)
SELECT @id::text, @name::text, @role::text, @scopes::text[], @principal::text, @hash::bytea,
	coalesce(@created_at::timestamptz, tick.now), @created_by::text
FROM tick
`

var tokenSQL = sqlcore.TokenSQL{
	Create: insertTokenSQL + `RETURNING (SELECT now FROM tick)`,
	Put: insertTokenSQL + `ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role,
	scopes = excluded.scopes, principal = excluded.principal, hash = excluded.hash, revoked_at = NULL
RETURNING (SELECT now FROM tick)`,
	EndReplacedSessions: `DELETE FROM web_sessions ws USING tokens t
WHERE ws.token_id = @id AND t.id = @id AND (ws.token_hash <> @hash OR t.revoked_at IS NOT NULL)`,
	ByHash: `SELECT ` + tokenCols + ` FROM tokens t WHERE t.hash = @hash`,
	ByID:   `SELECT ` + tokenCols + ` FROM tokens t WHERE t.id = @id`,
	List:   `SELECT ` + tokenCols + ` FROM tokens t ORDER BY t.created_at DESC, t.seq DESC`,
	Revoke: tickCTE + `UPDATE tokens t SET revoked_at = tick.now FROM tick
WHERE t.id = @id AND t.revoked_at IS NULL RETURNING ` + tokenCols + `, tick.now`,
}
