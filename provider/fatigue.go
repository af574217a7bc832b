package provider

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fatigue"
	"github.com/airlockhq/airlock/store"
)

// Fatigue, measured and reduced (docs/policy.md, "Fatigue, measured" and
// "Suggestions"): decision statistics per decider and the patterns people
// keep approving, read from the store's history of decisions.

// DefaultHistoryAge is the window of stats and suggestions when the
// caller names none: 30 days.
const DefaultHistoryAge = 30 * 24 * time.Hour

// DeciderStats reads the statistics of one decider (decidedBy, as
// decision.decided_by records it: a token's ID, an OIDC principal,
// policy:<rule>, grant:<id>) over the age before now, or of every
// decider when decidedBy is empty. Admins read anyone's; a reviewer reads
// their own (their token's ID or their principal), and every decider only
// an admin.
func (s *Service) DeciderStats(ctx context.Context, c airlock.Caller, decidedBy string, age time.Duration) ([]fatigue.Stats, error) {
	switch {
	case c.Role == airlock.RoleAdmin:
	case c.Role == airlock.RoleReviewer && decidedBy != "" && (decidedBy == c.ID || decidedBy == c.Principal):
	case c.Role == airlock.RoleReviewer:
		return nil, forbidden("a reviewer reads their own statistics only (%s); an admin reads anyone's", c.ID)
	default:
		return nil, forbidden("only admins and reviewers read decision statistics")
	}
	var t fatigue.Tally
	err := s.storeFor(c).DecisionTimes(ctx, store.HistoryParams{Age: age, DecidedBy: decidedBy}, func(d store.DecidedRequest) error {
		t.Add(d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t.Stats(), nil
}

// Suggestions proposes rules for the tool calls people approved unchanged
// at least min times over the age before now with no denial (admins
// only).
func (s *Service) Suggestions(ctx context.Context, c airlock.Caller, min int, age time.Duration) ([]fatigue.Suggestion, error) {
	if c.Role != airlock.RoleAdmin {
		return nil, forbidden("only admins read suggestions")
	}
	if min < 1 || min > 1_000_000 {
		return nil, airlock.Invalid("min", "min is 1 to 1000000, not %d", min)
	}
	var sg fatigue.Suggester
	err := s.storeFor(c).DecidedCalls(ctx, store.HistoryParams{Age: age}, func(d store.DecidedRequest) error {
		sg.Add(d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sg.Suggestions(min), nil
}
