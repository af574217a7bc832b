package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/airlockhq/airlock/approvaltoken"
)

// Verifying approval tokens (docs/tokens.md): a tool server that holds an
// approval token checks it against the Airlock server's public keys
// before it runs the call. The keys are fetched from
// /.well-known/jwks.json, which needs no token, and cached.

// keyCacheTTL is how long a fetched key set is used; the server allows
// caching it for five minutes.
const keyCacheTTL = 5 * time.Minute

// keyRefetchEvery bounds the fetches a token naming an unknown key may
// cause: a forged kid in every call must not turn into a fetch per call.
const keyRefetchEvery = 10 * time.Second

// keyCache is the server's key set as last fetched.
type keyCache struct {
	mu      sync.Mutex
	set     *approvaltoken.KeySet
	fetched time.Time
}

// VerifyInput is the call a tool server is about to run, which the token
// must approve.
type VerifyInput struct {
	Tool string
	Args []byte // the arguments as received: any JSON spelling of the approved value
	// Audience, when set, must be the token's aud (an instance's
	// token_audience); a token with an aud is refused without it.
	Audience string
	// Replay, when set, runs each token at most once in this process.
	// Across processes, consume the token at the server instead.
	Replay *approvaltoken.ReplayCache
}

// VerifyApprovalToken checks an approval token for the call in: its
// signature against the server's key set (fetched again when the token
// names a key the cached set lacks), EdDSA only, expiry, audience, tool,
// and the digest of the arguments. The errors wrap approvaltoken's
// sentinels (ErrExpired, ErrArgs, …), so errors.Is tells why.
func (c *Client) VerifyApprovalToken(ctx context.Context, token string, in VerifyInput) (*approvaltoken.Claims, error) {
	kid, err := approvaltoken.KeyIDOf(token)
	if err != nil {
		return nil, err
	}
	set, err := c.keySet(ctx, kid)
	if err != nil {
		return nil, err
	}
	claims, err := set.Verify(token, approvaltoken.Expect{Tool: in.Tool, Args: in.Args, Audience: in.Audience})
	if err != nil {
		return nil, err
	}
	if in.Replay != nil {
		if err := in.Replay.Use(claims, time.Now()); err != nil {
			return nil, err
		}
	}
	return &claims, nil
}

// keySet returns the cached key set, fetching it when it is stale or
// lacks kid (at most every keyRefetchEvery).
func (c *Client) keySet(ctx context.Context, kid string) (*approvaltoken.KeySet, error) {
	k := &c.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	age := time.Since(k.fetched)
	if k.set != nil && age < keyCacheTTL && (k.set.Has(kid) || age < keyRefetchEvery) {
		return k.set, nil
	}
	var raw json.RawMessage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/.well-known/jwks.json", retry: true}, &raw); err != nil {
		if k.set != nil && age < keyCacheTTL {
			return k.set, nil // the server is away: the keys it last served still hold
		}
		return nil, fmt.Errorf("fetch the approval tokens' key set: %w", err)
	}
	set, err := approvaltoken.ParseKeySet(raw)
	if err != nil {
		return nil, &AnswerError{Method: http.MethodGet, Path: "/.well-known/jwks.json", Status: http.StatusOK, Reason: err.Error()}
	}
	k.set, k.fetched = set, time.Now()
	return set, nil
}
