package provider

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
)

func TestSigningKeys(t *testing.T) {
	b := setup(t, options{})
	ctx := t.Context()
	if err := b.svc.LoadSigningKeys(ctx); err != nil {
		t.Fatal(err)
	}
	first := b.svc.keys.active
	// A second start, as another replica, signs with the same key.
	if err := b.svc.LoadSigningKeys(ctx); err != nil || b.svc.keys.active.ID != first.ID {
		t.Fatalf("second load: %v, key %s; want %s", err, b.svc.keys.active, first)
	}
	pub, err := b.svc.PublicKeys(ctx)
	if err != nil || len(pub) != 1 || pub[0].KeyID != first.ID || !pub[0].IsPublic() {
		t.Fatalf("PublicKeys = %v, %v; want the public half of %s", pub, err, first)
	}

	if _, err := b.svc.RotateSigningKey(ctx, b.reviewer); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("a reviewer's rotation: %v; want forbidden", err)
	}
	next, err := b.svc.RotateSigningKey(ctx, b.admin)
	if err != nil {
		t.Fatal(err)
	}
	if next.ID == first.ID || next.Seed != nil || b.svc.keys.active.ID != next.ID {
		t.Fatalf("rotation gave %s (seed served: %v), signing with %s; want a new key", next, next.Seed != nil, b.svc.keys.active)
	}
	keys, err := b.svc.SigningKeys(ctx, b.admin)
	if err != nil || len(keys) != 2 || keys[0].ID != next.ID || keys[1].ID != first.ID {
		t.Fatalf("SigningKeys = %v, %v; want the new key, then the old", keys, err)
	}
	for _, k := range keys {
		if k.Seed != nil {
			t.Fatalf("SigningKeys serves the seed of %s", k)
		}
	}
	// The old key is published until its last token expires.
	want := epoch.Add(b.svc.limits.MaxApprovalValidity + approvaltoken.DefaultLeeway)
	if !keys[1].PublishedUntil.Equal(want) {
		t.Fatalf("old key published until %s; want %s", keys[1].PublishedUntil, want)
	}
	b.clock.Advance(b.svc.limits.MaxApprovalValidity + approvaltoken.DefaultLeeway + time.Microsecond)
	if pub, err := b.svc.PublicKeys(ctx); err != nil || len(pub) != 1 || pub[0].KeyID != next.ID {
		t.Fatalf("PublicKeys after the old key's tokens expired = %v, %v; want only %s", pub, err, next.ID)
	}
}

func TestFixedSigningKey(t *testing.T) {
	fixed, err := approvaltoken.NewKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, options{})
	b.svc.keys.fixed = &fixed
	ctx := t.Context()
	if err := b.svc.LoadSigningKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if pub, err := b.svc.PublicKeys(ctx); err != nil || len(pub) != 1 || pub[0].KeyID != fixed.ID {
		t.Fatalf("PublicKeys = %v, %v; want only the fixed key", pub, err)
	}
	if _, err := b.svc.RotateSigningKey(ctx, b.admin); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("rotation with a fixed key: %v; want invalid_request", err)
	}
	if stored, err := b.store.ListSigningKeys(ctx); err != nil || len(stored) != 0 {
		t.Fatalf("a fixed key stored keys: %v, %v", stored, err)
	}
}
