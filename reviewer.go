package airlock

import (
	"bytes"
	"net/mail"
	"regexp"
	"strings"
	"sync"
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

// EventReviewerSessionsEnded is appended when an admin ends a principal's
// inbox sessions (docs/teams.md, "Revoking a reviewer"); Subject is the
// principal.
const EventReviewerSessionsEnded EventType = "reviewer.sessions_ended"

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
	if err := CheckText("principal", id.Principal, len(OIDCPrincipalPrefix)+1, MaxPrincipalLen); err != nil {
		return err
	}
	if !strings.HasPrefix(id.Principal, OIDCPrincipalPrefix) {
		return Invalid("principal", "an OIDC reviewer's principal starts with %q", OIDCPrincipalPrefix)
	}
	if err := CheckText("name", id.Name, 1, MaxReviewerNameLen); err != nil {
		return err
	}
	if err := CheckText("email", id.Email, 0, MaxEmailLen); err != nil {
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

// Reviewer links (docs/notifications.md, "Slack"): who a reviewer is on
// the channels that reach them. A link ties a reviewer principal — a
// token's principal today, which defaults to the token's ID — to a Slack
// user ID and an email address. Only a Slack user linked to a principal
// may decide from Slack, and decides as that principal, so the
// self-approval rule holds there as everywhere.

// ReviewerLink is one principal's link.
type ReviewerLink struct {
	Principal   string
	SlackUserID string // "" when none
	Email       string // "" when none
	UpdatedAt   time.Time
	UpdatedBy   string
}

// ReviewerLinkInput is what an admin sends to link a principal. It
// replaces the link: a field left out is cleared, and clearing both
// removes the link.
type ReviewerLinkInput struct {
	SlackUserID string `json:"slack_user_id,omitempty"`
	Email       string `json:"email,omitempty"`
}

// EventReviewerLinked is appended whenever a principal's link changes or
// is removed; Subject is the principal.
const EventReviewerLinked EventType = "reviewer.linked"

// MaxEmailLen bounds an email address (RFC 5321's path limit).
const MaxEmailLen = 254

// slackUserID matches Slack's user IDs: U… or W… (Enterprise Grid), upper
// case letters and digits. It is compiled on first use, not at start-up.
var slackUserID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[UW][A-Z0-9]{2,31}$`) })

// Validate refuses a link no channel could use: a principal that is
// empty or too long, a Slack user ID that is not one, an email address
// that is not a bare address.
func (in ReviewerLinkInput) Validate(principal string) error {
	if err := CheckText("principal", principal, 1, MaxPrincipalLen); err != nil {
		return err
	}
	if in.SlackUserID != "" && !slackUserID().MatchString(in.SlackUserID) {
		return Invalid("slack_user_id", "slack_user_id %q is not a Slack user ID (U… or W…, as Slack shows in a profile's \"Copy member ID\")", in.SlackUserID)
	}
	if in.Email != "" {
		if len(in.Email) > MaxEmailLen {
			return Invalid("email", "email is %d bytes; at most %d", len(in.Email), MaxEmailLen)
		}
		a, err := mail.ParseAddress(in.Email)
		if err != nil || a.Address != in.Email || a.Name != "" {
			return Invalid("email", "email %q is not a bare address such as alice@example.com", in.Email)
		}
	}
	return nil
}

// SlackMessage is where a request's Slack message was posted, so that it
// can be updated to the outcome.
type SlackMessage struct {
	RequestID string
	Channel   string // the channel ID Slack answered with
	TS        string // the message's timestamp, its ID in the channel
	PostedAt  time.Time
}

// Validate checks what a store needs of m before it writes it: a request
// ID, a channel and a ts.
func (m SlackMessage) Validate() error {
	if m.RequestID == "" || m.Channel == "" || m.TS == "" {
		return Invalid("slack_message", "a Slack message needs a request ID, a channel and a ts")
	}
	return nil
}

// SlackUserTaken is the error of linking Slack user to one principal while
// principal holds it.
func SlackUserTaken(user, principal string) error {
	return Invalid("slack_user_id", "Slack user %s is linked to principal %q already; unlink it there first", user, principal)
}
