package airlock

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Limits of reviewer groups (docs/teams.md, "Groups, routing and quorum").
const (
	// MaxGroupNameLen bounds a group's name, which every surface shows:
	// the same bound as a group an identity provider brings.
	MaxGroupNameLen = MaxReviewerGroupLen
	// MaxRoutedGroups is the most groups one request may be routed (or
	// escalated) to.
	MaxRoutedGroups = 20
	// MaxApprovals is the most approvals a request may need.
	MaxApprovals = 20
)

// EventRequestVoted is the audit event of a vote on a request that needs
// several approvals (Request.Approvals > 1) and that did not end it: the
// vote that completes the quorum, or a denial, is the request's
// request.approved or request.denied event.
const EventRequestVoted EventType = "request.voted"

// EventRequestEscalated is appended once, when a pending request routed to
// groups is widened to its escalation groups (Store.EscalateDue).
const EventRequestEscalated EventType = "request.escalated"

// ActorEscalation is the actor of an escalation.
const ActorEscalation = "system:escalation"

// Vote is one reviewer's vote on a request that needs several approvals.
type Vote struct {
	// Principal is who voted; a principal votes once per request.
	Principal string
	// Actor is the token (or sign-in) the vote came through, and Name the
	// name people read it by (Actor itself when it names no token).
	Actor  string
	Name   string
	Status State // approved or denied
	Note   string
	At     time.Time
}

// CheckGroupName refuses a group name no surface can show safely, as
// ValidGroupName judges it (the same rule as for the groups an identity
// provider brings): empty, over MaxGroupNameLen bytes, not UTF-8, or with
// a control, invisible or bidirectional character.
func CheckGroupName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a group name may not be empty")
	case len(name) > MaxGroupNameLen:
		return fmt.Errorf("group name %.20q… is %d bytes; at most %d", name, len(name), MaxGroupNameLen)
	case !ValidGroupName(name):
		return fmt.Errorf("group name %q is not valid UTF-8 or has a control, invisible or bidirectional character; names are shown to people and must read as what they are", name)
	}
	return nil
}

// NeedsQuorum reports whether r is decided by votes: it needs more than one
// approval.
func (r Request) NeedsQuorum() bool { return r.Approvals > 1 }

// QuorumRequests finds those of rs that need several approvals: their IDs,
// and where each is in rs. A store reads their votes in one query.
func QuorumRequests(rs []Request) (ids []string, at map[string]int) {
	at = map[string]int{}
	for i, r := range rs {
		if r.NeedsQuorum() {
			at[r.ID] = i
			ids = append(ids, r.ID)
		}
	}
	return ids, at
}

// ApprovalsRequired is how many approvals r needs: at least 1.
func (r Request) ApprovalsRequired() int { return max(r.Approvals, 1) }

// ApprovedVotes counts the approving votes in r.Votes.
func (r Request) ApprovedVotes() int {
	n := 0
	for _, v := range r.Votes {
		if v.Status == StateApproved {
			n++
		}
	}
	return n
}

// MayDecide reports whether a caller in groups may decide r: r is routed
// to no group, or groups has one of r's.
func (r Request) MayDecide(groups []string) bool {
	if len(r.Reviewers) == 0 {
		return true
	}
	for _, g := range groups {
		if slices.Contains(r.Reviewers, g) {
			return true
		}
	}
	return false
}

// RoutingRefusal is the error of a decision by a caller in none of r's
// reviewer groups.
func (r Request) RoutingRefusal() *Error {
	return Errorf(CodeForbidden, "request %s is for %s: only members of %s may decide it; others may read it",
		r.ID, strings.Join(r.Reviewers, ", "), groupWord(len(r.Reviewers)))
}

func groupWord(n int) string {
	if n == 1 {
		return "that group"
	}
	return "those groups"
}

// DuplicateVote is the error of a second vote by one principal on r.
func (r Request) DuplicateVote(principal string) *Error {
	return Errorf(CodeForbidden,
		"%s has already voted on request %s; each reviewer votes once, and %d approvals from different people are needed", principal, r.ID, r.ApprovalsRequired())
}

// QuorumProgress says how far a request needing need approvals has come,
// as every surface shows it: "1 of 2 approvals (Ada)", naming who
// approved, in the order they did.
func QuorumProgress(need int, approvedBy []string) string {
	s := fmt.Sprintf("%d of %d approvals", len(approvedBy), need)
	if len(approvedBy) > 0 {
		s += " (" + strings.Join(approvedBy, ", ") + ")"
	}
	return s
}

// QuorumProgress is QuorumProgress for r's votes.
func (r Request) QuorumProgress() string {
	var names []string
	for _, v := range r.Votes {
		if v.Status == StateApproved {
			names = append(names, v.Name)
		}
	}
	return QuorumProgress(r.ApprovalsRequired(), names)
}
