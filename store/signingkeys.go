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
	// EnsureSigningKey makes candidate the newest key, signing from now,
	// unless there is a key already, and returns the newest key either
	// way: of replicas starting at once, one candidate wins and every
	// replica signs with it. A stored candidate appends
	// signing_key.created by actor.
	EnsureSigningKey(ctx context.Context, candidate SigningKey, actor string) (SigningKey, error)
	// RotateSigningKey stores next, published from now and signing from
	// delay after now, and retires the newest key at that same instant,
	// keeping it published for keep more (the longest a token it signed
	// may live), in one transaction, appending signing_key.retired and
	// signing_key.created by actor. It returns next as stored.
	RotateSigningKey(ctx context.Context, next SigningKey, delay, keep time.Duration, actor string) (SigningKey, error)
	// ListSigningKeys lists the published keys: the newest (never
	// retired) first, then the retired ones whose PublishedUntil is
	// ahead, newest first.
	ListSigningKeys(ctx context.Context) ([]SigningKey, error)
}

// SigningKey is an Ed25519 key approval tokens are signed with
// (docs/tokens.md). The store keeps one set for every replica, so a token
// signed by one replica verifies against the key set any replica serves.
type SigningKey struct {
	// ID is the key's "kid": the RFC 7638 thumbprint of its public key.
	ID string
	// Seed is the private key's 32-byte seed. It is never served, and
	// String leaves it out, so a key printed by mistake leaks nothing.
	Seed      []byte
	CreatedAt time.Time
	// ActivatesAt is when the key starts signing: at its creation for
	// the first key; for a rotated-in one, a while after the rotation,
	// once every replica and verifier has seen it.
	ActivatesAt time.Time
	// RetiredAt is when a rotation stops (or stopped) the key signing;
	// nil for the newest key. A retired key never signs again.
	RetiredAt *time.Time
	// PublishedUntil is when the last token the key may have signed
	// expires; the key set lists a retired key until then.
	PublishedUntil *time.Time
}

// SignsAt reports whether the key is the one that signs at now: from
// ActivatesAt until RetiredAt.
func (k SigningKey) SignsAt(now time.Time) bool {
	return !now.Before(k.ActivatesAt) && (k.RetiredAt == nil || now.Before(*k.RetiredAt))
}

// SigningKeySeedSize is the size of an Ed25519 seed (RFC 8032).
const SigningKeySeedSize = 32

// Validate checks what a store needs of k before it writes it.
func (k SigningKey) Validate() error {
	switch {
	case k.ID == "" || len(k.ID) > 128:
		return airlock.Invalid("signing key", "a signing key needs an id of at most 128 bytes")
	case len(k.Seed) != SigningKeySeedSize:
		return airlock.Invalid("signing key", "a signing key's seed has %d bytes, not %d", len(k.Seed), SigningKeySeedSize)
	}
	return nil
}

// String names the key by its id only.
func (k SigningKey) String() string { return "signing key " + k.ID }

// GoString is String for %#v: the seed stays out of every format.
func (k SigningKey) GoString() string { return k.String() }
