package airlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// PrefixGrant starts a grant's ID.
const PrefixGrant = "grt_"

// Grant is a standing approval a reviewer gives (docs/policy.md,
// "Grants"): new tool calls it covers are approved at creation, decided by
// GrantActor(id), each using one of its uses. It ends at its expiry, its
// last use, its revocation, its instance's deletion or its creator's
// token's revocation. It never covers a command or a question.
type Grant struct {
	ID   string
	Tool string
	// Match says which calls of Tool it covers.
	Match GrantMatch
	// Scope: exactly one is set. InstanceID covers the calls made on that
	// instance; AgentID the calls made by that agent token.
	InstanceID string
	AgentID    string
	// Uses is how many calls it may approve; nil for as many as come
	// before it ends. UsesLeft counts down with each approval.
	Uses     *int
	UsesLeft *int
	// Validity is how long each approval it gives lets the call start
	// (the decision's expires_at - decided_at).
	Validity  time.Duration
	CreatedAt time.Time
	ExpiresAt time.Time
	// CreatedBy is the token that made it, CreatedByPrincipal that token's
	// principal: no call of an agent of the same principal is covered.
	CreatedBy          string
	CreatedByPrincipal string
	// RequestID is the request whose approval made it, when one did.
	RequestID string
	RevokedAt *time.Time
	RevokedBy string
	// State is filled on reads, judged by the store's clock.
	State GrantState
}

// GrantMatch says which calls of a grant's tool it covers.
type GrantMatch struct {
	Kind GrantMatchKind
	// ArgumentsFingerprint is ArgumentsFingerprint(tool, arguments) of the
	// arguments a same_arguments grant covers.
	ArgumentsFingerprint string
	// Expression is a CEL match expression (the policy file's language,
	// docs/policy.md) of a cel grant.
	Expression string
}

// GrantMatchKind is how a grant matches calls.
type GrantMatchKind string

// Grant match kinds.
const (
	// MatchSameArguments covers calls with the same arguments, compared in
	// their canonical form.
	MatchSameArguments GrantMatchKind = "same_arguments"
	// MatchCEL covers calls for which a CEL expression is true.
	MatchCEL GrantMatchKind = "cel"
)

// GrantState is where a grant stands, as a read finds it.
type GrantState string

// Grant states: live until one of the others holds. The first that holds,
// in this order, is the one reported.
const (
	GrantLive            GrantState = "live"
	GrantRevoked         GrantState = "revoked"
	GrantCreatorRevoked  GrantState = "creator_revoked"
	GrantInstanceDeleted GrantState = "instance_deleted"
	GrantUsedUp          GrantState = "used_up"
	GrantExpired         GrantState = "expired"
)

// grantActorPrefix starts the actor of a decision made by a grant.
const grantActorPrefix = "grant:"

// GrantActor is the decided_by of a decision made by grant id.
func GrantActor(id string) string { return grantActorPrefix + id }

// GrantOf returns the ID of the grant that decided, when actor is a
// grant's, and whether it is.
func GrantOf(actor string) (string, bool) {
	return strings.CutPrefix(actor, grantActorPrefix)
}

// GrantID returns the ID of the grant that made d, and whether one did;
// d may be nil.
func (d *Decision) GrantID() (string, bool) {
	if d == nil {
		return "", false
	}
	return GrantOf(d.DecidedBy)
}

// ArgumentsFingerprint is the hash a same_arguments grant compares calls
// by: of the tool and the canonical form of its arguments.
func ArgumentsFingerprint(tool string, arguments []byte) (string, error) {
	args := []byte("null")
	if len(arguments) > 0 {
		var err error
		if args, err = Canonical(arguments); err != nil {
			return "", fmt.Errorf("canonical arguments: %w", err)
		}
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte("grant_arguments/v1"), []byte(tool), args} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Grant limits.
const (
	// MaxGrantLifetime is the longest expires_in a grant may ask.
	MaxGrantLifetime = 30 * 24 * time.Hour
	// MaxGrantUses is the most uses a grant may be given.
	MaxGrantUses = 1_000_000
	// MaxGrantExpressionLen bounds a cel grant's expression.
	MaxGrantExpressionLen = 4096
	// MaxLiveGrantsPerTool is the most live grants a create looks at for
	// its tool.
	MaxLiveGrantsPerTool = 100
)

// GrantInput is what a reviewer submits to make a grant: the body of
// POST /v1/grants, and the grant object of a decision (where Tool, scope
// and arguments come from the request decided).
type GrantInput struct {
	Tool       string          `json:"tool,omitempty"`
	Match      string          `json:"match,omitempty"`       // "same_arguments" (default) or a CEL expression
	Arguments  json.RawMessage `json:"arguments,omitempty"`   // for same_arguments
	InstanceID string          `json:"instance_id,omitempty"` // scope: one of these two
	Agent      string          `json:"agent,omitempty"`
	Uses       *int            `json:"uses,omitempty"`
	ExpiresIn  string          `json:"expires_in"`
	ValidFor   string          `json:"valid_for,omitempty"`
}

// Validate checks what can be checked of a grant without the store: the
// tool, one scope, the uses and the lifetime. The match is checked by
// the provider, which compiles expressions.
func (in GrantInput) Validate() error {
	if !ToolNamePattern().MatchString(in.Tool) {
		return Invalid("tool", "tool must match %s: letters, digits, '_', '.', '-', 1 to 128 characters", ToolNamePattern())
	}
	if (in.InstanceID == "") == (in.Agent == "") {
		return Invalid("instance_id", "a grant needs exactly one scope: instance_id or agent")
	}
	if in.Uses != nil && (*in.Uses < 1 || *in.Uses > MaxGrantUses) {
		return Invalid("uses", "uses must be between 1 and %d, or left out for no limit until the grant expires", MaxGrantUses)
	}
	if len(in.Match) > MaxGrantExpressionLen {
		return Invalid("match", "match must be at most %d bytes", MaxGrantExpressionLen)
	}
	_, err := in.Lifetime()
	return err
}

// Lifetime is in.ExpiresIn parsed: required, at least 1s, at most
// MaxGrantLifetime.
func (in GrantInput) Lifetime() (time.Duration, error) {
	if in.ExpiresIn == "" {
		return 0, Invalid("expires_in", "a grant needs expires_in (for example \"1h\"): grants always end")
	}
	d, err := ParseDuration(in.ExpiresIn)
	if err != nil {
		return 0, Invalid("expires_in", "expires_in: %v", err)
	}
	if d < time.Second || d > MaxGrantLifetime {
		return 0, Invalid("expires_in", "expires_in must be between 1s and %s", MaxGrantLifetime)
	}
	return d, nil
}

// CheckStorable refuses a grant no store may keep: without a tool, a
// creator or exactly one scope, with fewer than one use, an approval valid
// under 1µs, or a match that is unknown or lacks what it matches by.
func (g Grant) CheckStorable() error {
	switch {
	case !strings.HasPrefix(g.ID, PrefixGrant):
		return Invalid("id", "a grant's ID starts with %s", PrefixGrant)
	case g.Tool == "":
		return Invalid("tool", "a grant needs a tool")
	case (g.InstanceID == "") == (g.AgentID == ""):
		return Invalid("instance_id", "a grant needs exactly one scope: instance_id or agent")
	case g.Uses != nil && *g.Uses < 1:
		return Invalid("uses", "uses must be at least 1")
	case g.CreatedBy == "" || g.CreatedByPrincipal == "":
		return Invalid("created_by", "a grant needs its creator and the creator's principal")
	}
	if err := CheckValidity(g.Validity); err != nil {
		return err
	}
	switch g.Match.Kind {
	case MatchSameArguments:
		if g.Match.ArgumentsFingerprint == "" {
			return Invalid("match", "a same_arguments grant needs the arguments' fingerprint")
		}
	case MatchCEL:
		if g.Match.Expression == "" {
			return Invalid("match", "a cel grant needs an expression")
		}
	default:
		return Invalid("match", "unknown match kind %q", g.Match.Kind)
	}
	return nil
}

// Grant audit events: the event's Subject is the grant's ID.
const (
	EventGrantCreated EventType = "grant.created"
	EventGrantRevoked EventType = "grant.revoked"
)

// Policy may decide a request at creation (docs/policy.md). Evaluate has
// no error: a policy that cannot judge a request asks a person, and says
// why in its own logs and metrics. Nothing fails open.
type Policy interface {
	// Evaluate judges a new request.
	Evaluate(ctx context.Context, in PolicyInput) PolicyVerdict
}

// PolicyInput is what a policy judges a new request by.
type PolicyInput struct {
	Request Request
	// Window is the decision window the request would get.
	Window time.Duration
	// Agent is the token creating the request.
	Agent Token
	// Instance reads the request's instance. A policy calls it only when a
	// rule looks at the instance, so that the rules that do not cost a
	// create no read.
	Instance func(context.Context) (Instance, error)
}

// PolicyVerdict is a policy's answer for a new request.
type PolicyVerdict struct {
	// Initial is the decision to record at creation; nil leaves the
	// request pending for a person.
	Initial *InitialDecision
	// Window, when positive and shorter than the request's, is the window
	// to ask a person with.
	Window time.Duration
	// Reviewers and Approvals, for a request asked of a person, are the
	// groups that may decide it and how many approvals it needs
	// (Request.Reviewers, Request.Approvals).
	Reviewers []string
	Approvals int
	// EscalateTo and EscalateAfter widen such a request to more groups
	// when it waits that long (Request.EscalateTo).
	EscalateTo    []string
	EscalateAfter time.Duration
	// Record, when set, counts and logs what the rules did (per-rule
	// metrics, shadow matches, rules that failed). The provider calls it
	// once the request is stored as new: a replayed create (an
	// Idempotency-Key seen before) answers with the original and a
	// refused one stores nothing, so neither is a request the rules
	// decided, and neither counts.
	Record func()
}

// InitialDecision is a policy's decision at creation.
type InitialDecision struct {
	Status   State // approved or denied
	Note     string
	Validity time.Duration // for approvals
	// DecidedBy is the decision's actor: PolicyActor(rule) for a
	// policy rule; ActorPolicy when empty.
	DecidedBy string
	// PolicyHash is the hex SHA-256 of the policy file whose rule decided,
	// recorded on the decision's event so an audit can tell which version
	// of the rules was in force.
	PolicyHash string
}

// GrantExpressions compiles the CEL match expressions of grants
// (docs/policy.md, "Grants") in the language of policy rules, so that a
// grant judges a request as a rule would. The policy package compiles
// (policy.Expressions); the provider only asks.
type GrantExpressions interface {
	// Compile returns expr compiled, or an error saying why it does not
	// compile: it must parse, type-check, yield a boolean and stay under
	// the policy's cost limit.
	Compile(expr string) (GrantExpression, error)
}

// GrantExpression is a grant's match expression, compiled.
type GrantExpression interface {
	// Matches reports whether the expression covers a new request. An
	// error is no match: a grant that cannot judge a request does not
	// cover it, and a person is asked.
	Matches(ctx context.Context, in PolicyInput) (bool, error)
}

// GroupDirectory tells which configured reviewer groups a principal is in
// (docs/teams.md). The policy engine is one: groups are configured in the
// policy file and reloaded with its rules.
type GroupDirectory interface {
	GroupsOf(principal string) []string
}

// NoPolicy leaves every request to a person.
type NoPolicy struct{}

// Evaluate decides nothing.
func (NoPolicy) Evaluate(context.Context, PolicyInput) PolicyVerdict { return PolicyVerdict{} }

// policyActorPrefix starts the actor of a decision made by a policy rule.
const policyActorPrefix = "policy:"

// PolicyActor is the decided_by of a decision made by the policy rule
// named rule.
func PolicyActor(rule string) string { return policyActorPrefix + rule }

// DecidedByPolicy reports whether actor is a policy's: ActorPolicy or a
// rule's PolicyActor.
func DecidedByPolicy(actor string) bool {
	return actor == ActorPolicy || strings.HasPrefix(actor, policyActorPrefix)
}

// MayApproveAtCreation reports whether r may be approved without a person:
// never a command proposal, which Airlock itself would execute, nor a
// question, which needs a person's answer.
func (r Request) MayApproveAtCreation() bool {
	return (r.Proposal == nil || r.Proposal.Command == nil) && r.Question == nil
}
