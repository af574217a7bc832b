package airlock

import (
	"bytes"
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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
	IDHash []byte
	// TokenID is the token it was signed in with; "" for a reviewer the
	// identity provider signed in (docs/teams.md), who has no token.
	TokenID   string
	Principal string // that token's principal, or the OIDC principal
	Name      string // that token's name, or the reviewer's name, shown on every page
	// Email and Groups are an OIDC reviewer's, from the identity
	// provider's claims at sign-in; empty for a token's session.
	Email  string
	Groups []string
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
	// Reviewer, instead of Token, is a reviewer the identity provider
	// signed in. The store records it in the reviewer directory in the
	// same write (ReviewerProfile).
	Reviewer *ReviewerIdentity
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
		return Invalid("session", "a web session needs a random ID of at least 16 characters")
	case p.Reviewer != nil && p.Token.ID != "":
		return Invalid("session", "a web session is of a token or of an OIDC reviewer, not both")
	case p.Reviewer == nil && (p.Token.ID == "" || len(p.Token.Hash) == 0):
		return Invalid("session", "a web session needs the ID and hash of the token signed in with")
	case p.CSRF == "":
		return Invalid("session", "a web session needs a CSRF token")
	case p.Idle < time.Microsecond || p.Max < time.Microsecond:
		return Invalid("session", "a web session needs idle and absolute lifetimes of at least 1µs")
	}
	if p.Reviewer != nil {
		return p.Reviewer.Validate()
	}
	return nil
}

// WithToken is what a read of web session ws yields, given tok, its
// token as the store holds it now (the zero Token when that row is gone),
// and hash, the token's hash the session recorded at sign-in. An OIDC
// reviewer's session has no token, and yields the zero Token. A token's
// session ends with the token: once it is revoked, deleted or its secret
// changed (a new hash), the session is refused.
func (ws WebSession) WithToken(tok Token, hash []byte) (WebSession, Token, error) {
	if ws.TokenID == "" {
		return ws, Token{}, nil
	}
	if tok.ID == "" || tok.RevokedAt != nil || !bytes.Equal(tok.Hash, hash) {
		return WebSession{}, Token{}, TokenRefused()
	}
	return ws, tok, nil
}

// WebSessionIDHash is the hash a store keeps of a web session's ID.
func WebSessionIDHash(id string) []byte { return HashSecret(id) }

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
		return Invalid("filter", "name a token or a principal whose web sessions to end")
	}
	return nil
}

// EventReviewerSessionsEnded is appended when an admin ends a principal's
// inbox sessions (docs/teams.md, "Revoking a reviewer"); Subject is the
// principal.
const EventReviewerSessionsEnded EventType = "reviewer.sessions_ended"

// WebSessionStore keeps the inbox's sign-ins (docs/inbox.md, "Sessions").
// Every method judges expiry by the store's clock: a session is over once
// the store's now reaches its IdleExpiresAt (never later than its
// ExpiresAt).
type WebSessionStore interface {
	// CreateWebSession stores a session for p.Token, if that token is
	// live (unrevoked, with the hash p.Token.Hash): otherwise
	// unauthorized, as a revocation between the sign-in's check and this
	// write would have it. For p.Reviewer it stores the session and
	// upserts the reviewer's profile (name, email, groups, SignedInAt),
	// in one transaction.
	CreateWebSession(ctx context.Context, p NewWebSessionParams) (WebSession, error)
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
	// many; f must name a token or a principal. For a principal alone it
	// also sets the EndedAt of its reviewer profile, if any, in the same
	// transaction.
	DeleteWebSessions(ctx context.Context, f WebSessionFilter) (int, error)
	// SweepWebSessions deletes up to limit sessions that are over and
	// returns how many.
	SweepWebSessions(ctx context.Context, limit int) (int, error)
}

// OIDC reviewers (docs/teams.md): people the identity provider signs in
// to the inbox, with no token.

// OIDCPrincipalPrefix starts the principal of every reviewer an identity
// provider signed in: "oidc:<issuer>#<subject>".
const OIDCPrincipalPrefix = "oidc:"

// Bounds of what an identity provider's claims may bring in.
const (
	MaxReviewerGroups   = 100 // groups of one reviewer
	MaxReviewerGroupLen = 100 // bytes of one group name
	MaxReviewerNameLen  = MaxTokenNameLen
)

// ReviewerIdentity is who an identity provider vouched for at a sign-in.
type ReviewerIdentity struct {
	Principal string // "oidc:<issuer>#<subject>"
	Name      string // shown on every surface
	Email     string // "" when the provider gave none
	Groups    []string
}

// Validate refuses an identity no store may keep: a principal that is not
// an OIDC one or too long, a name that is empty or too long, an email too
// long, or groups over MaxReviewerGroups or with a name that is empty,
// too long or holds a control character (the OIDC sign-in drops such
// names before they get here, and says so in its log).
func (id ReviewerIdentity) Validate() error {
	if err := checkText("principal", id.Principal, len(OIDCPrincipalPrefix)+1, MaxPrincipalLen); err != nil {
		return err
	}
	if !strings.HasPrefix(id.Principal, OIDCPrincipalPrefix) {
		return Invalid("principal", "an OIDC reviewer's principal starts with %q", OIDCPrincipalPrefix)
	}
	if err := checkText("name", id.Name, 1, MaxReviewerNameLen); err != nil {
		return err
	}
	if err := checkText("email", id.Email, 0, MaxEmailLen); err != nil {
		return err
	}
	if len(id.Groups) > MaxReviewerGroups {
		return Invalid("groups", "%d groups; at most %d", len(id.Groups), MaxReviewerGroups)
	}
	for _, g := range id.Groups {
		if !ValidGroupName(g) {
			return Invalid("groups", "group name %q is empty, over %d bytes or holds a control character", g, MaxReviewerGroupLen)
		}
	}
	return nil
}

// ValidGroupName reports whether g may name a reviewer group: 1 to
// MaxReviewerGroupLen bytes of valid UTF-8 without control, invisible or
// bidirectional characters, so that a group shown on a page reads as what
// it is.
func ValidGroupName(g string) bool {
	if g == "" || len(g) > MaxReviewerGroupLen || !utf8.ValidString(g) {
		return false
	}
	for _, r := range g {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

// JoinGroups is how stores keep a list of groups in one column: joined by
// newlines, which no valid group name holds (ValidGroupName).
func JoinGroups(gs []string) string { return strings.Join(gs, "\n") }

// SplitGroups reads a column JoinGroups wrote.
func SplitGroups(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// ReviewerProfile is the reviewer directory's entry for an OIDC
// reviewer, upserted at each of their sign-ins: how every surface names
// them once their session is over.
type ReviewerProfile struct {
	Principal  string
	Name       string
	Email      string
	Groups     []string
	SignedInAt time.Time // the last sign-in
	// EndedAt is when an admin last ended the principal's sessions
	// (DeleteWebSessions by principal); nil when never.
	EndedAt *time.Time
}

// Active reports whether the reviewer signed in since an admin last ended
// their sessions: only then do they get mail (docs/teams.md).
func (p ReviewerProfile) Active() bool { return p.EndedAt == nil || p.SignedInAt.After(*p.EndedAt) }

// OIDCLogin is a sign-in in progress (docs/teams.md): created when the
// inbox sends a browser to the identity provider, taken once when the
// provider sends it back, on whichever replica. The store keeps only
// hashes: StateHash of the state parameter, BindingHash of the secret in
// the browser's cookie (from which the PKCE verifier and the nonce are
// derived, so neither is stored).
type OIDCLogin struct {
	StateHash   []byte
	BindingHash []byte
	Next        string // the inbox path to return to
	ExpiresAt   time.Time
}

// Validate checks what a store needs of l, to keep it for ttl: both
// hashes and a lifetime of at least the stores' microsecond.
func (l OIDCLogin) Validate(ttl time.Duration) error {
	if len(l.StateHash) == 0 || len(l.BindingHash) == 0 || ttl < time.Microsecond {
		return Invalid("login", "an OIDC login needs a state hash, a binding hash and a lifetime")
	}
	return nil
}

// OIDCLoginStore keeps sign-ins in progress.
type OIDCLoginStore interface {
	// PutOIDCLogin stores l, lasting ttl by the store's clock, after
	// deleting up to 100 logins that are over. unavailable when maxLive
	// logins are in progress already (a flood of sign-in starts).
	PutOIDCLogin(ctx context.Context, l OIDCLogin, ttl time.Duration, maxLive int) error
	// TakeOIDCLogin deletes and returns the live login of a state hash, so
	// a state serves one callback at most; not_found when there is none
	// or it is over.
	TakeOIDCLogin(ctx context.Context, stateHash []byte) (OIDCLogin, error)
	// ListReviewerProfiles lists the reviewer directory by principal.
	ListReviewerProfiles(ctx context.Context) ([]ReviewerProfile, error)
}
