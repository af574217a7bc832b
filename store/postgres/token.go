package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/jackc/pgx/v5"
)

const tokenCols = `t.id, t.name, t.role, t.scopes, t.principal, t.hash, t.created_at, t.created_by, t.revoked_at`

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

// insertTokenSQL stores a token; CreatedAt defaults to the store's now and
// Principal to the token's own ID, as airlock.Token documents. It returns
// the statement's instant, which dates the audit event.
const insertTokenSQL = tickCTE + `INSERT INTO tokens AS t (id, name, role, scopes, principal, hash, created_at, created_by)
SELECT @id::text, @name::text, @role::text, @scopes::text[], coalesce(nullif(@principal::text, ''), @id::text), @hash::bytea,
	coalesce(@created_at::timestamptz, tick.now), @created_by::text
FROM tick
`

// CreateToken stores a new token.
func (s *Store) CreateToken(ctx context.Context, t airlock.Token) error {
	return s.putToken(ctx, t, insertTokenSQL+`RETURNING (SELECT now FROM tick)`, false)
}

// PutToken stores t under its ID; when the ID exists it replaces the name,
// role, scopes, principal and hash and clears any revocation, keeping the
// original creation time. It is how the bootstrap admin token given by
// --admin-token is (re)installed at every start.
//
// Replicas starting together put the same token at once. ON CONFLICT (id)
// arbitrates only the ID: two inserts racing past it would both reach the
// unique index on the hash, and one would fail with a unique violation.
// So puts of one ID first take an advisory lock on it, and the second
// finds the first's row and updates it.
func (s *Store) PutToken(ctx context.Context, t airlock.Token) error {
	return s.putToken(ctx, t, insertTokenSQL+`ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role,
	scopes = excluded.scopes, principal = excluded.principal, hash = excluded.hash, revoked_at = NULL
RETURNING (SELECT now FROM tick)`, true)
}

func (s *Store) putToken(ctx context.Context, t airlock.Token, query string, lockID bool) error {
	if err := t.Validate(); err != nil {
		return err
	}
	scopes := t.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	var createdAt any
	if !t.CreatedAt.IsZero() {
		createdAt = t.CreatedAt.UTC().Truncate(time.Microsecond)
	}
	err := s.write(ctx, func(ctx context.Context, tx *tx) error {
		if lockID {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(@class, @key)`,
				named{"class": advisoryClass, "key": lockKey(s.schema, "token/"+t.ID)}); err != nil {
				return err
			}
		}
		if lockID {
			// Inbox sessions of a secret this put replaces, or of a revoked
			// token it brings back, end: they were over, and stay so.
			if _, err := tx.Exec(ctx, `DELETE FROM web_sessions ws USING tokens t
WHERE ws.token_id = @id AND t.id = @id AND (ws.token_hash <> @hash OR t.revoked_at IS NOT NULL)`,
				named{"id": t.ID, "hash": t.Hash}); err != nil {
				return err
			}
		}
		var at time.Time
		if err := tx.QueryRow(ctx, query, named{
			"now": s.now(), "id": t.ID, "name": t.Name, "role": string(t.Role), "scopes": scopes,
			"principal": t.Principal, "hash": t.Hash, "created_at": createdAt, "created_by": t.CreatedBy,
		}).Scan(&at); err != nil {
			return err
		}
		tx.event(airlock.Event{Type: airlock.EventTokenCreated, At: at.UTC(), Actor: t.CreatedBy, TokenID: t.ID})
		if lockID {
			// PutToken may have replaced the token's secret: its waiters
			// on every replica re-check it.
			tx.changed = append(tx.changed, t.ID)
		}
		return nil
	})
	return translate(err, "token", t.ID)
}

// TokenByHash finds a token, revoked or not, by its secret's hash; the
// caller decides what a revoked token may do.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (airlock.Token, error) {
	t, err := scanToken(s.queryRow(ctx, `SELECT `+tokenCols+` FROM tokens t WHERE t.hash = @hash`, named{"hash": hash}))
	return t, translate(err, "token", "with that secret")
}

// GetToken reads a token by ID.
func (s *Store) GetToken(ctx context.Context, id string) (airlock.Token, error) {
	t, err := scanToken(s.queryRow(ctx, `SELECT `+tokenCols+` FROM tokens t WHERE t.id = @id`, named{"id": id}))
	return t, translate(err, "token", id)
}

// ListTokens lists every token, newest first.
func (s *Store) ListTokens(ctx context.Context) ([]airlock.Token, error) {
	out, err := queryAll(ctx, checked{s}, func(row pgx.Row) (airlock.Token, error) { return scanToken(row) },
		`SELECT `+tokenCols+` FROM tokens t ORDER BY t.created_at DESC, t.seq DESC`)
	return out, translate(err, "tokens", "list")
}

// RevokeToken marks a token revoked with a compare-and-set on
// revoked_at IS NULL, so a second revocation keeps the first time and
// appends no event.
func (s *Store) RevokeToken(ctx context.Context, id, actor string) (airlock.Token, error) {
	var out airlock.Token
	err := s.write(ctx, func(ctx context.Context, tx *tx) error {
		var at time.Time
		t, err := scanToken(tx.QueryRow(ctx, tickCTE+`UPDATE tokens t SET revoked_at = tick.now FROM tick
WHERE t.id = @id AND t.revoked_at IS NULL RETURNING `+tokenCols+`, tick.now`,
			named{"now": s.now(), "id": id}), &at)
		if err == nil {
			out = t
			tx.event(airlock.Event{Type: airlock.EventTokenRevoked, At: at.UTC(), Actor: actor, TokenID: id})
			tx.changed = append(tx.changed, id) // every replica's waiters with this token re-check it
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		out, err = scanToken(tx.QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens t WHERE t.id = @id`, named{"id": id}))
		return err
	})
	if err != nil {
		return airlock.Token{}, translate(err, "token", id)
	}
	return out, nil
}
