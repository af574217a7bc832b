package sqlite

import (
	"github.com/airlockhq/airlock/store/sqlcore"
)

const tokenCols = `id, name, role, scopes, principal, hash, created_at, created_by, revoked_at`

// insertTokenSQL stores a token, dated @now unless @created_at is set.
const insertTokenSQL = `INSERT INTO tokens (id, name, role, scopes, principal, hash, created_at, created_by)
VALUES (@id, @name, @role, @scopes, @principal, @hash, coalesce(@created_at, @now), @created_by)`

var tokenSQL = sqlcore.TokenSQL{
	Create: insertTokenSQL + ` RETURNING @now`,
	Put: insertTokenSQL + `
ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role, scopes = excluded.scopes,
	principal = excluded.principal, hash = excluded.hash, revoked_at = NULL
RETURNING @now`,
	EndReplacedSessions: `DELETE FROM web_sessions WHERE token_id = @id
	AND (token_hash <> @hash OR EXISTS (SELECT 1 FROM tokens WHERE id = @id AND revoked_at IS NOT NULL))`,
	ByHash: `SELECT ` + tokenCols + ` FROM tokens WHERE hash = @hash`,
	ByID:   `SELECT ` + tokenCols + ` FROM tokens WHERE id = @id`,
	List:   `SELECT ` + tokenCols + ` FROM tokens ORDER BY created_at DESC, seq DESC`,
	Revoke: `UPDATE tokens SET revoked_at = @now WHERE id = @id AND revoked_at IS NULL RETURNING ` + tokenCols + `, @now`,
}
