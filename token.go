package airlock

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Role is what a token may do. Each token has exactly one.
type Role string

// The roles (docs/protocol.md S1): an agent asks, a reviewer decides, an
// admin manages tokens and instances, a verifier (a tool server)
// consumes approval tokens and does nothing else (docs/tokens.md, "Single
// use"), and an auditor reads the verifiable audit log and does nothing
// else (docs/audit.md).
const (
	RoleAdmin    Role = "admin"
	RoleAgent    Role = "agent"
	RoleReviewer Role = "reviewer"
	RoleVerifier Role = "verifier"
	RoleAuditor  Role = "auditor"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	return r == RoleAdmin || r == RoleAgent || r == RoleReviewer || r == RoleVerifier || r == RoleAuditor
}

// Limited reports whether a token of role r may call only the endpoints
// of its one power (a verifier's consume, an auditor's audit log) and
// nothing else, whatever an endpoint's own checks would let a role that
// is none of agent, reviewer and admin read.
func (r Role) Limited() bool { return r == RoleVerifier || r == RoleAuditor }

// MayReadAuditLog reports whether a token of role r may read the
// verifiable audit log: an auditor's one power, and an admin's.
func (r Role) MayReadAuditLog() bool { return r == RoleAuditor || r == RoleAdmin }

// MayConsumeApprovalTokens reports whether a token of role r may consume
// approval tokens: a verifier's one power, and an admin's.
func (r Role) MayConsumeApprovalTokens() bool { return r == RoleVerifier || r == RoleAdmin }

// Scopes finer than roles.
const (
	// ScopeWorkWrite lets an agent propose (and have executed) work_move commands.
	ScopeWorkWrite = "work:write"
)

// KnownScopes lists the scopes a token may carry.
var KnownScopes = []string{ScopeWorkWrite}

// Token is a bearer credential. Only the SHA-256 of its secret is stored.
type Token struct {
	ID     string
	Name   string
	Role   Role
	Scopes []string
	// Principal names who holds the token (a person or a system). A reviewer
	// may not decide a request created by a token with the same principal,
	// so one person cannot approve their own agent's calls. It defaults to
	// the token's own ID.
	Principal string
	Hash      []byte
	CreatedAt time.Time
	CreatedBy string
	RevokedAt *time.Time
}

// Validate checks what a store needs of t before it writes it: an ID and
// a hash.
func (t Token) Validate() error {
	if t.ID == "" || len(t.Hash) == 0 {
		return Invalid("token", "a token needs an ID and a hash")
	}
	return nil
}

// HasScope reports whether t carries scope.
func (t Token) HasScope(scope string) bool { return slices.Contains(t.Scopes, scope) }

// Caller is the authenticated token behind a call.
type Caller struct {
	Token
	// Check, when set, is the check not yet made that Token is still
	// live: the provider took the token from memory rather than from the
	// store, and the store the call goes through makes the check with the
	// call's first statement (TokenChecker.Checking). Only the provider
	// sets it; it is nil for a token the store was asked for.
	Check *TokenCheck
	// Groups are the reviewer groups the caller belongs to (docs/teams.md):
	// from the configured groups for a token's principal, and from the
	// identity provider's groups claim for an OIDC sign-in. A request
	// routed to groups may be decided only by a caller in one of them.
	Groups []string
}

// TokenSecretPrefix starts every secret, so that secret scanners and people
// recognise an Airlock token.
const TokenSecretPrefix = "airlock_"

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a random opaque ID with the given prefix, such as "apr_".
func NewID(prefix string) string {
	var b [15]byte
	rand.Read(b[:])
	return prefix + idEncoding.EncodeToString(b[:])
}

// NewClockID returns an opaque ID like NewID whose leading characters
// follow the clock (milliseconds since 1970, then 72 random bits): IDs
// made close in time sit close together in an index, so a write of many
// touches a few of its pages rather than one each. For records written
// in bulk, such as deliveries.
func NewClockID(prefix string, now time.Time) string {
	var b [15]byte
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (8 * (5 - i)))
	}
	rand.Read(b[6:])
	return prefix + idEncoding.EncodeToString(b[:])
}

// NewRequestID returns a fresh request ID made at now: a clock ID
// (NewClockID), since requests made together mostly fall due together, and
// an expiry rewrites each request's entry in the index of IDs and adds one
// to its events' index by request (docs/performance.md, "Expiry's
// sweeps"). Random IDs put those entries on a page each, read back and,
// after each checkpoint, written whole to the WAL.
func NewRequestID(now time.Time) string {
	return NewClockID(PrefixRequest, now)
}

// NewTokenSecret returns a fresh random secret (256 bits).
func NewTokenSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return TokenSecretPrefix + idEncoding.EncodeToString(b[:])
}

// HashSecret returns the stored form of a secret.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// ID prefixes, one per kind of resource (docs/protocol.md, "The REST API").
const (
	PrefixRequest  = "apr_"
	PrefixInstance = "ins_"
	PrefixSession  = "ses_"
	PrefixToken    = "tok_"
)

// Token input limits.
const (
	MaxTokenNameLen = 200
	MaxPrincipalLen = 200
)

// NewTokenInput is what an admin submits to mint a token.
type NewTokenInput struct {
	Name      string
	Role      Role
	Scopes    []string
	Principal string
}

// Validate checks a token request.
func (in *NewTokenInput) Validate() error {
	if err := CheckText("name", in.Name, 1, MaxTokenNameLen); err != nil {
		return err
	}
	if !in.Role.Valid() {
		return Invalid("role", "role must be one of admin, agent, reviewer, verifier, auditor")
	}
	for _, s := range in.Scopes {
		if !slices.Contains(KnownScopes, s) {
			return Invalid("scopes", "unknown scope %q; known scopes: %s", s, strings.Join(KnownScopes, ", "))
		}
	}
	if in.Principal != "" {
		if err := CheckText("principal", in.Principal, 1, MaxPrincipalLen); err != nil {
			return err
		}
	}
	return nil
}

// CanReadRequest reports whether c may see r: reviewers and admins see all,
// agents only their own. A caller that may not read gets not_found, never
// forbidden, so IDs do not leak.
func CanReadRequest(c Caller, r Request) bool {
	switch c.Role {
	case RoleReviewer, RoleAdmin:
		return true
	case RoleAgent:
		// An empty ID owns nothing: a zero Caller must not match a row
		// whose owner was never set.
		return c.ID != "" && r.OwnerID == c.ID
	}
	return false
}

// CanReadInstance reports whether c may see in.
func CanReadInstance(c Caller, in Instance) bool {
	switch c.Role {
	case RoleReviewer, RoleAdmin:
		return true
	case RoleAgent:
		// An empty ID owns nothing: a zero Caller must not match a row
		// whose owner was never set.
		return c.ID != "" && in.OwnerID == c.ID
	}
	return false
}

// A TokenCheck is the check, not yet made, that the token a call was
// authenticated with is still live: known, not revoked, and as the copy
// the provider holds in memory says. It travels with the call's Caller
// (Caller.Check), and the call's store is the view TokenChecker.Checking
// returns for it, which makes the check with the call's first statements,
// in the same round trip, and fails the call as unauthorized before any of
// its effects when the token is not live. So a call authenticated from
// memory costs no round trip of its own, and a revoked token still stops
// working at once, on every replica.
type TokenCheck struct {
	token Token
	state atomic.Int32 // checkPending, checkPassed or checkFailed
}

const (
	checkPending int32 = iota
	checkPassed
	checkFailed
)

// NewTokenCheck returns a pending check of t.
func NewTokenCheck(t Token) *TokenCheck { return &TokenCheck{token: t} }

// Token is the token the check is of, as the caller knows it.
func (c *TokenCheck) Token() Token { return c.token }

// Pending says whether the check is still to be made.
func (c *TokenCheck) Pending() bool { return c.state.Load() == checkPending }

// Pass records that the store found the token live.
func (c *TokenCheck) Pass() { c.state.CompareAndSwap(checkPending, checkPassed) }

// Fail records that the store found the token not live, and returns the
// error the call fails with.
func (c *TokenCheck) Fail() error {
	c.state.Store(checkFailed)
	return TokenRefused()
}

// Outcome says whether the check was made, and if so whether it passed.
func (c *TokenCheck) Outcome() (made, passed bool) {
	s := c.state.Load()
	return s != checkPending, s == checkPassed
}

// TokenRefused is the error of a call whose token is unknown or revoked.
func TokenRefused() *Error {
	return Errorf(CodeUnauthorized, "unknown or revoked token: send a valid one as Authorization: Bearer <token> (an admin can mint one)")
}

// The events of a key's life: created at first start or by a rotation,
// retired by a rotation. Their Subject is the key's ID.
const (
	EventSigningKeyCreated EventType = "signing_key.created"
	EventSigningKeyRetired EventType = "signing_key.retired"
)

// EventExecutionTokenConsumed is appended on a request when a tool server
// consumed its approval token (POST /v1/approval-tokens/consume): once per
// request, by the verifier that consumed it.
const EventExecutionTokenConsumed EventType = "execution.token_consumed"

// ConsumeInput is the body of POST /v1/approval-tokens/consume
// (docs/tokens.md, "Single use"): the token a tool server was handed and,
// when it holds the token to a call, the call's tool and arguments.
type ConsumeInput struct {
	Token string `json:"token"`
	// Tool and Arguments go together: both given, the token must approve
	// exactly this call; neither, only its signature, type, expiry and
	// audience are checked.
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Audience must equal the token's aud; both may be empty.
	Audience string `json:"audience"`
}

// MaxApprovalTokenLen bounds the token a consume may carry: a real one is
// well under 4 KiB, even with a quorum of deciders.
const MaxApprovalTokenLen = 64 << 10

// Validate checks a consume's input before any key is used.
func (in ConsumeInput) Validate() error {
	switch {
	case in.Token == "":
		return Invalid("token", "token is required: the approval token the tool server was handed")
	case len(in.Token) > MaxApprovalTokenLen:
		return Invalid("token", "token is longer than %d bytes", MaxApprovalTokenLen)
	case in.Tool != "" && len(in.Arguments) == 0:
		return Invalid("arguments", "arguments are required with tool: give both to hold the token to a call, or neither")
	case in.Tool == "" && len(in.Arguments) != 0:
		return Invalid("tool", "tool is required with arguments: give both to hold the token to a call, or neither")
	}
	return CheckText("audience", in.Audience, 0, 2048)
}

// CheckCall reports whether the input holds the token to a call.
func (in ConsumeInput) CheckCall() bool { return in.Tool != "" }
