package provider

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// The inbox's sign-ins (docs/inbox.md, "Sessions"), kept in the store so
// that any replica serves any reviewer.

// StartWebSession signs c in to the inbox: it stores a session of c's
// token, lasting idle without activity and max at most, and returns the
// session with its raw ID, which only the browser's cookie keeps.
// unauthorized when the token was revoked meanwhile.
func (s *Service) StartWebSession(ctx context.Context, c airlock.Caller, idle, max time.Duration) (string, airlock.WebSession, error) {
	if c.Role != airlock.RoleReviewer && c.Role != airlock.RoleAdmin {
		return "", airlock.WebSession{}, forbidden("only reviewer and admin tokens sign in to the inbox")
	}
	id := randomSecret()
	ws, err := s.system.CreateWebSession(ctx, store.NewWebSessionParams{ID: id, Token: c.Token, CSRF: randomSecret(), Idle: idle, Max: max})
	if err != nil {
		return "", airlock.WebSession{}, err
	}
	return id, ws, nil
}

// WebSession looks up the live session of a raw ID and its reviewer, in
// one read of the store, on every inbox request: not_found when there is
// none or it is over, unauthorized when its token was revoked. An OIDC
// reviewer's session has no token: its caller is a reviewer named by the
// session's principal, with the session's groups.
func (s *Service) WebSession(ctx context.Context, id string) (airlock.WebSession, airlock.Caller, error) {
	if id == "" {
		return airlock.WebSession{}, airlock.Caller{}, airlock.NotFound("web session", "of this cookie")
	}
	ws, tok, err := s.system.WebSessionByID(ctx, id)
	if err != nil {
		return airlock.WebSession{}, airlock.Caller{}, err
	}
	if ws.TokenID == "" {
		return ws, oidcCaller(ws), nil
	}
	return ws, airlock.Caller{Token: tok}, nil
}

// TouchWebSession records a session's activity, moving its idle end, when
// it was last recorded at least every ago (one write a minute for a busy
// reviewer, not one a page).
func (s *Service) TouchWebSession(ctx context.Context, id string, every time.Duration) (airlock.WebSession, bool, error) {
	return s.system.TouchWebSession(ctx, id, every)
}

// EndWebSession ends a session (sign-out), on every replica at once.
func (s *Service) EndWebSession(ctx context.Context, id string) error {
	return s.system.DeleteWebSession(ctx, id)
}

// SweepWebSessions deletes up to limit sessions that are over.
func (s *Service) SweepWebSessions(ctx context.Context, limit int) (int, error) {
	return s.system.SweepWebSessions(ctx, limit)
}

// randomSecret returns 32 random bytes, base64url-encoded.
func randomSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
