package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/airlockhq/airlock"
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

// scanToken reads one row of tokenCols (the command's effect, command.go;
// WebSessionByID).
func scanToken(sc scanner) (airlock.Token, error) {
	var (
		t       airlock.Token
		scopes  string
		created int64
		revoked sql.NullInt64
	)
	if err := sc.Scan(&t.ID, &t.Name, &t.Role, &scopes, &t.Principal, &t.Hash, &created, &t.CreatedBy, &revoked); err != nil {
		return airlock.Token{}, err
	}
	if err := json.Unmarshal([]byte(scopes), &t.Scopes); err != nil {
		return airlock.Token{}, fmt.Errorf("token %s: stored scopes: %w", t.ID, err)
	}
	if len(t.Scopes) == 0 {
		t.Scopes = nil
	}
	t.CreatedAt, t.RevokedAt = fromMicros(created), nullMicros(revoked)
	return t, nil
}
