package airlock

import (
	"context"
	"time"
)

// Inbox sign-ins (docs/inbox.md, "Sessions"): a web session is one browser
// signed in to the inbox. It lives in the store, so every replica serving
// the inbox knows it, and a sign-out or a revocation on one replica ends
// it on all of them at the next request. These are not the MCP sessions of
// SessionStore.

// WebSession is one signed-in browser. The browser's cookie holds the
// session's ID; the store keeps only its SHA-256 (IDHash), so a copy of
// the database signs nobody in.
type WebSession struct {
	IDHash    []byte
	TokenID   string // the token it was signed in with
	Principal string // that token's principal
	Name      string // that token's name, shown on every page
	// CSRF is the token every form of this session carries.
	CSRF       string
	CreatedAt  time.Time
	LastSeenAt time.Time
	// Idle is how long the session lasts without a request; each touch
	// moves IdleExpiresAt to LastSeenAt + Idle, never past ExpiresAt.
	Idle          time.Duration
	IdleExpiresAt time.Time
	// ExpiresAt is the absolute end, CreatedAt + the maximum lifetime,
	// whatever the activity.
	ExpiresAt time.Time
}

// NewWebSessionParams is what the inbox asks a store to create at a
// sign-in. The store sets CreatedAt and LastSeenAt to its now.
type NewWebSessionParams struct {
	ID    string // the random ID the cookie carries; the store keeps its hash
	Token Token  // the live token signed in with: ID, Principal, Name, Hash
	CSRF  string
	Idle  time.Duration // idle lifetime
	Max   time.Duration // absolute lifetime
}

// Validate refuses a session no store may keep: one without an ID, token
// or CSRF token, or with lifetimes under a microsecond (stores keep
// microseconds, so the session would be over when created).
func (p NewWebSessionParams) Validate() error {
	switch {
	case len(p.ID) < 16:
		return Invalid("session", "a web session needs a random ID of at least 16 characters")
	case p.Token.ID == "" || len(p.Token.Hash) == 0:
		return Invalid("session", "a web session needs the ID and hash of the token signed in with")
	case p.CSRF == "":
		return Invalid("session", "a web session needs a CSRF token")
	case p.Idle < time.Microsecond || p.Max < time.Microsecond:
		return Invalid("session", "a web session needs idle and absolute lifetimes of at least 1µs")
	}
	return nil
}

// WebSessionIDHash is the hash a store keeps of a web session's ID.
func WebSessionIDHash(id string) []byte { return HashSecret(id) }

// WebSessionFilter names the web sessions DeleteWebSessions ends: those of
// a token, those of a principal, or those of both when both are set.
type WebSessionFilter struct {
	TokenID   string
	Principal string
}

// WebSessionStore keeps the inbox's sign-ins (docs/inbox.md, "Sessions").
// Every method judges expiry by the store's clock: a session is over once
// the store's now reaches its IdleExpiresAt (never later than its
// ExpiresAt).
type WebSessionStore interface {
	// CreateWebSession stores a session for p.Token, if that token is
	// live (unrevoked, with the hash p.Token.Hash): otherwise
	// unauthorized, as a revocation between the sign-in's check and this
	// write would have it.
	CreateWebSession(ctx context.Context, p NewWebSessionParams) (WebSession, error)
	// WebSessionByID looks a session up by the raw ID its cookie carries,
	// with its token, in one indexed read. not_found when there is no such
	// session or it is over (idle or absolute); unauthorized when its
	// token was revoked or its secret replaced since the sign-in: such a
	// session is refused from the revocation on, on every replica, and
	// stays until DeleteWebSession or a sweep removes it, so that the
	// browser can be told why it was signed out. PutToken deletes the
	// sessions of a secret it replaces or of a revoked token it brings
	// back, which never serve again.
	WebSessionByID(ctx context.Context, id string) (WebSession, Token, error)
	// TouchWebSession records activity: when the session is live and was
	// last seen at least every ago, it sets LastSeenAt to the store's now
	// and IdleExpiresAt to now + Idle (at most ExpiresAt), and returns
	// the session and true. Otherwise it writes nothing and returns false
	// (not_found when the session is over or gone): a touch never brings
	// back a session that was deleted or is over.
	TouchWebSession(ctx context.Context, id string, every time.Duration) (WebSession, bool, error)
	// DeleteWebSession ends a session (sign-out); not_found when there is
	// none.
	DeleteWebSession(ctx context.Context, id string) error
	// DeleteWebSessions ends every session matching f and returns how
	// many; f must name a token or a principal.
	DeleteWebSessions(ctx context.Context, f WebSessionFilter) (int, error)
	// SweepWebSessions deletes up to limit sessions that are over and
	// returns how many.
	SweepWebSessions(ctx context.Context, limit int) (int, error)
}
