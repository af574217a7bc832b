package provider

import (
	"context"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// rememberedTokens keeps the tokens callers presented, by secret hash, for
// a store that checks tokens itself (store.Extras.TokenCheck). Unlike
// tokenCache it never vouches for a token: a caller authenticated from it
// carries an airlock.TokenCheck, which the store makes with the call's
// first statement, in the same round trip, before the call's effects. So
// remembering saves the lookup's round trip, not the check, and a token
// revoked on any replica fails at its next call on every one.
type rememberedTokens struct {
	checker store.TokenChecker

	mu      sync.Mutex
	entries map[[32]byte]airlock.Token
}

// rememberedMax bounds the tokens remembered; at it, they start over.
const rememberedMax = 10_000

func newRememberedTokens(checker store.TokenChecker) *rememberedTokens {
	if checker == nil {
		return nil
	}
	return &rememberedTokens{checker: checker, entries: map[[32]byte]airlock.Token{}}
}

func (m *rememberedTokens) get(hash []byte) (airlock.Token, bool) {
	if len(hash) != 32 {
		return airlock.Token{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.entries[[32]byte(hash)]
	return t, ok
}

func (m *rememberedTokens) put(t airlock.Token) {
	if len(t.Hash) != 32 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.entries) >= rememberedMax {
		clear(m.entries)
	}
	m.entries[[32]byte(t.Hash)] = t
}

func (m *rememberedTokens) forget(hash []byte) {
	if len(hash) != 32 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, [32]byte(hash))
}

// AuthenticateDeferred is Authenticate for a call whose every effect goes
// through the store and whose answer is written only after
// FinishTokenCheck (rest's authenticated endpoints). On a store that checks
// tokens itself, a token this process has seen is taken from memory, and
// the returned caller carries the check that it is still live
// (Caller.Check), which the call's store (storeFor) makes with the call's
// first statement; otherwise it is Authenticate.
func (s *Service) AuthenticateDeferred(ctx context.Context, secret string) (airlock.Caller, error) {
	if s.remembered == nil || secret == "" {
		return s.Authenticate(ctx, secret)
	}
	hash := airlock.HashSecret(secret)
	if t, ok := s.remembered.get(hash); ok {
		return airlock.Caller{Token: t, Check: airlock.NewTokenCheck(t)}, nil
	}
	c, err := s.AuthenticateHash(ctx, hash)
	if err == nil {
		s.remembered.put(c.Token)
	}
	return c, err
}

// FinishTokenCheck makes the token check of a caller authenticated by
// AuthenticateDeferred (c.Check), when the call's store statements did not
// (a call that made none, or failed before its first), and says whether
// the token passed: TokenRefused when it is not live. A call must not
// answer before it returns nil; for a caller without a check it returns
// nil at once.
func (s *Service) FinishTokenCheck(ctx context.Context, c airlock.Caller) error {
	check := c.Check
	if check == nil {
		return nil
	}
	if s.remembered == nil {
		// A check this provider did not make: look the token up instead.
		_, err := s.AuthenticateHash(ctx, c.Hash)
		return err
	}
	if check.Pending() {
		if err := s.remembered.checker.CheckToken(ctx, check); err != nil && airlock.ErrorCode(err) != airlock.CodeUnauthorized {
			return err
		}
	}
	if _, passed := check.Outcome(); !passed {
		s.remembered.forget(check.Token().Hash)
		return airlock.TokenRefused()
	}
	return nil
}

// storeFor returns the store that serves c's call: for a caller taken from
// memory (c.Check), the view of the store that makes c's token check with
// the call's first statement; for any other, the store. Every call made
// for a caller goes through it; s.system serves the work no caller asks
// for.
func (s *Service) storeFor(c airlock.Caller) store.Store {
	if c.Check == nil || s.remembered == nil {
		return s.system
	}
	return s.remembered.checker.Checking(c.Check)
}
