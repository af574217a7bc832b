package airlock

import (
	"context"
	"strings"
	"time"
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
