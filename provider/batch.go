package provider

import (
	"context"

	"github.com/airlockhq/airlock"
)

// BatchResult is what a batch decision did to one of its ids: the request
// after its decision, or the error that refused it.
type BatchResult struct {
	ID      string
	Request airlock.Request
	Err     error
}

// DecideBatch records one decision for each of in.IDs (docs/protocol.md,
// "Batch decisions"). Each id is decided exactly as Decide decides it
// alone, in its own conditional write on that request and its own bytes:
// a batch is never a way around a rule. A request the caller could not
// decide by itself (their own, another group's, a second vote of theirs,
// one no longer pending) gets its refusal in its result, and the others
// are still decided. Only the batch as a whole is refused: by a caller
// who is not a reviewer, or by a body no id could be decided with.
func (s *Service) DecideBatch(ctx context.Context, c airlock.Caller, in airlock.BatchDecisionInput) ([]BatchResult, error) {
	if c.Role != airlock.RoleReviewer {
		return nil, forbidden("only reviewer tokens decide requests")
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if _, err := s.limits.Validity(in.ValidFor); err != nil {
		return nil, err
	}
	one := in.Decision()
	out := make([]BatchResult, len(in.IDs))
	for i, id := range in.IDs {
		if err := ctx.Err(); err != nil {
			// The caller went away: what was decided stays decided, and
			// the rest is left pending rather than decided unseen.
			return nil, err
		}
		r, err := s.Decide(ctx, c, id, one)
		out[i] = BatchResult{ID: id, Request: r, Err: err}
	}
	return out, nil
}
