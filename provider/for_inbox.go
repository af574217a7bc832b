package provider

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
)

// AuthenticateHash returns the token whose secret hashes to hash, for the
// web inbox: its sign-in sessions keep only the hash of the reviewer's
// token, never the secret, and re-check it on every request, so a revoked
// token stops working at its next page. Unknown and revoked tokens are
// unauthorized, as with Authenticate.
func (s *Service) AuthenticateHash(ctx context.Context, hash []byte) (airlock.Caller, error) {
	unauthorized := airlock.Errorf(airlock.CodeUnauthorized, "unknown or revoked token: sign in again with a valid token")
	if len(hash) == 0 {
		return airlock.Caller{}, unauthorized
	}
	t, err := s.store.TokenByHash(ctx, hash)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return airlock.Caller{}, unauthorized
	}
	if err != nil {
		return airlock.Caller{}, fmt.Errorf("authenticate: %w", err)
	}
	if t.RevokedAt != nil {
		return airlock.Caller{}, unauthorized
	}
	return t, nil
}
