package sqlcore

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// TokenSQL are the statements of store.Tokens. A token is read as its
// id, name, role, scopes, principal, hash, created_at, created_by and
// revoked_at.
type TokenSQL struct {
	// Create stores token @id (@name, @role, @scopes, @principal, @hash,
	// @created_by), created at @created_at or, when NULL, @now, and
	// returns its instant.
	Create string
	// Put is Create that, when @id exists, replaces its name, role,
	// scopes, principal and hash and clears its revocation, keeping its
	// creation time.
	Put string
	// EndReplacedSessions deletes the web sessions of token @id signed
	// in with another hash than @hash, or all of them when the token is
	// revoked: those Put is about to replace or bring back.
	EndReplacedSessions string
	// ByHash selects the token whose hash is @hash.
	ByHash string
	// ByID selects token @id.
	ByID string
	// List selects every token, newest first.
	List string
	// Revoke is the compare-and-set of a revocation: token @id, unless
	// revoked, is revoked at @now; it returns the token and the instant,
	// or no row.
	Revoke string
}

// tokenScan scans a token's columns; token converts what it scanned.
type tokenScan struct {
	t       airlock.Token
	role    string
	revoked NullTime
}

func (c *Core) tokenDest(s *tokenScan) []any {
	return []any{&s.t.ID, &s.t.Name, &s.role, c.d.Strings(&s.t.Scopes), &s.t.Principal, &s.t.Hash,
		c.d.Time(&s.t.CreatedAt), &s.t.CreatedBy, c.d.NullTime(&s.revoked)}
}

func (s *tokenScan) token() airlock.Token {
	t := s.t
	t.Role, t.RevokedAt = airlock.Role(s.role), s.revoked.Ptr()
	if len(t.Scopes) == 0 {
		t.Scopes = nil
	}
	return t
}

// scanToken reads a token's columns, then into extra any the statement
// yields after them.
func (c *Core) scanToken(row Row, extra ...any) (airlock.Token, error) {
	var s tokenScan
	if err := row.Scan(append(c.tokenDest(&s), extra...)...); err != nil {
		return airlock.Token{}, err
	}
	return s.token(), nil
}

// CreateToken stores a new token.
func (c *Core) CreateToken(ctx context.Context, t airlock.Token) error {
	return c.putToken(ctx, t, false)
}

// PutToken stores t under its ID; when the ID exists it replaces the name,
// role, scopes, principal and hash and clears any revocation, keeping the
// original creation time. It is how the bootstrap admin token given by
// --admin-token is (re)installed at every start.
//
// Replicas starting together put the same token at once: puts of one ID
// take turns (Tx.Lock), so the second finds the first's row and updates
// it, rather than racing it to the unique index on the hash.
func (c *Core) PutToken(ctx context.Context, t airlock.Token) error {
	return c.putToken(ctx, t, true)
}

func (c *Core) putToken(ctx context.Context, t airlock.Token, replace bool) error {
	if err := t.Validate(); err != nil {
		return err
	}
	q := &c.q.Tokens
	scopes := t.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	if t.Principal == "" {
		t.Principal = t.ID // as airlock.Token documents
	}
	var created *time.Time
	if !t.CreatedAt.IsZero() {
		created = new(t.CreatedAt.UTC().Truncate(time.Microsecond))
	}
	args := Args{{"id", t.ID}, {"name", t.Name}, {"role", string(t.Role)}, {"scopes", scopes}, {"principal", t.Principal},
		{"hash", t.Hash}, {"created_at", created}, {"created_by", t.CreatedBy}}
	stmt := q.Create
	if replace {
		stmt = q.Put
	}
	err := c.d.Write(ctx, func(tx Tx) error {
		if replace {
			if err := tx.Lock("token/" + t.ID); err != nil {
				return err
			}
			// Inbox sessions of a secret this put replaces, or of a revoked
			// token it brings back, end: they were over, and stay so.
			if _, err := tx.Exec(q.EndReplacedSessions, Args{{"id", t.ID}, {"hash", t.Hash}}); err != nil {
				return err
			}
		}
		var at time.Time
		if err := tx.QueryRow(stmt, args).Scan(c.d.Time(&at)); err != nil {
			return err
		}
		if replace {
			// The token's secret, role or revocation may have changed.
			tx.Changed(t.ID)
		}
		return tx.Event(airlock.Event{Type: airlock.EventTokenCreated, At: at, Actor: t.CreatedBy, TokenID: t.ID})
	})
	return c.d.Translate(err, "token", t.ID)
}

// TokenByHash finds a token, revoked or not, by its secret's hash; the
// caller decides what a revoked token may do.
func (c *Core) TokenByHash(ctx context.Context, hash []byte) (airlock.Token, error) {
	t, err := c.scanToken(c.d.QueryRow(ctx, c.q.Tokens.ByHash, Args{{"hash", hash}}))
	return t, c.d.Translate(err, "token", "with that secret")
}

// GetToken reads a token by ID.
func (c *Core) GetToken(ctx context.Context, id string) (airlock.Token, error) {
	t, err := c.scanToken(c.d.QueryRow(ctx, c.q.Tokens.ByID, Args{{"id", id}}))
	return t, c.d.Translate(err, "token", id)
}

// ListTokens lists every token, newest first.
func (c *Core) ListTokens(ctx context.Context) ([]airlock.Token, error) {
	out, err := all(ctx, c.d, func(row Row) (airlock.Token, error) { return c.scanToken(row) }, c.q.Tokens.List, nil)
	return out, c.d.Translate(err, "tokens", "list")
}

// RevokeToken marks a token revoked with a compare-and-set on
// revoked_at IS NULL, so a second revocation keeps the first time and
// appends no event. Either way the token is announced as changed: a
// caller that retries a revocation whose answer it lost announces it
// again.
func (c *Core) RevokeToken(ctx context.Context, id, actor string) (airlock.Token, error) {
	q := &c.q.Tokens
	var out airlock.Token
	err := c.d.Write(ctx, func(tx Tx) error {
		var at time.Time
		t, err := c.scanToken(tx.QueryRow(q.Revoke, Args{{"id", id}}), c.d.Time(&at))
		switch {
		case err == nil:
			out = t
			tx.Changed(id)
			return tx.Event(airlock.Event{Type: airlock.EventTokenRevoked, At: at, Actor: actor, TokenID: id})
		case !noRows(err):
			return err
		}
		out, err = c.scanToken(tx.QueryRow(q.ByID, Args{{"id", id}}))
		if err == nil {
			tx.Changed(id)
		}
		return err
	})
	if err != nil {
		return airlock.Token{}, c.d.Translate(err, "token", id)
	}
	return out, nil
}
