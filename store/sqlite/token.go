package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
)

const tokenCols = `id, name, role, scopes, principal, hash, created_at, created_by, revoked_at`

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

// tokenArgs binds a token's columns. CreatedAt defaults to the store's now
// and Principal to the token's own ID, as airlock.Token documents.
func tokenArgs(t airlock.Token, now time.Time) ([]any, error) {
	scopes := t.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	js, err := json.Marshal(scopes)
	if err != nil {
		return nil, err
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	if t.Principal == "" {
		t.Principal = t.ID
	}
	return []any{
		sql.Named("id", t.ID), sql.Named("name", t.Name), sql.Named("role", t.Role),
		sql.Named("scopes", string(js)), sql.Named("principal", t.Principal), sql.Named("hash", t.Hash),
		sql.Named("created_at", micros(t.CreatedAt)), sql.Named("created_by", t.CreatedBy),
	}, nil
}

// CreateToken stores a new token.
func (s *Store) CreateToken(ctx context.Context, t airlock.Token) error {
	return s.putToken(ctx, t, `INSERT INTO tokens (id, name, role, scopes, principal, hash, created_at, created_by)
VALUES (@id, @name, @role, @scopes, @principal, @hash, @created_at, @created_by)`, false)
}

// PutToken stores t under its ID; when the ID exists it replaces the name,
// role, scopes, principal and hash and clears any revocation, keeping the
// original creation time. It is how the bootstrap admin token given by
// --admin-token is (re)installed at every start.
func (s *Store) PutToken(ctx context.Context, t airlock.Token) error {
	return s.putToken(ctx, t, `INSERT INTO tokens (id, name, role, scopes, principal, hash, created_at, created_by)
VALUES (@id, @name, @role, @scopes, @principal, @hash, @created_at, @created_by)
ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role, scopes = excluded.scopes,
	principal = excluded.principal, hash = excluded.hash, revoked_at = NULL`, true)
}

func (s *Store) putToken(ctx context.Context, t airlock.Token, query string, replace bool) error {
	if err := t.Validate(); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		args, err := tokenArgs(t, now)
		if err != nil {
			return err
		}
		if replace {
			// Inbox sessions of a secret this put replaces, or of a revoked
			// token it brings back, end: they were over, and stay so.
			if _, err := tx.ExecContext(ctx, `DELETE FROM web_sessions WHERE token_id = ?1
	AND (token_hash <> ?2 OR EXISTS (SELECT 1 FROM tokens WHERE id = ?1 AND revoked_at IS NOT NULL))`, t.ID, t.Hash); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventTokenCreated, Actor: t.CreatedBy, TokenID: t.ID})
	})
	if err != nil {
		return translate(err, "token", t.ID)
	}
	if replace {
		// An existing token's hash, role or revocation may have changed.
		return s.bumpTokenStamp()
	}
	return nil
}

// TokenByHash finds a token, revoked or not, by its secret's hash; the
// caller decides what a revoked token may do.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (airlock.Token, error) {
	t, err := scanToken(s.read.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	return t, translate(err, "token", "with that secret")
}

// GetToken reads a token by ID.
func (s *Store) GetToken(ctx context.Context, id string) (airlock.Token, error) {
	t, err := scanToken(s.read.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
	return t, translate(err, "token", id)
}

// ListTokens lists every token, newest first.
func (s *Store) ListTokens(ctx context.Context) ([]airlock.Token, error) {
	out, err := queryAll(ctx, s.read, scanToken, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at DESC, seq DESC`)
	return out, translate(err, "tokens", "list")
}

// RevokeToken marks a token revoked with a compare-and-set on
// revoked_at IS NULL, so a second revocation keeps the first time and
// appends no event.
func (s *Store) RevokeToken(ctx context.Context, id, actor string) (airlock.Token, error) {
	var out airlock.Token
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		t, err := scanToken(tx.QueryRowContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING `+tokenCols,
			micros(now), id))
		if err == nil {
			out = t
			return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventTokenRevoked, Actor: actor, TokenID: id})
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		out, err = scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
		return err
	})
	if err != nil {
		return airlock.Token{}, translate(err, "token", id)
	}
	// Bumped on every call, a first revocation or a repeat: a caller that
	// retries a revocation whose answer it lost moves the stamp again.
	if err := s.bumpTokenStamp(); err != nil {
		return airlock.Token{}, err
	}
	return out, nil
}
