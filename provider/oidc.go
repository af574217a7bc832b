package provider

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// OIDC reviewers (docs/teams.md): people the identity provider signs in
// to the inbox, with no token. The inbox speaks OIDC; the provider keeps
// what it vouched for, in the store, so every replica knows it.

// StartOIDCWebSession signs an OIDC reviewer in to the inbox: it stores a
// session of id, lasting idle without activity and max at most, and
// records id in the reviewer directory, in one write. It returns the
// session with its raw ID, which only the browser's cookie keeps.
func (s *Service) StartOIDCWebSession(ctx context.Context, id airlock.ReviewerIdentity, idle, max time.Duration) (string, airlock.WebSession, error) {
	raw := randomSecret()
	ws, err := s.system.CreateWebSession(ctx, store.NewWebSessionParams{ID: raw, Reviewer: &id, CSRF: randomSecret(), Idle: idle, Max: max})
	if err != nil {
		return "", airlock.WebSession{}, err
	}
	return raw, ws, nil
}

// oidcCaller is the caller behind an OIDC reviewer's session: a reviewer
// whose ID and principal are the OIDC principal, so that decided_by is
// the principal, and the self-approval rule compares principals as for
// tokens.
func oidcCaller(ws airlock.WebSession) airlock.Caller {
	return airlock.Caller{
		Token:  airlock.Token{ID: ws.Principal, Name: ws.Name, Role: airlock.RoleReviewer, Principal: ws.Principal, CreatedAt: ws.CreatedAt},
		Groups: ws.Groups,
	}
}

// PutOIDCLogin records a sign-in in progress for ttl, unless maxLive are
// in progress already (unavailable).
func (s *Service) PutOIDCLogin(ctx context.Context, l airlock.OIDCLogin, ttl time.Duration, maxLive int) error {
	return s.system.PutOIDCLogin(ctx, l, ttl, maxLive)
}

// TakeOIDCLogin takes the sign-in in progress of a state, once: not_found
// when there is none, it is over, or it was taken already.
func (s *Service) TakeOIDCLogin(ctx context.Context, state string) (airlock.OIDCLogin, error) {
	return s.system.TakeOIDCLogin(ctx, airlock.HashSecret(state))
}

// EndReviewerSessions ends every inbox session of a principal (admins
// only), on every replica at its next request: an OIDC reviewer's
// revocation, since they have no token to revoke. It appends
// reviewer.sessions_ended, and returns how many sessions it ended.
func (s *Service) EndReviewerSessions(ctx context.Context, c airlock.Caller, principal string) (int, error) {
	if c.Role != airlock.RoleAdmin {
		return 0, forbidden("only admin tokens end reviewers' sessions")
	}
	if principal == "" || len(principal) > airlock.MaxPrincipalLen {
		return 0, airlock.Invalid("principal", "name the principal whose sessions to end (1 to %d bytes)", airlock.MaxPrincipalLen)
	}
	return s.storeFor(c).DeleteWebSessions(ctx, store.WebSessionFilter{Principal: principal, Actor: c.ID})
}
