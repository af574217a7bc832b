package airlock

import (
	"context"
	"sync/atomic"
)

// A TokenCheck is the check, not yet made, that the token a call was
// authenticated with is still live: known, not revoked, and as the copy
// the provider holds in memory says. A store with a TokenChecker
// makes it with the call's first statements, in the same round trip, and
// fails the call as unauthorized before any of its effects when the token
// is not live. So a call authenticated from memory costs no round trip of
// its own, and a revoked token still stops working at once, on every
// replica.
type TokenCheck struct {
	token Token
	state atomic.Int32 // checkPending, checkPassed or checkFailed
}

const (
	checkPending int32 = iota
	checkPassed
	checkFailed
)

type tokenCheckKey struct{}

// WithTokenCheck returns ctx carrying a pending check of t.
func WithTokenCheck(ctx context.Context, t Token) (context.Context, *TokenCheck) {
	c := &TokenCheck{token: t}
	return context.WithValue(ctx, tokenCheckKey{}, c), c
}

// TokenCheckFrom returns ctx's check, made or not; nil when ctx has none.
func TokenCheckFrom(ctx context.Context) *TokenCheck {
	c, _ := ctx.Value(tokenCheckKey{}).(*TokenCheck)
	return c
}

// PendingTokenCheck returns ctx's check while it is still to be made, else
// nil.
func PendingTokenCheck(ctx context.Context) *TokenCheck {
	c := TokenCheckFrom(ctx)
	if c == nil || c.state.Load() != checkPending {
		return nil
	}
	return c
}

// Token is the token the check is of, as the caller knows it.
func (c *TokenCheck) Token() Token { return c.token }

// Pass records that the store found the token live.
func (c *TokenCheck) Pass() { c.state.CompareAndSwap(checkPending, checkPassed) }

// Fail records that the store found the token not live, and returns the
// error the call fails with.
func (c *TokenCheck) Fail() error {
	c.state.Store(checkFailed)
	return TokenRefused()
}

// Outcome says whether the check was made, and if so whether it passed.
func (c *TokenCheck) Outcome() (made, passed bool) {
	s := c.state.Load()
	return s != checkPending, s == checkPassed
}

// TokenChecker is the part of a store (StoreExtras.TokenCheck) that
// makes the pending TokenCheck of a call's context (PendingTokenCheck) in
// the first round trip of any call the store serves, before the call's
// effects, and fails the call with TokenRefused when the token is not
// live.
type TokenChecker interface {
	// CheckToken makes ctx's pending check now, in a round trip of its
	// own, for a call that made no other; nil when none is pending.
	CheckToken(ctx context.Context) error
}

// TokenRefused is the error of a call whose token is unknown or revoked.
func TokenRefused() *Error {
	return Errorf(CodeUnauthorized, "unknown or revoked token: send a valid one as Authorization: Bearer <token> (an admin can mint one)")
}
