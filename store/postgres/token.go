package postgres

import (
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
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

// scanToken reads one row of tokenCols, then into extra (the command's
// locks, command.go; WebSessionByID).
func scanToken(row pgx.Row, extra ...any) (airlock.Token, error) {
	var (
		t       airlock.Token
		role    string
		revoked *time.Time
	)
	dest := []any{&t.ID, &t.Name, &role, &t.Scopes, &t.Principal, &t.Hash, &t.CreatedAt, &t.CreatedBy, &revoked}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return airlock.Token{}, err
	}
	t.Role, t.CreatedAt, t.RevokedAt = airlock.Role(role), t.CreatedAt.UTC(), utc(revoked)
	if len(t.Scopes) == 0 {
		t.Scopes = nil
	}
	return t, nil
}
