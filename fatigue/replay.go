package fatigue

import (
	"context"
	"slices"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/policy"
)

// NoRule names the row of the requests no rule of a replayed policy
// matched: a person would have been asked.
const NoRule = "(no rule matched)"

// ReplayRow is what one rule of a candidate policy would have done to the
// requests it decides, beside what happened to them.
type ReplayRow struct {
	Rule string
	// Action is the rule's action (allow, deny, ask); ask for NoRule.
	Action policy.Action
	// Allow, Deny and Ask count what the rule would have done. A rule
	// whose match failed asks; allow never approves a question.
	Allow, Deny, Ask int
	// Shadow counts the requests the rule matched as a shadow (it
	// decides nothing, and the next rule was tried).
	Shadow int
	// Approved, Denied, Expired and Cancelled (and Pending, not yet
	// decided) count what happened to the requests the rule decides.
	Approved, Denied, Expired, Cancelled, Pending int
	// AllowedDenied are the requests the rule would have allowed that
	// were denied: the dangerous disagreements. DeniedApproved counts
	// those it would have denied that were approved.
	AllowedDenied  []string
	DeniedApproved int
}

// Replayer runs a candidate policy over requests that happened
// (`airlock policy replay`, docs/policy.md "Replay").
type Replayer struct {
	set  *policy.Set
	rows map[string]*ReplayRow
	// Requests counts the requests replayed; Skipped the command
	// proposals, which no policy is given.
	Requests, Skipped int
}

// NewReplayer returns a Replayer of the compiled policy s.
func NewReplayer(s *policy.Set) *Replayer {
	r := &Replayer{set: s, rows: map[string]*ReplayRow{}}
	for _, rule := range s.Rules() {
		r.rows[rule.Name] = &ReplayRow{Rule: rule.Name, Action: rule.Action}
	}
	r.rows[NoRule] = &ReplayRow{Rule: NoRule, Action: policy.ActionAsk}
	return r
}

// Add judges one request as the policy would have at its creation: in
// carries the request, its window, its agent as far as it is known, and
// how to read its instance.
func (r *Replayer) Add(ctx context.Context, in airlock.PolicyInput) {
	req := in.Request
	if req.Proposal != nil && req.Proposal.Command != nil {
		r.Skipped++
		return
	}
	r.Requests++
	out := r.set.Decide(ctx, in)
	for _, name := range out.Shadowed {
		r.rows[name].Shadow++
	}
	name := out.Rule
	if name == "" {
		name = NoRule
	}
	row := r.rows[name]
	switch out.Action {
	case policy.ActionAllow:
		row.Allow++
	case policy.ActionDeny:
		row.Deny++
	default:
		row.Ask++
	}
	switch req.State {
	case airlock.StateApproved:
		row.Approved++
		if out.Action == policy.ActionDeny {
			row.DeniedApproved++
		}
	case airlock.StateDenied:
		row.Denied++
		if out.Action == policy.ActionAllow {
			row.AllowedDenied = append(row.AllowedDenied, req.ID)
		}
	case airlock.StateExpired:
		row.Expired++
	case airlock.StateCancelled:
		row.Cancelled++
	default:
		row.Pending++
	}
}

// Rows are the policy's rules in the file's order, then NoRule; each
// AllowedDenied sorted.
func (r *Replayer) Rows() []ReplayRow {
	out := make([]ReplayRow, 0, len(r.rows))
	for _, rule := range r.set.Rules() {
		out = append(out, *r.rows[rule.Name])
	}
	out = append(out, *r.rows[NoRule])
	for i := range out {
		out[i].AllowedDenied = slices.Sorted(slices.Values(out[i].AllowedDenied))
	}
	return out
}
