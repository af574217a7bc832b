package sqlcore

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// The inbox's sign-ins (docs/inbox.md, "Sessions").

// WebSessionSQL are the statements of store.WebSessions and
// store.OIDCLogins. A web session is read as its id_hash, token_id,
// principal, name, csrf, created_at, last_seen_at, idle,
// idle_expires_at, expires_at, email and groups.
type WebSessionSQL struct {
	// CreateForToken stores session @hash (@csrf, @idle, @max) of token
	// @token if it is live with hash @token_hash, dated @now, and returns
	// it; no row when the token is not live. A revocation committing
	// meanwhile either comes first (no row) or ends the session.
	CreateForToken string
	// CreateForReviewer stores session @hash (@csrf, @idle, @max) of the
	// reviewer @principal (@name, @email, @groups), dated @now, and
	// returns it.
	CreateForReviewer string
	// PutProfile, optional, upserts the reviewer's profile (@principal,
	// @name, @email, @groups, signed in at @now): for an engine whose
	// CreateForReviewer does not.
	PutProfile string `sql:"optional"`
	// ByID selects the session @hash, live at @now, as a token's columns
	// (those of TokenSQL; zero values for an OIDC reviewer's session,
	// which has no token) followed by the session's and its token_hash.
	ByID string
	// Touch is the compare-and-set of a touch: session @hash, live at
	// @now and last seen at least @every before it, is seen at @now and
	// lasts its idle time more, at most until it expires; it returns the
	// session, or no row.
	Touch string
	// Live selects session @hash if it is live at @now.
	Live string
	// Delete deletes session @hash.
	Delete string
	// DeleteOfToken deletes the sessions of token @token, and of
	// principal @principal too unless it is ''.
	DeleteOfToken string
	// DeleteOfPrincipal deletes the sessions of principal @principal.
	DeleteOfPrincipal string
	// EndProfile sets the ended_at of @principal's profile, if any, to
	// @now, and yields the instant: one row, or none when it changed no
	// profile and the engine dates events by the write's now (Tx.Event).
	EndProfile string
	// Sweep deletes up to @limit sessions that are over at @now.
	Sweep string

	// SweepLogins deletes up to 100 sign-ins in progress that are over
	// at @now.
	SweepLogins string
	// PutLogin stores sign-in @state (@binding, @next) lasting @ttl from
	// @now, unless @max are live at @now: then it changes no row.
	PutLogin string
	// TakeLogin deletes the sign-in @state if live at @now, returning its
	// state_hash, binding_hash, next and expires_at.
	TakeLogin string
	// Profiles selects the reviewer directory by principal: principal,
	// name, email, groups, signed_in_at, ended_at.
	Profiles string
}

// webSessionScan scans a web session's columns; session converts what
// it scanned.
type webSessionScan struct {
	ws     airlock.WebSession
	groups string
}

func (c *Core) webSessionDest(w *webSessionScan) []any {
	return []any{&w.ws.IDHash, &w.ws.TokenID, &w.ws.Principal, &w.ws.Name, &w.ws.CSRF, c.d.Time(&w.ws.CreatedAt),
		c.d.Time(&w.ws.LastSeenAt), c.d.Duration(&w.ws.Idle), c.d.Time(&w.ws.IdleExpiresAt), c.d.Time(&w.ws.ExpiresAt),
		&w.ws.Email, &w.groups}
}

func (w *webSessionScan) session() airlock.WebSession {
	ws := w.ws
	ws.Groups = splitGroups(w.groups)
	return ws
}

func (c *Core) scanWebSession(row Row) (airlock.WebSession, error) {
	var w webSessionScan
	if err := row.Scan(c.webSessionDest(&w)...); err != nil {
		return airlock.WebSession{}, err
	}
	return w.session(), nil
}

// CreateWebSession stores a session for a live token, in the write that
// also checks the token: a revocation is either before it (refused) or
// after it (and ends the session). For an OIDC reviewer it stores the
// session and upserts the reviewer's profile, in one transaction.
func (c *Core) CreateWebSession(ctx context.Context, p store.NewWebSessionParams) (airlock.WebSession, error) {
	if err := p.Validate(); err != nil {
		return airlock.WebSession{}, err
	}
	q := &c.q.WebSessions
	args := Args{{"hash", webSessionIDHash(p.ID)}, {"csrf", p.CSRF}, {"idle", p.Idle}, {"max", p.Max}}
	var out airlock.WebSession
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		if rv := p.Reviewer; rv != nil {
			reviewer := Args{{"principal", rv.Principal}, {"name", rv.Name}, {"email", rv.Email}, {"groups", joinGroups(rv.Groups)}}
			if out, err = c.scanWebSession(tx.QueryRow(q.CreateForReviewer, append(reviewer, args...))); err != nil {
				return err
			}
			if q.PutProfile != "" {
				_, err = tx.Exec(q.PutProfile, reviewer)
			}
			return err
		}
		out, err = c.scanWebSession(tx.QueryRow(q.CreateForToken, append(Args{{"token", p.Token.ID}, {"token_hash", p.Token.Hash}}, args...)))
		if noRows(err) {
			return airlock.TokenRefused()
		}
		return err
	})
	return out, c.d.Translate(err, "web session", "new")
}

// WebSessionByID reads a live session with its token: one read by the
// primary key, joined to the token by its primary key. An OIDC
// reviewer's session has no token (token_id ""), and the zero Token.
func (c *Core) WebSessionByID(ctx context.Context, id string) (airlock.WebSession, airlock.Token, error) {
	var (
		t         tokenScan
		w         webSessionScan
		tokenHash []byte
	)
	dest := append(c.tokenDest(&t), c.webSessionDest(&w)...)
	if err := c.d.QueryRow(ctx, c.q.WebSessions.ByID, Args{{"hash", webSessionIDHash(id)}}).Scan(append(dest, &tokenHash)...); err != nil {
		return airlock.WebSession{}, airlock.Token{}, c.d.Translate(err, "web session", "of this cookie")
	}
	return w.session().WithToken(t.token(), tokenHash)
}

// TouchWebSession moves a live session's idle end, at most once per
// every. The touch is a compare-and-set, so after a sign-out's DELETE it
// finds no row.
func (c *Core) TouchWebSession(ctx context.Context, id string, every time.Duration) (airlock.WebSession, bool, error) {
	q := &c.q.WebSessions
	var (
		out     airlock.WebSession
		touched bool
	)
	hash := webSessionIDHash(id)
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		out, err = c.scanWebSession(tx.QueryRow(q.Touch, Args{{"hash", hash}, {"every", every}}))
		touched = err == nil
		if !noRows(err) {
			return err
		}
		out, err = c.scanWebSession(tx.QueryRow(q.Live, Args{{"hash", hash}}))
		return err
	})
	if err != nil {
		return airlock.WebSession{}, false, c.d.Translate(err, "web session", "of this cookie")
	}
	return out, touched, nil
}

// DeleteWebSession ends one session.
func (c *Core) DeleteWebSession(ctx context.Context, id string) error {
	err := c.d.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(c.q.WebSessions.Delete, Args{{"hash", webSessionIDHash(id)}})
		if err == nil && n == 0 {
			return airlock.NotFound("web session", "of this cookie")
		}
		return err
	})
	return c.d.Translate(err, "web session", "of this cookie")
}

// DeleteWebSessions ends the sessions of a token or a principal; for a
// principal alone it also ends the principal's profile, and with an
// actor appends reviewer.sessions_ended.
func (c *Core) DeleteWebSessions(ctx context.Context, f store.WebSessionFilter) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	q := &c.q.WebSessions
	var n int64
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		if f.TokenID != "" {
			n, err = tx.Exec(q.DeleteOfToken, Args{{"token", f.TokenID}, {"principal", f.Principal}})
			return err
		}
		if n, err = tx.Exec(q.DeleteOfPrincipal, Args{{"principal", f.Principal}}); err != nil {
			return err
		}
		var at time.Time
		if err := tx.QueryRow(q.EndProfile, Args{{"principal", f.Principal}}).Scan(c.d.Time(&at)); err != nil && !noRows(err) {
			return err
		}
		if f.Actor == "" {
			return nil
		}
		return tx.Event(airlock.Event{Type: airlock.EventReviewerSessionsEnded, At: at, Actor: f.Actor, Subject: f.Principal})
	})
	return int(n), c.d.Translate(err, "web sessions", f.TokenID+f.Principal)
}

// SweepWebSessions deletes up to limit sessions that are over.
func (c *Core) SweepWebSessions(ctx context.Context, limit int) (int, error) {
	var n int64
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		n, err = tx.Exec(c.q.WebSessions.Sweep, Args{{"limit", store.Batch(limit)}})
		return err
	})
	return int(n), c.d.Translate(err, "web sessions", "sweep")
}

// PutOIDCLogin stores a sign-in in progress, sweeping a few that are over
// first, unless maxLive are in progress (about maxLive where writers run
// at once: concurrent starts may each see one short of it).
func (c *Core) PutOIDCLogin(ctx context.Context, l airlock.OIDCLogin, ttl time.Duration, maxLive int) error {
	if err := l.Validate(ttl); err != nil {
		return err
	}
	q := &c.q.WebSessions
	err := c.d.Write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(q.SweepLogins, nil); err != nil {
			return err
		}
		n, err := tx.Exec(q.PutLogin, Args{{"state", l.StateHash}, {"binding", l.BindingHash}, {"next", l.Next}, {"ttl", ttl}, {"max", maxLive}})
		if err == nil && n == 0 {
			return airlock.Unavailable(nil, "too many sign-ins are in progress (%d); try again in a few minutes", maxLive)
		}
		return err
	})
	return c.d.Translate(err, "oidc login", "new")
}

// TakeOIDCLogin deletes and returns the live login of a state hash: of
// two callbacks with one state, the DELETE lets one have the row.
func (c *Core) TakeOIDCLogin(ctx context.Context, stateHash []byte) (airlock.OIDCLogin, error) {
	var out airlock.OIDCLogin
	err := c.d.Write(ctx, func(tx Tx) error {
		return tx.QueryRow(c.q.WebSessions.TakeLogin, Args{{"state", stateHash}}).Scan(
			&out.StateHash, &out.BindingHash, &out.Next, c.d.Time(&out.ExpiresAt))
	})
	if err != nil {
		return airlock.OIDCLogin{}, c.d.Translate(err, "oidc login", "of this state")
	}
	return out, nil
}

// ListReviewerProfiles lists the reviewer directory by principal.
func (c *Core) ListReviewerProfiles(ctx context.Context) ([]airlock.ReviewerProfile, error) {
	out, err := all(ctx, c.d, func(row Row) (airlock.ReviewerProfile, error) {
		var (
			p      airlock.ReviewerProfile
			groups string
			ended  NullTime
		)
		if err := row.Scan(&p.Principal, &p.Name, &p.Email, &groups, c.d.Time(&p.SignedInAt), c.d.NullTime(&ended)); err != nil {
			return airlock.ReviewerProfile{}, err
		}
		p.Groups, p.EndedAt = splitGroups(groups), ended.Ptr()
		return p, nil
	}, c.q.WebSessions.Profiles, nil)
	return out, c.d.Translate(err, "reviewer profiles", "list")
}
