package store

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// SigningKeys keeps the keys approval tokens are signed with: one set for
// every replica sharing the store (docs/tokens.md). Times are the
// store's clock.
type SigningKeys interface {
	// EnsureSigningKey makes candidate the active key unless a key is
	// active already, and returns the active key either way: of replicas
	// starting at once, one candidate wins and every replica signs with
	// it. A stored candidate appends signing_key.created by actor.
	EnsureSigningKey(ctx context.Context, candidate airlock.SigningKey, actor string) (airlock.SigningKey, error)
	// RotateSigningKey retires the active key, if any, keeping it
	// published for keep more (the longest a token it signed may live),
	// and makes next the active key, in one transaction, appending
	// signing_key.retired and signing_key.created by actor. It returns
	// next as stored.
	RotateSigningKey(ctx context.Context, next airlock.SigningKey, keep time.Duration, actor string) (airlock.SigningKey, error)
	// ListSigningKeys lists the published keys: the active one first,
	// then the retired ones whose PublishedUntil is ahead, newest first.
	ListSigningKeys(ctx context.Context) ([]airlock.SigningKey, error)
}
