package airlock

import (
	"sync/atomic"
)

// A TokenCheck is the check, not yet made, that the token a call was
// authenticated with is still live: known, not revoked, and as the copy
// the provider holds in memory says. It travels with the call's Caller
// (Caller.Check), and the call's store is the view TokenChecker.Checking
// returns for it, which makes the check with the call's first statements,
// in the same round trip, and fails the call as unauthorized before any of
// its effects when the token is not live. So a call authenticated from
// memory costs no round trip of its own, and a revoked token still stops
// working at once, on every replica.
type TokenCheck struct {
	token Token
	state atomic.Int32 // checkPending, checkPassed or checkFailed
}

const (
	checkPending int32 = iota
	checkPassed
	checkFailed
)

// NewTokenCheck returns a pending check of t.
func NewTokenCheck(t Token) *TokenCheck { return &TokenCheck{token: t} }

// Token is the token the check is of, as the caller knows it.
func (c *TokenCheck) Token() Token { return c.token }

// Pending says whether the check is still to be made.
func (c *TokenCheck) Pending() bool { return c.state.Load() == checkPending }

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

// TokenRefused is the error of a call whose token is unknown or revoked.
func TokenRefused() *Error {
	return Errorf(CodeUnauthorized, "unknown or revoked token: send a valid one as Authorization: Bearer <token> (an admin can mint one)")
}
