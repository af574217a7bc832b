package store

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// PushKeys keeps the server's VAPID key pair (RFC 8292), which signs
// every Web Push it sends (docs/phone.md): one pair for every replica
// sharing the store, since a browser's subscription names the public key
// it was made with, and a push signed by any other is refused.
type PushKeys interface {
	// EnsureVAPIDKey stores candidate unless a key is stored already, and
	// returns the stored key either way: of replicas starting at once,
	// one candidate wins and every replica pushes with it. A stored
	// candidate appends vapid_key.created by actor.
	EnsureVAPIDKey(ctx context.Context, candidate VAPIDKey, actor string) (VAPIDKey, error)
	// VAPIDKey reads the stored key; not_found when there is none.
	VAPIDKey(ctx context.Context) (VAPIDKey, error)
}

// VAPIDKey is a P-256 key pair pushes are signed with (ES256).
type VAPIDKey struct {
	// Private is the private scalar (32 bytes). It is never served, and
	// String leaves it out, so a key printed by mistake leaks nothing.
	Private []byte
	// Public is the uncompressed public point (65 bytes): the
	// applicationServerKey a browser subscribes with.
	Public    []byte
	CreatedAt time.Time
}

// Validate checks what a store needs of k before it writes it.
func (k VAPIDKey) Validate() error {
	switch {
	case len(k.Private) != 32:
		return airlock.Invalid("vapid key", "a VAPID private key has %d bytes, not 32", len(k.Private))
	case len(k.Public) != 65 || k.Public[0] != 4:
		return airlock.Invalid("vapid key", "a VAPID public key is an uncompressed P-256 point of 65 bytes")
	}
	return nil
}

// String names the key by its public half only.
func (k VAPIDKey) String() string { return "VAPID key " + airlock.EncodePushKey(k.Public) }

// GoString is String for %#v: the private key stays out of every format.
func (k VAPIDKey) GoString() string { return k.String() }
