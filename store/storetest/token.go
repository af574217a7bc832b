package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// testTokens checks token storage: by hash, revocable, re-installable.
func (s *suite) testTokens(t *testing.T) {
	runAll(t, []test{
		{"create, find, list, revoke", s.tokensRoundTrip},
		{"put installs and reinstalls", s.tokensPut},
	})
}

func (s *suite) tokensRoundTrip(t *testing.T) {
	b := s.setup(t)
	secret := airlock.NewTokenSecret()
	agent := airlock.Token{ID: "tok_a", Name: "ci agent ⚙", Role: airlock.RoleAgent, Scopes: []string{airlock.ScopeWorkWrite},
		Principal: "alice", Hash: airlock.HashSecret(secret), CreatedAt: epoch.Truncate(time.Microsecond), CreatedBy: "tok_admin"}
	wantOK(t, b.store.CreateToken(b.ctx, agent))
	b.clock.Advance(time.Second)
	rev := airlock.Token{ID: "tok_r", Name: "bob", Role: airlock.RoleReviewer, Hash: airlock.HashSecret("other"),
		CreatedAt: epoch.Add(time.Second).Truncate(time.Microsecond), CreatedBy: "tok_admin"}
	wantOK(t, b.store.CreateToken(b.ctx, rev))

	got, err := b.store.TokenByHash(b.ctx, airlock.HashSecret(secret))
	wantOK(t, err)
	if show(got) != show(agent) {
		t.Fatalf("TokenByHash = %s, want %s", show(got), show(agent))
	}
	got, err = b.store.GetToken(b.ctx, "tok_r")
	wantOK(t, err)
	if got.Principal != "tok_r" || got.Scopes != nil || got.RevokedAt != nil {
		t.Fatalf("GetToken = %s, want principal defaulted to its ID, no scopes", show(got))
	}
	list, err := b.store.ListTokens(b.ctx)
	wantOK(t, err)
	if names := []string{list[0].ID, list[1].ID}; len(list) != 2 || !slices.Equal(names, []string{"tok_r", "tok_a"}) {
		t.Fatalf("ListTokens = %s, want tok_r then tok_a", show(list))
	}
	_, err = b.store.TokenByHash(b.ctx, airlock.HashSecret("nope"))
	wantErr(t, err, airlock.CodeNotFound, "")
	_, err = b.store.GetToken(b.ctx, "tok_missing")
	wantErr(t, err, airlock.CodeNotFound, "")

	revokedAt := b.clock.Advance(time.Minute).Truncate(time.Microsecond)
	got, err = b.store.RevokeToken(b.ctx, "tok_a", "tok_admin")
	wantOK(t, err)
	if got.RevokedAt == nil || !got.RevokedAt.Equal(revokedAt) {
		t.Fatalf("RevokedAt = %v, want %v", got.RevokedAt, revokedAt)
	}
	// A revoked token is still found by its hash: the caller refuses it.
	got, err = b.store.TokenByHash(b.ctx, airlock.HashSecret(secret))
	wantOK(t, err)
	if got.RevokedAt == nil {
		t.Fatal("TokenByHash lost the revocation")
	}
	b.clock.Advance(time.Minute)
	got, err = b.store.RevokeToken(b.ctx, "tok_a", "tok_admin")
	wantOK(t, err)
	if !got.RevokedAt.Equal(revokedAt) {
		t.Fatalf("second revocation moved RevokedAt to %v, want %v", got.RevokedAt, revokedAt)
	}
	_, err = b.store.RevokeToken(b.ctx, "tok_missing", "tok_admin")
	wantErr(t, err, airlock.CodeNotFound, "")

	created, revoked := b.eventsOf(t, airlock.EventTokenCreated), b.eventsOf(t, airlock.EventTokenRevoked)
	if len(created) != 2 || len(revoked) != 1 || revoked[0].TokenID != "tok_a" || revoked[0].Actor != "tok_admin" {
		t.Fatalf("%d token.created events and token.revoked %+v; want 2, and one of tok_a by tok_admin", len(created), revoked)
	}
}

func (s *suite) tokensPut(t *testing.T) {
	b := s.setup(t)
	admin := airlock.Token{ID: "tok_boot", Name: "bootstrap admin", Role: airlock.RoleAdmin, Hash: airlock.HashSecret("first"), CreatedBy: "system"}
	wantOK(t, b.store.PutToken(b.ctx, admin))
	got, err := b.store.TokenByHash(b.ctx, airlock.HashSecret("first"))
	wantOK(t, err)
	if got.ID != "tok_boot" || got.Role != airlock.RoleAdmin || !got.CreatedAt.Equal(epoch.Truncate(time.Microsecond)) {
		t.Fatalf("PutToken stored %s", show(got))
	}
	_, err = b.store.RevokeToken(b.ctx, "tok_boot", "tok_boot")
	wantOK(t, err)

	b.clock.Advance(time.Hour)
	admin.Hash = airlock.HashSecret("second")
	wantOK(t, b.store.PutToken(b.ctx, admin))
	got, err = b.store.TokenByHash(b.ctx, airlock.HashSecret("second"))
	wantOK(t, err)
	if got.RevokedAt != nil || !got.CreatedAt.Equal(epoch.Truncate(time.Microsecond)) {
		t.Fatalf("after a second PutToken: %s, want revocation cleared and creation time kept", show(got))
	}
	_, err = b.store.TokenByHash(b.ctx, airlock.HashSecret("first"))
	wantErr(t, err, airlock.CodeNotFound, "")
	list, err := b.store.ListTokens(b.ctx)
	wantOK(t, err)
	if len(list) != 1 {
		t.Fatalf("%d tokens after two puts, want 1", len(list))
	}
}
