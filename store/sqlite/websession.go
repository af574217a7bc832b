package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// The inbox's sign-ins (docs/inbox.md, "Sessions").

const webSessionCols = `ws.id_hash, ws.token_id, ws.principal, ws.name, ws.csrf, ws.created_at, ws.last_seen_at,
	ws.idle, ws.idle_expires_at, ws.expires_at, ws.email, ws.groups`

// webSessionReturning is webSessionCols for a RETURNING clause, which in
// SQLite names the table's columns without an alias.
var webSessionReturning = strings.ReplaceAll(webSessionCols, "ws.", "")

// webSessionScan scans webSessionCols; finish converts what it scanned.
type webSessionScan struct {
	ws                                   airlock.WebSession
	created, seen, idle, idleEnd, maxEnd int64
	groups                               string
}

func (w *webSessionScan) dest() []any {
	return []any{&w.ws.IDHash, &w.ws.TokenID, &w.ws.Principal, &w.ws.Name, &w.ws.CSRF, &w.created, &w.seen,
		&w.idle, &w.idleEnd, &w.maxEnd, &w.ws.Email, &w.groups}
}

func (w *webSessionScan) finish() airlock.WebSession {
	ws := w.ws
	ws.CreatedAt, ws.LastSeenAt = fromMicros(w.created), fromMicros(w.seen)
	ws.Idle = time.Duration(w.idle) * time.Microsecond
	ws.IdleExpiresAt, ws.ExpiresAt = fromMicros(w.idleEnd), fromMicros(w.maxEnd)
	ws.Groups = airlock.SplitGroups(w.groups)
	return ws
}

func scanWebSession(sc scanner) (airlock.WebSession, error) {
	var w webSessionScan
	if err := sc.Scan(w.dest()...); err != nil {
		return airlock.WebSession{}, err
	}
	return w.finish(), nil
}

// withExtra scans a row's leading columns with a scan function of its own
// and its trailing ones into extra.
type withExtra struct {
	sc    scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.sc.Scan(append(dest, w.extra...)...) }

// CreateWebSession stores a session for a live token, in the write
// transaction that also checks the token: a revocation is either before
// it (refused) or after it (and ends the session).
func (s *Store) CreateWebSession(ctx context.Context, p store.NewWebSessionParams) (airlock.WebSession, error) {
	if err := p.Validate(); err != nil {
		return airlock.WebSession{}, err
	}
	if p.Reviewer != nil {
		return s.createReviewerSession(ctx, p)
	}
	var out airlock.WebSession
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		at, idle, max := micros(now), p.Idle.Microseconds(), p.Max.Microseconds()
		var err error
		out, err = scanWebSession(tx.QueryRowContext(ctx, `INSERT INTO web_sessions (id_hash, token_id, token_hash, principal, name, csrf,
	created_at, last_seen_at, idle, idle_expires_at, expires_at)
SELECT ?, t.id, t.hash, t.principal, t.name, ?, ?, ?, ?, ?, ?
FROM tokens t WHERE t.id = ? AND t.hash = ? AND t.revoked_at IS NULL
RETURNING `+webSessionReturning, airlock.WebSessionIDHash(p.ID), p.CSRF, at, at, idle, at+min(idle, max), at+max,
			p.Token.ID, p.Token.Hash))
		if errors.Is(err, sql.ErrNoRows) {
			return airlock.TokenRefused()
		}
		return err
	})
	return out, translate(err, "web session", "new")
}

// createReviewerSession stores an OIDC reviewer's session and upserts
// their profile in the reviewer directory, in one transaction.
func (s *Store) createReviewerSession(ctx context.Context, p store.NewWebSessionParams) (airlock.WebSession, error) {
	rv := p.Reviewer
	groups := airlock.JoinGroups(rv.Groups)
	var out airlock.WebSession
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		at, idle, max := micros(now), p.Idle.Microseconds(), p.Max.Microseconds()
		var err error
		out, err = scanWebSession(tx.QueryRowContext(ctx, `INSERT INTO web_sessions (id_hash, token_id, token_hash, principal, name, csrf,
	created_at, last_seen_at, idle, idle_expires_at, expires_at, email, groups)
VALUES (?, '', X'', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING `+webSessionReturning, airlock.WebSessionIDHash(p.ID), rv.Principal, rv.Name, p.CSRF, at, at, idle, at+min(idle, max), at+max,
			rv.Email, groups))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO reviewer_profiles (principal, name, email, groups, signed_in_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (principal) DO UPDATE SET name = excluded.name, email = excluded.email, groups = excluded.groups,
	signed_in_at = excluded.signed_in_at`, rv.Principal, rv.Name, rv.Email, groups, at)
		return err
	})
	return out, translate(err, "web session", "new")
}

// WebSessionByID reads a live session with its token: one read by the
// primary key, joined to the token by its primary key. An OIDC
// reviewer's session has no token (token_id ”), and the zero Token.
func (s *Store) WebSessionByID(ctx context.Context, id string) (airlock.WebSession, airlock.Token, error) {
	var (
		w         webSessionScan
		tokenHash []byte
	)
	q := `SELECT coalesce(t.id, ''), coalesce(t.name, ''), coalesce(t.role, ''), coalesce(t.scopes, '[]'),
	coalesce(t.principal, ''), coalesce(t.hash, X''), coalesce(t.created_at, 0), coalesce(t.created_by, ''), t.revoked_at,
	` + webSessionCols + `, ws.token_hash
FROM web_sessions ws LEFT JOIN tokens t ON t.id = ws.token_id
WHERE ws.id_hash = ? AND ws.idle_expires_at > ?`
	tok, err := scanToken(withExtra{s.read.QueryRowContext(ctx, q, airlock.WebSessionIDHash(id), micros(s.now())), append(w.dest(), &tokenHash)})
	if err != nil {
		return airlock.WebSession{}, airlock.Token{}, translate(err, "web session", "of this cookie")
	}
	return w.finish().WithToken(tok, tokenHash)
}

// TouchWebSession moves a live session's idle end, at most once per
// every. The one writer orders it with a sign-out: after a DELETE it
// finds no row.
func (s *Store) TouchWebSession(ctx context.Context, id string, every time.Duration) (airlock.WebSession, bool, error) {
	var (
		out     airlock.WebSession
		touched bool
	)
	hash := airlock.WebSessionIDHash(id)
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		at := micros(now)
		var err error
		out, err = scanWebSession(tx.QueryRowContext(ctx, `UPDATE web_sessions
SET last_seen_at = ?1, idle_expires_at = min(?1 + idle, expires_at)
WHERE id_hash = ?2 AND idle_expires_at > ?1 AND last_seen_at <= ?1 - ?3
RETURNING `+webSessionReturning, at, hash, every.Microseconds()))
		if err == nil {
			touched = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		out, err = scanWebSession(tx.QueryRowContext(ctx, `SELECT `+webSessionCols+` FROM web_sessions ws
WHERE ws.id_hash = ? AND ws.idle_expires_at > ?`, hash, at))
		return err
	})
	if err != nil {
		return airlock.WebSession{}, false, translate(err, "web session", "of this cookie")
	}
	return out, touched, nil
}

// DeleteWebSession ends one session.
func (s *Store) DeleteWebSession(ctx context.Context, id string) error {
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM web_sessions WHERE id_hash = ?`, airlock.WebSessionIDHash(id))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return sql.ErrNoRows
		}
		return nil
	})
	return translate(err, "web session", "of this cookie")
}

// DeleteWebSessions ends the sessions of a token or a principal.
func (s *Store) DeleteWebSessions(ctx context.Context, f store.WebSessionFilter) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	var n int64
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		q, args := `DELETE FROM web_sessions WHERE token_id = ?`, []any{f.TokenID}
		switch {
		case f.TokenID == "":
			q, args = `DELETE FROM web_sessions WHERE principal = ?`, []any{f.Principal}
		case f.Principal != "":
			q, args = q+` AND principal = ?`, append(args, f.Principal)
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		if f.TokenID != "" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE reviewer_profiles SET ended_at = ? WHERE principal = ?`, micros(now), f.Principal); err != nil {
			return err
		}
		if f.Actor == "" {
			return nil
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventReviewerSessionsEnded, Actor: f.Actor, Subject: f.Principal})
	})
	return int(n), translate(err, "web sessions", f.TokenID+f.Principal)
}

// SweepWebSessions deletes up to limit sessions that are over.
func (s *Store) SweepWebSessions(ctx context.Context, limit int) (int, error) {
	limit = store.Batch(limit)
	var n int64
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM web_sessions WHERE id_hash IN (
	SELECT id_hash FROM web_sessions WHERE idle_expires_at <= ? ORDER BY idle_expires_at LIMIT ?)`, micros(now), limit)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), translate(err, "web sessions", "sweep")
}

// PutOIDCLogin stores a sign-in in progress, sweeping a few that are over
// first, unless maxLive are in progress.
func (s *Store) PutOIDCLogin(ctx context.Context, l airlock.OIDCLogin, ttl time.Duration, maxLive int) error {
	if err := l.Validate(ttl); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		at := micros(now)
		if _, err := tx.ExecContext(ctx, `DELETE FROM oidc_logins WHERE state_hash IN (
	SELECT state_hash FROM oidc_logins WHERE expires_at <= ? ORDER BY expires_at LIMIT 100)`, at); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO oidc_logins (state_hash, binding_hash, next, expires_at)
SELECT ?, ?, ?, ? WHERE (SELECT count(*) FROM oidc_logins WHERE expires_at > ?) < ?`,
			l.StateHash, l.BindingHash, l.Next, at+ttl.Microseconds(), at, maxLive)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return airlock.Unavailable(nil, "too many sign-ins are in progress (%d); try again in a few minutes", maxLive)
		}
		return nil
	})
	return translate(err, "oidc login", "new")
}

// TakeOIDCLogin deletes and returns the live login of a state hash.
func (s *Store) TakeOIDCLogin(ctx context.Context, stateHash []byte) (airlock.OIDCLogin, error) {
	var (
		out     airlock.OIDCLogin
		expires int64
	)
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		err := tx.QueryRowContext(ctx, `DELETE FROM oidc_logins WHERE state_hash = ? AND expires_at > ?
RETURNING state_hash, binding_hash, next, expires_at`, stateHash, micros(now)).Scan(&out.StateHash, &out.BindingHash, &out.Next, &expires)
		return err
	})
	if err != nil {
		return airlock.OIDCLogin{}, translate(err, "oidc login", "of this state")
	}
	out.ExpiresAt = fromMicros(expires)
	return out, nil
}

// ListReviewerProfiles lists the reviewer directory by principal.
func (s *Store) ListReviewerProfiles(ctx context.Context) ([]airlock.ReviewerProfile, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT principal, name, email, groups, signed_in_at, ended_at FROM reviewer_profiles ORDER BY principal`)
	if err != nil {
		return nil, translate(err, "reviewer profiles", "")
	}
	defer rows.Close()
	var out []airlock.ReviewerProfile
	for rows.Next() {
		var (
			p      airlock.ReviewerProfile
			groups string
			at     int64
			ended  sql.NullInt64
		)
		if err := rows.Scan(&p.Principal, &p.Name, &p.Email, &groups, &at, &ended); err != nil {
			return nil, translate(err, "reviewer profiles", "")
		}
		p.Groups, p.SignedInAt, p.EndedAt = airlock.SplitGroups(groups), fromMicros(at), nullMicros(ended)
		out = append(out, p)
	}
	return out, translate(rows.Err(), "reviewer profiles", "")
}
