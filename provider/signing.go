package provider

import (
	"context"
	"fmt"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/go-jose/go-jose/v4"
)

// Approval tokens' signing keys (docs/tokens.md). Every replica signs with
// the store's active key, created at the first start, unless the server
// was given a key of its own (Config.SigningKey, --signing-key-file). The
// public key set lists every key a live token may name.

// signingKeys is the service's view of the keys.
type signingKeys struct {
	// fixed is Config.SigningKey: when set, the store's keys are unused.
	fixed *approvaltoken.Key

	mu     sync.Mutex
	active approvaltoken.Key // the key LoadSigningKeys or a rotation last saw active
}

// LoadSigningKeys makes sure a signing key exists and takes the active
// one: the fixed key when the server has one, else the store's, created
// now if no replica made one before.
func (s *Service) LoadSigningKeys(ctx context.Context) error {
	if s.keys.fixed != nil {
		s.keys.set(*s.keys.fixed)
		return nil
	}
	candidate, err := approvaltoken.Generate()
	if err != nil {
		return err
	}
	stored, err := s.system.EnsureSigningKey(ctx, storedKey(candidate), "system:start")
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	k, err := signingKey(stored)
	if err != nil {
		return err
	}
	s.keys.set(k)
	return nil
}

func (k *signingKeys) set(key approvaltoken.Key) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.active = key
}

// PublicKeys returns the public half of every key a live token may name:
// the fixed key, or the store's published keys, the active one first.
func (s *Service) PublicKeys(ctx context.Context) ([]jose.JSONWebKey, error) {
	if s.keys.fixed != nil {
		return []jose.JSONWebKey{s.keys.fixed.Public()}, nil
	}
	stored, err := s.system.ListSigningKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]jose.JSONWebKey, 0, len(stored))
	for _, sk := range stored {
		k, err := signingKey(sk)
		if err != nil {
			return nil, err
		}
		out = append(out, k.Public())
	}
	return out, nil
}

// SigningKeys lists the store's published keys, without their seeds
// (admins only).
func (s *Service) SigningKeys(ctx context.Context, c airlock.Caller) ([]airlock.SigningKey, error) {
	if c.Role != airlock.RoleAdmin {
		return nil, forbidden("only admin tokens manage signing keys")
	}
	if s.keys.fixed != nil {
		return []airlock.SigningKey{{ID: s.keys.fixed.ID}}, nil
	}
	keys, err := s.storeFor(c).ListSigningKeys(ctx)
	for i := range keys {
		keys[i].Seed = nil
	}
	return keys, err
}

// RotateSigningKey starts signing with a new key (admins only). The old
// key stays published until every token it signed has expired: approval
// tokens expire with their approval, at most MaxApprovalValidity after
// it, and verifiers allow the leeway.
func (s *Service) RotateSigningKey(ctx context.Context, c airlock.Caller) (airlock.SigningKey, error) {
	if c.Role != airlock.RoleAdmin {
		return airlock.SigningKey{}, forbidden("only admin tokens manage signing keys")
	}
	if s.keys.fixed != nil {
		return airlock.SigningKey{}, airlock.Errorf(airlock.CodeInvalidRequest,
			"this server signs with the key of --signing-key-file: to rotate, publish the new key's file and restart")
	}
	next, err := approvaltoken.Generate()
	if err != nil {
		return airlock.SigningKey{}, err
	}
	keep := s.limits.MaxApprovalValidity + approvaltoken.DefaultLeeway
	stored, err := s.storeFor(c).RotateSigningKey(ctx, storedKey(next), keep, c.ID)
	if err != nil {
		return airlock.SigningKey{}, err
	}
	s.keys.set(next)
	stored.Seed = nil
	return stored, nil
}

// storedKey is k as the store keeps it.
func storedKey(k approvaltoken.Key) airlock.SigningKey {
	return airlock.SigningKey{ID: k.ID, Seed: k.Private.Seed()}
}

// signingKey is a stored key, checked against its id: a row whose seed
// does not make its kid was changed outside Airlock.
func signingKey(sk airlock.SigningKey) (approvaltoken.Key, error) {
	k, err := approvaltoken.FromSeed(sk.Seed)
	if err != nil {
		return approvaltoken.Key{}, fmt.Errorf("%s: %w", sk, err)
	}
	if k.ID != sk.ID {
		return approvaltoken.Key{}, fmt.Errorf("%s: its seed makes key id %s: the stored key was changed", sk, k.ID)
	}
	return k, nil
}
