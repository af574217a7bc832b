package provider

import (
	"context"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
)

// Passkeys (docs/phone.md, "Passkeys"): a signed-in reviewer registers
// WebAuthn credentials, lists and deletes their own, and signs in with
// one. The inbox speaks WebAuthn; the provider keeps the credentials and
// the ceremonies in progress in the store, so any replica finishes a
// ceremony another began.

// reviewerOnly refuses a caller that is not a reviewer: admins do not
// decide, and passkeys exist to sign decisions and reviewers' sign-ins.
func reviewerOnly(c airlock.Caller) error {
	if c.Role != airlock.RoleReviewer {
		return forbidden("only reviewers register passkeys")
	}
	return nil
}

// RegisterPasskey stores p, a credential the inbox verified, as the
// caller's: its principal and the token the caller is signed in with
// (none for an OIDC reviewer) are the caller's, whatever p says.
func (s *Service) RegisterPasskey(ctx context.Context, c airlock.Caller, p airlock.Passkey) (airlock.Passkey, error) {
	if err := reviewerOnly(c); err != nil {
		return airlock.Passkey{}, err
	}
	p.Principal, p.TokenID = principalOf(c.Token), ""
	if len(c.Token.Hash) > 0 {
		p.TokenID = c.Token.ID
	}
	return s.system.AddPasskey(ctx, p)
}

// ListPasskeys lists the caller's own passkeys, oldest first.
func (s *Service) ListPasskeys(ctx context.Context, c airlock.Caller) ([]airlock.Passkey, error) {
	return s.system.ListPasskeys(ctx, principalOf(c.Token))
}

// DeletePasskey deletes one of the caller's own passkeys; not_found for
// any other.
func (s *Service) DeletePasskey(ctx context.Context, c airlock.Caller, id []byte) error {
	return s.system.DeletePasskey(ctx, principalOf(c.Token), id, c.Token.ID)
}

// Passkey reads a passkey by credential ID, for the inbox to verify an
// assertion with; not_found.
func (s *Service) Passkey(ctx context.Context, id []byte) (airlock.Passkey, error) {
	return s.system.Passkey(ctx, id)
}

// UsePasskey records a verified assertion's counter: unauthorized when it
// did not advance (a replay or a cloned authenticator).
func (s *Service) UsePasskey(ctx context.Context, id []byte, signCount uint32) (airlock.Passkey, error) {
	return s.system.UsePasskey(ctx, id, signCount)
}

// PutPasskeyCeremony keeps a ceremony in progress for ttl, unless maxLive
// are in progress already (unavailable).
func (s *Service) PutPasskeyCeremony(ctx context.Context, c airlock.PasskeyCeremony, ttl time.Duration, maxLive int) error {
	return s.system.PutPasskeyCeremony(ctx, c, ttl, maxLive)
}

// TakePasskeyCeremony takes the ceremony of a challenge hash, once.
func (s *Service) TakePasskeyCeremony(ctx context.Context, challengeHash []byte) (airlock.PasskeyCeremony, error) {
	return s.system.TakePasskeyCeremony(ctx, challengeHash)
}

// StartPasskeyWebSession signs in the owner of p, whose assertion the
// inbox verified and whose use UsePasskey recorded: a session of the token
// p was registered through, which must still be live and a reviewer's, or
// for an OIDC reviewer a session of their profile in the reviewer
// directory, which an admin must not have ended since their last sign-in
// with the identity provider (then they sign in there again).
// unauthorized otherwise.
func (s *Service) StartPasskeyWebSession(ctx context.Context, p airlock.Passkey, idle, max time.Duration) (string, airlock.WebSession, error) {
	if p.TokenID != "" {
		tok, err := s.system.GetToken(ctx, p.TokenID)
		if airlock.ErrorCode(err) == airlock.CodeNotFound || err == nil && (tok.RevokedAt != nil || tok.Role != airlock.RoleReviewer || principalOf(tok) != p.Principal) {
			return "", airlock.WebSession{}, airlock.Errorf(airlock.CodeUnauthorized,
				"the token this passkey was registered with is revoked; sign in with a live token and register the passkey again")
		}
		if err != nil {
			return "", airlock.WebSession{}, err
		}
		return s.StartWebSession(ctx, airlock.Caller{Token: tok}, idle, max)
	}
	profiles, err := s.system.ListReviewerProfiles(ctx)
	if err != nil {
		return "", airlock.WebSession{}, err
	}
	i := slices.IndexFunc(profiles, func(r airlock.ReviewerProfile) bool { return r.Principal == p.Principal })
	if i < 0 || !profiles[i].Active() {
		return "", airlock.WebSession{}, airlock.Errorf(airlock.CodeUnauthorized,
			"an admin ended your sessions: sign in with your identity provider once before using this passkey again")
	}
	r := profiles[i]
	return s.StartOIDCWebSession(ctx, airlock.ReviewerIdentity{Principal: r.Principal, Name: r.Name, Email: r.Email, Groups: r.Groups}, idle, max)
}
