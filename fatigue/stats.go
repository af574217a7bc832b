// Package fatigue measures and reduces approval fatigue
// (docs/policy.md, "Fatigue, measured" and "Suggestions"): how fast and
// how often each reviewer, rule and grant approves, which approvals came
// faster than the arguments could be read, and which calls people keep
// approving unchanged, as rules to propose. It reads the history a store
// keeps (store.History) and decides nothing itself.
package fatigue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// ReadFloor is the least time to decision of an approval that could have
// followed a reading of the arguments: 2 s, and 2 s per KiB (1,024 bytes)
// of arguments beyond the first. An approval faster than its floor is a
// fast approval.
func ReadFloor(argumentsBytes int) time.Duration {
	perKiB := time.Duration(argumentsBytes) * 2 * time.Second / 1024
	return max(2*time.Second, perKiB)
}

// Fast reports whether an approval taken after took, of arguments of
// argumentsBytes, came faster than they could be read (ReadFloor).
func Fast(took time.Duration, argumentsBytes int) bool {
	return took < ReadFloor(argumentsBytes)
}

// Decider kinds: who decided, by the form of decision.decided_by.
const (
	KindPerson = "person" // a token's ID or an OIDC principal
	KindPolicy = "policy" // policy:<rule>, or system:policy
	KindGrant  = "grant"  // grant:<id>
	KindSystem = "system" // system:… (expiry, and the like)
)

// KindOf is the kind of decider decidedBy names.
func KindOf(decidedBy string) string {
	switch {
	case airlock.DecidedByPolicy(decidedBy):
		return KindPolicy
	case strings.HasPrefix(decidedBy, "grant:"):
		return KindGrant
	case strings.HasPrefix(decidedBy, "system:"):
		return KindSystem
	}
	return KindPerson
}

// Stats are one decider's approvals and denials over a window.
type Stats struct {
	DecidedBy string
	Kind      string
	Decisions int
	Approvals int
	Denials   int
	// ApprovalRate is Approvals / Decisions.
	ApprovalRate float64
	// P50 and P90 are the nearest-rank percentiles of the time from a
	// request's creation to its decision: the smallest time that at least
	// half (nine tenths) of the decisions took no longer than.
	P50, P90 time.Duration
	// FastApprovals are the approvals faster than the arguments could be
	// read (Fast).
	FastApprovals int
}

// Tally gathers decisions into Stats, one per decider.
type Tally struct {
	by map[string]*tallied
}

type tallied struct {
	Stats
	took []time.Duration
}

// Add counts one decision.
func (t *Tally) Add(d store.DecidedRequest) {
	if t.by == nil {
		t.by = map[string]*tallied{}
	}
	s := t.by[d.DecidedBy]
	if s == nil {
		s = &tallied{Stats: Stats{DecidedBy: d.DecidedBy, Kind: KindOf(d.DecidedBy)}}
		t.by[d.DecidedBy] = s
	}
	took := max(d.DecidedAt.Sub(d.CreatedAt), 0)
	s.Decisions++
	s.took = append(s.took, took)
	if d.State == "approved" {
		s.Approvals++
		if Fast(took, d.ArgumentsBytes) {
			s.FastApprovals++
		}
	} else {
		s.Denials++
	}
}

// Stats returns each decider's, the most decisions first, then by
// decider.
func (t *Tally) Stats() []Stats {
	out := make([]Stats, 0, len(t.by))
	for _, s := range t.by {
		slices.Sort(s.took)
		s.P50, s.P90 = percentile(s.took, 50), percentile(s.took, 90)
		s.ApprovalRate = float64(s.Approvals) / float64(s.Decisions)
		out = append(out, s.Stats)
	}
	slices.SortFunc(out, func(a, b Stats) int {
		if a.Decisions != b.Decisions {
			return b.Decisions - a.Decisions
		}
		return strings.Compare(a.DecidedBy, b.DecidedBy)
	})
	return out
}

// percentile is the nearest-rank p-th percentile of sorted: the element
// at rank ceil(p/100 × n).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

// ParseSince reads a window (GET /v1/reviewers/{p}/stats's since, the
// CLI's --since): whole days as 30d, or a duration as 12h or PT12H.
func ParseSince(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && !strings.ContainsAny(days, "hmsuµn.") {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 366 {
			return 0, fmt.Errorf("%q is not a window: write whole days from 1d to 366d, or a duration such as 12h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return airlock.ParseDuration(s)
}
