package provider

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
)

// countingStore counts token lookups; the SQLite store's TokenStamp is
// promoted, so a service over it caches.
type countingStore struct {
	*sqlite.Store
	lookups atomic.Int64
}

func (s *countingStore) TokenByHash(ctx context.Context, hash []byte) (airlock.Token, error) {
	s.lookups.Add(1)
	return s.Store.TokenByHash(ctx, hash)
}

// serviceOn opens a second store and service on b's database file: another
// process, as far as the token stamp can tell.
func serviceOn(t *testing.T, path string) (*Service, *countingStore) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &countingStore{Store: st}
	svc, err := New(Config{Store: cs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return svc, cs
}

// TestTokenCache checks that a token is looked up once while no token
// changes, and that a revocation made through another store on the same
// file (another process) fails the very next call.
func TestTokenCache(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/airlock.db"
	b := setup(t, options{path: path})
	ctx := t.Context()
	tok, secret, err := b.svc.CreateToken(ctx, b.admin, airlock.NewTokenInput{Name: "cached", Role: airlock.RoleAgent})
	if err != nil {
		t.Fatal(err)
	}
	other, counted := serviceOn(t, path)
	for range 5 {
		if _, err := other.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	if n := counted.lookups.Load(); n != 1 {
		t.Fatalf("5 calls looked the token up %d times, want 1 (cached)", n)
	}

	if _, err := b.svc.RevokeToken(ctx, b.admin, tok.ID); err != nil {
		t.Fatal(err)
	}
	_, err = other.Authenticate(ctx, secret)
	wantCode(t, err, airlock.CodeUnauthorized, "")
	_, err = b.svc.Authenticate(ctx, secret)
	wantCode(t, err, airlock.CodeUnauthorized, "")
	if n := counted.lookups.Load(); n != 2 {
		t.Fatalf("after the revocation: %d lookups, want 2 (the stamp moved, the cache was dropped)", n)
	}

	// Unknown and revoked tokens are never cached: each call asks.
	for range 3 {
		_, err = other.Authenticate(ctx, secret)
		wantCode(t, err, airlock.CodeUnauthorized, "")
	}
	if n := counted.lookups.Load(); n != 5 {
		t.Fatalf("3 calls with a revoked token: %d lookups in all, want 5", n)
	}
}

// TestTokenCacheReplacedToken checks that reinstalling the bootstrap admin
// with a new secret (PutToken) stops the old secret at once.
func TestTokenCacheReplacedToken(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/airlock.db"
	b := setup(t, options{path: path})
	ctx := t.Context()
	other, _ := serviceOn(t, path)
	if err := other.BootstrapAdmin(ctx, "first-admin-secret-0123456789"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Authenticate(ctx, "first-admin-secret-0123456789"); err != nil {
		t.Fatal(err)
	}
	if err := other.BootstrapAdmin(ctx, "second-admin-secret-0123456789"); err != nil {
		t.Fatal(err)
	}
	_, err := b.svc.Authenticate(ctx, "first-admin-secret-0123456789")
	wantCode(t, err, airlock.CodeUnauthorized, "")
	if _, err := b.svc.Authenticate(ctx, "second-admin-secret-0123456789"); err != nil {
		t.Fatal(err)
	}
}

// fakeStamp is a TokenStamp the test moves by hand.
type fakeStamp struct {
	store.Store
	mark atomic.Uint64
	err  error
}

func (f *fakeStamp) TokenStamp() (uint64, error) { return f.mark.Load(), f.err }

// TestTokenCacheRaces checks the cache's own rules: a token read while the
// stamp moved is not kept; entries age out; a stamp that cannot be read
// means no cache.
func TestTokenCacheRaces(t *testing.T) {
	t.Parallel()
	hash := airlock.HashSecret("secret")
	live := airlock.Token{ID: "tok_1", Role: airlock.RoleAgent}
	stamp := &fakeStamp{}
	c := newTokenCache(stamp)
	now := epoch
	c.now = func() time.Time { return now }
	loads := 0
	load := func() (airlock.Token, error) { loads++; return live, nil }

	// A revocation commits while the token is being read: the stamp moves
	// between the two reads, and the token is not cached.
	if _, err := c.lookup(hash, func() (airlock.Token, error) { stamp.mark.Add(1); return load() }); err != nil {
		t.Fatal(err)
	}
	c.lookup(hash, load)
	c.lookup(hash, load)
	if loads != 2 {
		t.Fatalf("%d loads, want 2: the token read across a stamp move must not be kept, the next one is", loads)
	}
	now = now.Add(tokenCacheTTL)
	c.lookup(hash, load)
	if loads != 3 {
		t.Fatalf("%d loads, want 3: an entry older than the TTL is read again", loads)
	}
	stamp.err = errors.New("stat failed")
	c.lookup(hash, load)
	c.lookup(hash, load)
	if loads != 5 {
		t.Fatalf("%d loads, want 5: without a stamp every call asks the store", loads)
	}
	if newTokenCache(nil) != nil {
		t.Fatal("a store without a token stamp got a cache")
	}
}
