package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/jackc/pgx/v5"
)

// The inbox's sign-ins (docs/inbox.md, "Sessions").

const webSessionCols = `ws.id_hash, ws.token_id, ws.principal, ws.name, ws.csrf, ws.created_at, ws.last_seen_at,
	(extract(epoch FROM ws.idle) * 1000000)::bigint, ws.idle_expires_at, ws.expires_at, ws.email, ws.groups`

// webSessionScan scans webSessionCols; finish converts what it scanned.
type webSessionScan struct {
	ws     airlock.WebSession
	idle   int64
	groups string
}

func (w *webSessionScan) dest() []any {
	return []any{&w.ws.IDHash, &w.ws.TokenID, &w.ws.Principal, &w.ws.Name, &w.ws.CSRF, &w.ws.CreatedAt, &w.ws.LastSeenAt,
		&w.idle, &w.ws.IdleExpiresAt, &w.ws.ExpiresAt, &w.ws.Email, &w.groups}
}

func (w *webSessionScan) finish() airlock.WebSession {
	ws := w.ws
	ws.Idle = time.Duration(w.idle) * time.Microsecond
	ws.CreatedAt, ws.LastSeenAt = ws.CreatedAt.UTC(), ws.LastSeenAt.UTC()
	ws.IdleExpiresAt, ws.ExpiresAt = ws.IdleExpiresAt.UTC(), ws.ExpiresAt.UTC()
	ws.Groups = airlock.SplitGroups(w.groups)
	return ws
}

func scanWebSession(row pgx.Row) (airlock.WebSession, error) {
	var w webSessionScan
	if err := row.Scan(w.dest()...); err != nil {
		return airlock.WebSession{}, err
	}
	return w.finish(), nil
}

// CreateWebSession stores a session for a live token. The token's row is
// read FOR SHARE: a revocation committing meanwhile is waited for, and
// then refuses the sign-in, rather than leaving a session behind it.
func (s *Store) CreateWebSession(ctx context.Context, p store.NewWebSessionParams) (airlock.WebSession, error) {
	if err := p.Validate(); err != nil {
		return airlock.WebSession{}, err
	}
	if p.Reviewer != nil {
		return s.createReviewerSession(ctx, p)
	}
	var out airlock.WebSession
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var err error
		out, err = scanWebSession(t.QueryRow(ctx, tickCTE+`INSERT INTO web_sessions AS ws (id_hash, token_id, token_hash, principal, name, csrf,
	created_at, last_seen_at, idle, idle_expires_at, expires_at)
SELECT @hash::bytea, t.id, t.hash, t.principal, t.name, @csrf::text, tick.now, tick.now, @idle::interval,
	least(tick.now + @idle::interval, tick.now + @max::interval), tick.now + @max::interval
FROM tokens t, tick
WHERE t.id = @token AND t.hash = @token_hash AND t.revoked_at IS NULL
FOR SHARE OF t
RETURNING `+webSessionCols, named{"now": s.now(), "hash": airlock.WebSessionIDHash(p.ID), "csrf": p.CSRF,
			"idle": p.Idle, "max": p.Max, "token": p.Token.ID, "token_hash": p.Token.Hash}))
		if errors.Is(err, pgx.ErrNoRows) {
			return airlock.TokenRefused()
		}
		return err
	})
	return out, translate(err, "web session", "new")
}

// createReviewerSession stores an OIDC reviewer's session and upserts
// their profile in the reviewer directory, in one statement.
func (s *Store) createReviewerSession(ctx context.Context, p store.NewWebSessionParams) (airlock.WebSession, error) {
	rv := p.Reviewer
	var out airlock.WebSession
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var err error
		out, err = scanWebSession(t.QueryRow(ctx, tickCTE+`, profile AS (
	INSERT INTO reviewer_profiles AS p (principal, name, email, groups, signed_in_at)
	SELECT @principal::text, @name::text, @email::text, @groups::text, tick.now FROM tick
	ON CONFLICT (principal) DO UPDATE SET name = excluded.name, email = excluded.email, groups = excluded.groups,
		signed_in_at = excluded.signed_in_at
)
INSERT INTO web_sessions AS ws (id_hash, token_id, token_hash, principal, name, csrf,
	created_at, last_seen_at, idle, idle_expires_at, expires_at, email, groups)
SELECT @hash::bytea, '', ''::bytea, @principal::text, @name::text, @csrf::text, tick.now, tick.now, @idle::interval,
	least(tick.now + @idle::interval, tick.now + @max::interval), tick.now + @max::interval, @email::text, @groups::text
FROM tick
RETURNING `+webSessionCols, named{"now": s.now(), "hash": airlock.WebSessionIDHash(p.ID), "csrf": p.CSRF,
			"idle": p.Idle, "max": p.Max, "principal": rv.Principal, "name": rv.Name, "email": rv.Email,
			"groups": airlock.JoinGroups(rv.Groups)}))
		return err
	})
	return out, translate(err, "web session", "new")
}

// webSessionTokenCols are tokenCols for the LEFT JOIN of WebSessionByID:
// an OIDC reviewer's session has no token, and reads zero values.
const webSessionTokenCols = `coalesce(t.id, ''), coalesce(t.name, ''), coalesce(t.role, ''), coalesce(t.scopes, '{}'),
	coalesce(t.principal, ''), coalesce(t.hash, ''::bytea), coalesce(t.created_at, 'epoch'), coalesce(t.created_by, ''), t.revoked_at`

// WebSessionByID reads a live session with its token: one read by the
// primary key, joined to the token by its primary key. An OIDC
// reviewer's session has no token (token_id ”), and the zero Token.
func (s *Store) WebSessionByID(ctx context.Context, id string) (airlock.WebSession, airlock.Token, error) {
	var (
		w         webSessionScan
		tokenHash []byte
	)
	tok, err := scanToken(s.queryRow(ctx, tickCTE+`SELECT `+webSessionTokenCols+`, `+webSessionCols+`, ws.token_hash
FROM web_sessions ws LEFT JOIN tokens t ON t.id = ws.token_id, tick
WHERE ws.id_hash = @hash AND ws.idle_expires_at > tick.now`,
		named{"now": s.now(), "hash": airlock.WebSessionIDHash(id)}), append(w.dest(), &tokenHash)...)
	if err != nil {
		return airlock.WebSession{}, airlock.Token{}, translate(err, "web session", "of this cookie")
	}
	return w.finish().WithToken(tok, tokenHash)
}

// TouchWebSession moves a live session's idle end, at most once per
// every: the UPDATE's conditions are re-checked on the row's newest
// version, so a touch that waited for a sign-out's DELETE finds no row.
func (s *Store) TouchWebSession(ctx context.Context, id string, every time.Duration) (airlock.WebSession, bool, error) {
	var (
		out     airlock.WebSession
		touched bool
	)
	hash := airlock.WebSessionIDHash(id)
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var err error
		out, err = scanWebSession(t.QueryRow(ctx, tickCTE+`UPDATE web_sessions ws
SET last_seen_at = tick.now, idle_expires_at = least(tick.now + ws.idle, ws.expires_at)
FROM tick
WHERE ws.id_hash = @hash AND ws.idle_expires_at > tick.now AND ws.last_seen_at <= tick.now - @every::interval
RETURNING `+webSessionCols, named{"now": s.now(), "hash": hash, "every": every}))
		if err == nil {
			touched = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		out, err = scanWebSession(t.QueryRow(ctx, tickCTE+`SELECT `+webSessionCols+` FROM web_sessions ws, tick
WHERE ws.id_hash = @hash AND ws.idle_expires_at > tick.now`, named{"now": s.now(), "hash": hash}))
		return err
	})
	if err != nil {
		return airlock.WebSession{}, false, translate(err, "web session", "of this cookie")
	}
	return out, touched, nil
}

// DeleteWebSession ends one session.
func (s *Store) DeleteWebSession(ctx context.Context, id string) error {
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		tag, err := t.Exec(ctx, `DELETE FROM web_sessions WHERE id_hash = @hash`, named{"hash": airlock.WebSessionIDHash(id)})
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return pgx.ErrNoRows
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
	var n int
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		tag, err := t.Exec(ctx, `DELETE FROM web_sessions
WHERE (@token::text = '' OR token_id = @token) AND (@principal::text = '' OR principal = @principal)`,
			named{"token": f.TokenID, "principal": f.Principal})
		n = int(tag.RowsAffected())
		if err != nil || f.TokenID != "" {
			return err
		}
		var at time.Time
		if err := t.QueryRow(ctx, tickCTE+`, ended AS (
	UPDATE reviewer_profiles p SET ended_at = tick.now FROM tick WHERE p.principal = @principal
)
SELECT now FROM tick`, named{"now": s.now(), "principal": f.Principal}).Scan(&at); err != nil {
			return err
		}
		if f.Actor != "" {
			t.event(airlock.Event{Type: airlock.EventReviewerSessionsEnded, At: at.UTC(), Actor: f.Actor, Subject: f.Principal})
		}
		return nil
	})
	return n, translate(err, "web sessions", f.TokenID+f.Principal)
}

// SweepWebSessions deletes up to limit sessions that are over. Rows a
// touch or a sign-out holds are skipped, for a later sweep.
func (s *Store) SweepWebSessions(ctx context.Context, limit int) (int, error) {
	limit = store.Batch(limit)
	var n int
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		tag, err := t.Exec(ctx, tickCTE+`DELETE FROM web_sessions WHERE id_hash IN (
	SELECT w.id_hash FROM web_sessions w, tick WHERE w.idle_expires_at <= tick.now
	ORDER BY w.idle_expires_at LIMIT @limit FOR UPDATE OF w SKIP LOCKED)`, named{"now": s.now(), "limit": limit})
		n = int(tag.RowsAffected())
		return err
	})
	return n, translate(err, "web sessions", "sweep")
}

// PutOIDCLogin stores a sign-in in progress, sweeping a few that are over
// first, unless about maxLive are in progress (concurrent starts may each
// see one short of it).
func (s *Store) PutOIDCLogin(ctx context.Context, l airlock.OIDCLogin, ttl time.Duration, maxLive int) error {
	if err := l.Validate(ttl); err != nil {
		return err
	}
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		args := named{"now": s.now(), "state": l.StateHash, "binding": l.BindingHash, "next": l.Next, "ttl": ttl, "max": maxLive}
		if _, err := t.Exec(ctx, tickCTE+`DELETE FROM oidc_logins WHERE state_hash IN (
	SELECT o.state_hash FROM oidc_logins o, tick WHERE o.expires_at <= tick.now
	ORDER BY o.expires_at LIMIT 100 FOR UPDATE OF o SKIP LOCKED)`, named{"now": s.now()}); err != nil {
			return err
		}
		tag, err := t.Exec(ctx, tickCTE+`INSERT INTO oidc_logins (state_hash, binding_hash, next, expires_at)
SELECT @state::bytea, @binding::bytea, @next::text, tick.now + @ttl::interval FROM tick
WHERE (SELECT count(*) FROM oidc_logins o WHERE o.expires_at > tick.now) < @max::int`, args)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return airlock.Unavailable(nil, "too many sign-ins are in progress (%d); try again in a few minutes", maxLive)
		}
		return nil
	})
	return translate(err, "oidc login", "new")
}

// TakeOIDCLogin deletes and returns the live login of a state hash: of
// two callbacks with one state, the DELETE lets one have the row.
func (s *Store) TakeOIDCLogin(ctx context.Context, stateHash []byte) (airlock.OIDCLogin, error) {
	var out airlock.OIDCLogin
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		err := t.QueryRow(ctx, tickCTE+`DELETE FROM oidc_logins o USING tick
WHERE o.state_hash = @state AND o.expires_at > tick.now
RETURNING o.state_hash, o.binding_hash, o.next, o.expires_at`, named{"now": s.now(), "state": stateHash}).Scan(
			&out.StateHash, &out.BindingHash, &out.Next, &out.ExpiresAt)
		return err
	})
	if err != nil {
		return airlock.OIDCLogin{}, translate(err, "oidc login", "of this state")
	}
	out.ExpiresAt = out.ExpiresAt.UTC()
	return out, nil
}

// ListReviewerProfiles lists the reviewer directory by principal.
func (s *Store) ListReviewerProfiles(ctx context.Context) ([]airlock.ReviewerProfile, error) {
	out, err := queryAll(ctx, checked{s}, func(row pgx.Row) (airlock.ReviewerProfile, error) {
		var (
			p      airlock.ReviewerProfile
			groups string
		)
		if err := row.Scan(&p.Principal, &p.Name, &p.Email, &groups, &p.SignedInAt, &p.EndedAt); err != nil {
			return p, err
		}
		p.Groups, p.SignedInAt, p.EndedAt = airlock.SplitGroups(groups), p.SignedInAt.UTC(), utc(p.EndedAt)
		return p, nil
	}, `SELECT principal, name, email, groups, signed_in_at, ended_at FROM reviewer_profiles ORDER BY principal`)
	return out, translate(err, "reviewer profiles", "list")
}
