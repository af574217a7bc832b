package store

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// NewWebSessionParams is what the inbox asks a store to create at a
// sign-in. The store sets CreatedAt and LastSeenAt to its now.
type NewWebSessionParams struct {
	ID    string        // the random ID the cookie carries; the store keeps its hash
	Token airlock.Token // the live token signed in with: ID, Principal, Name, Hash
	// Reviewer, instead of Token, is a reviewer the identity provider
	// signed in. The store records it in the reviewer directory in the
	// same write (ReviewerProfile).
	Reviewer *airlock.ReviewerIdentity
	CSRF     string
	Idle     time.Duration // idle lifetime
	Max      time.Duration // absolute lifetime
}

// Validate refuses a session no store may keep: one without an ID, token
// or CSRF token, or with lifetimes under a microsecond (stores keep
// microseconds, so the session would be over when created).
func (p NewWebSessionParams) Validate() error {
	switch {
	case len(p.ID) < 16:
		return airlock.Invalid("session", "a web session needs a random ID of at least 16 characters")
	case p.Reviewer != nil && p.Token.ID != "":
		return airlock.Invalid("session", "a web session is of a token or of an OIDC reviewer, not both")
	case p.Reviewer == nil && (p.Token.ID == "" || len(p.Token.Hash) == 0):
		return airlock.Invalid("session", "a web session needs the ID and hash of the token signed in with")
	case p.CSRF == "":
		return airlock.Invalid("session", "a web session needs a CSRF token")
	case p.Idle < time.Microsecond || p.Max < time.Microsecond:
		return airlock.Invalid("session", "a web session needs idle and absolute lifetimes of at least 1µs")
	}
	if p.Reviewer != nil {
		return p.Reviewer.Validate()
	}
	return nil
}

// WebSessionFilter names the web sessions DeleteWebSessions ends: those of
// a token, those of a principal, or those of both when both are set.
type WebSessionFilter struct {
	TokenID   string
	Principal string
	// Actor, when set with a principal alone, is the admin ending the
	// principal's sessions: the store appends EventReviewerSessionsEnded
	// (Subject the principal) in the same transaction.
	Actor string
}

// Validate checks that f names a token or a principal: a filter naming
// neither would end every session.
func (f WebSessionFilter) Validate() error {
	if f.TokenID == "" && f.Principal == "" {
		return airlock.Invalid("filter", "name a token or a principal whose web sessions to end")
	}
	return nil
}

// WebSessions keeps the inbox's sign-ins (docs/inbox.md, "Sessions").
// Every method judges expiry by the store's clock: a session is over once
// the store's now reaches its IdleExpiresAt (never later than its
// ExpiresAt).
type WebSessions interface {
	// CreateWebSession stores a session for p.Token, if that token is
	// live (unrevoked, with the hash p.Token.Hash): otherwise
	// unauthorized, as a revocation between the sign-in's check and this
	// write would have it. For p.Reviewer it stores the session and
	// upserts the reviewer's profile (name, email, groups, SignedInAt),
	// in one transaction.
	CreateWebSession(ctx context.Context, p NewWebSessionParams) (airlock.WebSession, error)
	// WebSessionByID looks a session up by the raw ID its cookie carries,
	// with its token (the zero Token for an OIDC reviewer's session, whose
	// TokenID is ""), in one indexed read. not_found when there is no such
	// session or it is over (idle or absolute); unauthorized when its
	// token was revoked or its secret replaced since the sign-in: such a
	// session is refused from the revocation on, on every replica, and
	// stays until DeleteWebSession or a sweep removes it, so that the
	// browser can be told why it was signed out. PutToken deletes the
	// sessions of a secret it replaces or of a revoked token it brings
	// back, which never serve again.
	WebSessionByID(ctx context.Context, id string) (airlock.WebSession, airlock.Token, error)
	// TouchWebSession records activity: when the session is live and was
	// last seen at least every ago, it sets LastSeenAt to the store's now
	// and IdleExpiresAt to now + Idle (at most ExpiresAt), and returns
	// the session and true. Otherwise it writes nothing and returns false
	// (not_found when the session is over or gone): a touch never brings
	// back a session that was deleted or is over.
	TouchWebSession(ctx context.Context, id string, every time.Duration) (airlock.WebSession, bool, error)
	// DeleteWebSession ends a session (sign-out); not_found when there is
	// none.
	DeleteWebSession(ctx context.Context, id string) error
	// DeleteWebSessions ends every session matching f and returns how
	// many; f must name a token or a principal. For a principal alone it
	// also sets the EndedAt of its reviewer profile, if any, in the same
	// transaction.
	DeleteWebSessions(ctx context.Context, f WebSessionFilter) (int, error)
	// SweepWebSessions deletes up to limit sessions that are over and
	// returns how many.
	SweepWebSessions(ctx context.Context, limit int) (int, error)
}

// OIDCLogins keeps sign-ins in progress.
type OIDCLogins interface {
	// PutOIDCLogin stores l, lasting ttl by the store's clock, after
	// deleting up to 100 logins that are over. unavailable when maxLive
	// logins are in progress already (a flood of sign-in starts).
	PutOIDCLogin(ctx context.Context, l airlock.OIDCLogin, ttl time.Duration, maxLive int) error
	// TakeOIDCLogin deletes and returns the live login of a state hash, so
	// a state serves one callback at most; not_found when there is none
	// or it is over.
	TakeOIDCLogin(ctx context.Context, stateHash []byte) (airlock.OIDCLogin, error)
	// ListReviewerProfiles lists the reviewer directory by principal.
	ListReviewerProfiles(ctx context.Context) ([]airlock.ReviewerProfile, error)
}
