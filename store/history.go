package store

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// History reads what was decided, for the reviewers' statistics and the
// suggestions of rules (docs/policy.md, "Fatigue, measured" and
// "Suggestions"). Both read the index of migration 0028, which holds the
// approvals and denials by decision time, never a scan of every request.
type History interface {
	// DecisionTimes calls fn with each approval and denial decided within
	// p.Age before the store's now, by p.DecidedBy when it is set, in no
	// set order. Only DecidedBy, State, CreatedAt, DecidedAt and
	// ArgumentsBytes are set. fn's error ends the read and is returned.
	DecisionTimes(ctx context.Context, p HistoryParams, fn func(DecidedRequest) error) error
	// DecidedCalls calls fn with each tool call (kind tool_call, neither
	// a question nor a command) approved by a person or denied by anyone
	// within p.Age before the store's now (an approval whose DecidedBy is
	// policy:…, grant:… or system:… is left out unread), in no set order,
	// with ID, InstanceID, Tool, State,
	// DecidedBy and Arguments set (nil once purged). p.DecidedBy is
	// ignored. fn's error ends the read and is returned.
	DecidedCalls(ctx context.Context, p HistoryParams, fn func(DecidedRequest) error) error
}

// HistoryParams select the decisions History reads.
type HistoryParams struct {
	// Age is how far back from the store's now decisions are read
	// (decided_at after now - Age); positive.
	Age time.Duration
	// DecidedBy, when set, reads one decider's decisions: a token's ID,
	// an OIDC principal, airlock.PolicyActor(rule) or
	// airlock.GrantActor(id), as decision.decided_by records it.
	DecidedBy string
}

// MaxHistoryAge is the furthest back History reads: a year.
const MaxHistoryAge = 366 * 24 * time.Hour

// Validate refuses an age that is not positive or is over MaxHistoryAge.
func (p HistoryParams) Validate() error {
	if p.Age <= 0 || p.Age > MaxHistoryAge {
		return airlock.Invalid("since", "the history read goes back more than 0 and at most %s, not %s", MaxHistoryAge, p.Age)
	}
	return nil
}

// DecidedRequest is what History reads of an approved or denied request.
type DecidedRequest struct {
	ID         string
	InstanceID string
	Tool       string
	State      airlock.State // approved or denied
	DecidedBy  string
	CreatedAt  time.Time
	DecidedAt  time.Time
	// ArgumentsBytes is the size of the stored arguments: 0 when the
	// request has none, or once its payloads were purged.
	ArgumentsBytes int
	Arguments      []byte
}
