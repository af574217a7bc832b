package provider

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Reviewers and their links (docs/notifications.md, "Slack"): admins link
// a reviewer principal to a Slack user and an email address; a linked
// Slack user decides as that principal.

// Reviewer is a principal that reviews: one with a live reviewer token,
// one with a link, or one the identity provider signed in (an OIDC
// reviewer, in the reviewer directory).
type Reviewer struct {
	Principal string
	// Name is the name of the principal's newest live reviewer token, or
	// an OIDC reviewer's name at their last sign-in; empty when it has
	// neither (a link kept for a principal whose tokens were revoked: it
	// decides nothing until it has one again).
	Name        string
	Tokens      int // live reviewer tokens of the principal
	SlackUserID string
	// Email is the link's address, or else an OIDC reviewer's, from the
	// identity provider's claims.
	Email    string
	LinkedAt *time.Time
	LinkedBy string
	// Groups are the reviewer's groups, as its decisions are judged: an
	// OIDC reviewer's at their last sign-in, in the claim's order, then
	// those the policy file lists the principal in (docs/teams.md), each
	// once; nil when none. SignedInAt is an OIDC reviewer's last sign-in;
	// nil for others.
	Groups     []string
	SignedInAt *time.Time
}

func adminReviewers(c airlock.Caller) error {
	if c.Role != airlock.RoleAdmin {
		return forbidden("only admin tokens manage reviewer links")
	}
	return nil
}

// LinkReviewer replaces principal's link (admins only); both fields
// empty removes it.
func (s *Service) LinkReviewer(ctx context.Context, c airlock.Caller, principal string, in airlock.ReviewerLinkInput) (Reviewer, error) {
	if err := adminReviewers(c); err != nil {
		return Reviewer{}, err
	}
	if err := in.Validate(principal); err != nil {
		return Reviewer{}, err
	}
	st := s.storeFor(c)
	l, err := st.PutReviewerLink(ctx, airlock.ReviewerLink{Principal: principal, SlackUserID: in.SlackUserID, Email: in.Email, UpdatedBy: c.ID})
	if err != nil {
		return Reviewer{}, err
	}
	rs, err := s.reviewers(ctx, st)
	if err != nil {
		return Reviewer{}, err
	}
	for _, r := range rs {
		if r.Principal == principal {
			return r, nil
		}
	}
	return Reviewer{Principal: l.Principal}, nil // unlinked, and no live token
}

// Reviewers lists the reviewers (admins only) by principal.
func (s *Service) Reviewers(ctx context.Context, c airlock.Caller) ([]Reviewer, error) {
	if err := adminReviewers(c); err != nil {
		return nil, err
	}
	return s.reviewers(ctx, s.storeFor(c))
}

func (s *Service) reviewers(ctx context.Context, st store.Store) ([]Reviewer, error) {
	toks, err := st.ListTokens(ctx) // newest first
	if err != nil {
		return nil, err
	}
	links, err := st.ListReviewerLinks(ctx)
	if err != nil {
		return nil, err
	}
	profiles, err := st.ListReviewerProfiles(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]*Reviewer{}
	for _, p := range profiles {
		at := p.SignedInAt
		by[p.Principal] = &Reviewer{Principal: p.Principal, Name: p.Name, Email: p.Email, Groups: p.Groups, SignedInAt: &at}
	}
	for _, t := range toks {
		if t.Role != airlock.RoleReviewer || t.RevokedAt != nil {
			continue
		}
		r := by[t.Principal]
		if r == nil {
			r = &Reviewer{Principal: t.Principal, Name: t.Name}
			by[t.Principal] = r
		}
		if r.Tokens == 0 && r.Name == "" {
			r.Name = t.Name
		}
		r.Tokens++
	}
	for _, l := range links {
		r := by[l.Principal]
		if r == nil {
			r = &Reviewer{Principal: l.Principal}
			by[l.Principal] = r
		}
		at := l.UpdatedAt
		r.SlackUserID, r.LinkedAt, r.LinkedBy = l.SlackUserID, &at, l.UpdatedBy
		if l.Email != "" {
			r.Email = l.Email
		}
	}
	out := make([]Reviewer, 0, len(by))
	for _, r := range by {
		if gs := s.GroupsOf(airlock.Caller{Token: airlock.Token{Principal: r.Principal}, Groups: r.Groups}); len(gs) > 0 {
			r.Groups = gs
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Reviewer) int { return strings.Compare(a.Principal, b.Principal) })
	return out, nil
}

// SlackReviewer returns the caller a Slack user decides as: the newest
// live reviewer token of the principal the user is linked to, or else the
// principal itself when it is an active OIDC reviewer (in the reviewer
// directory, signed in since an admin last ended their sessions: the rule
// mail follows), with the groups of their last sign-in. A user who is not
// linked, or whose principal is neither, is forbidden.
func (s *Service) SlackReviewer(ctx context.Context, slackUserID string) (airlock.Caller, error) {
	l, err := s.system.ReviewerLinkBySlackUser(ctx, slackUserID)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return airlock.Caller{}, forbidden("your Slack account is not linked to an Airlock reviewer; ask an admin to run `airlock reviewers link`")
	}
	if err != nil {
		return airlock.Caller{}, err
	}
	toks, err := s.system.ListTokens(ctx)
	if err != nil {
		return airlock.Caller{}, err
	}
	for _, t := range toks {
		if t.Role == airlock.RoleReviewer && t.RevokedAt == nil && t.Principal == l.Principal {
			return airlock.Caller{Token: t}, nil
		}
	}
	profiles, err := s.system.ListReviewerProfiles(ctx)
	if err != nil {
		return airlock.Caller{}, err
	}
	for _, p := range profiles {
		if p.Principal != l.Principal {
			continue
		}
		if !p.Active() {
			return airlock.Caller{}, forbidden("an admin ended the sessions of the reviewer your Slack account is linked to (%s); they decide again after their next sign-in to the inbox", l.Principal)
		}
		return airlock.Caller{
			Token:  airlock.Token{ID: p.Principal, Name: p.Name, Role: airlock.RoleReviewer, Principal: p.Principal, CreatedAt: p.SignedInAt},
			Groups: p.Groups,
		}, nil
	}
	return airlock.Caller{}, forbidden("the reviewer your Slack account is linked to (%s) has no live reviewer token and has not signed in to the inbox", l.Principal)
}
