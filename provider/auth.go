package provider

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
)

// AuthenticateHash returns the token whose secret hashes to hash. The web
// inbox calls it directly: its sign-in sessions keep only the hash of the
// reviewer's token, never the secret, and re-check it on every request, so
// a revoked token stops working at its next page. Unknown and revoked
// tokens are unauthorized. On stores with a token stamp the tokens are
// cached between calls (tokencache.go), still failing at the next call once
// revoked.
func (s *Service) AuthenticateHash(ctx context.Context, hash []byte) (airlock.Caller, error) {
	if len(hash) == 0 {
		return airlock.Caller{}, airlock.TokenRefused()
	}
	t, err := s.tokens.lookup(hash, func() (airlock.Token, error) { return s.system.TokenByHash(ctx, hash) })
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return airlock.Caller{}, airlock.TokenRefused()
	}
	if err != nil {
		return airlock.Caller{}, fmt.Errorf("authenticate: %w", err)
	}
	if t.RevokedAt != nil {
		return airlock.Caller{}, airlock.TokenRefused()
	}
	return airlock.Caller{Token: t}, nil
}
