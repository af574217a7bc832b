package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// signingKey is a key of the suite's: its seed is 32 copies of b.
func signingKey(b byte) store.SigningKey {
	return store.SigningKey{ID: fmt.Sprintf("kid-%c", b), Seed: bytes.Repeat([]byte{b}, store.SigningKeySeedSize)}
}

// testSigningKeys checks the keys approval tokens are signed with
// (store.SigningKeys).
func (s *suite) testSigningKeys(t *testing.T) {
	runAll(t, []test{
		{"the first key stays the active one", s.signingKeyFirstWins},
		{"a rotation retires the active key and publishes it for a while", s.signingKeyRotation},
		{"bad keys are refused", s.signingKeyRefused},
	})
}

func (s *suite) signingKeyFirstWins(t *testing.T) {
	b := s.setup(t)
	keys, err := b.store.ListSigningKeys(b.ctx)
	wantOK(t, err)
	if len(keys) != 0 {
		t.Fatalf("a new store lists keys %v", keys)
	}
	a, k := signingKey('a'), signingKey('k')
	got, err := b.store.EnsureSigningKey(b.ctx, a, "system:start")
	wantOK(t, err)
	now := b.clock.Now().Truncate(time.Microsecond)
	if got.ID != a.ID || !bytes.Equal(got.Seed, a.Seed) || !got.CreatedAt.Equal(now) || !got.ActivatesAt.Equal(now) || got.RetiredAt != nil || got.PublishedUntil != nil || !got.SignsAt(now) {
		t.Fatalf("EnsureSigningKey = %#v created %s, signing from %s, retired %v; want %s, created now and signing from now", got, got.CreatedAt, got.ActivatesAt, got.RetiredAt, a.ID)
	}
	again, err := b.store.EnsureSigningKey(b.ctx, k, "system:start")
	wantOK(t, err)
	if again.ID != a.ID || !bytes.Equal(again.Seed, a.Seed) {
		t.Fatalf("a second EnsureSigningKey = %s; want the first key %s", again, a.ID)
	}
	keys, err = b.store.ListSigningKeys(b.ctx)
	wantOK(t, err)
	if len(keys) != 1 || keys[0].ID != a.ID {
		t.Fatalf("ListSigningKeys = %v; want [%s]", keys, a.ID)
	}
	if got := signingKeyEvents(t, b); !slices.Equal(got, []string{"signing_key.created kid-a by system:start"}) {
		t.Fatalf("events %q", got)
	}
}

func (s *suite) signingKeyRotation(t *testing.T) {
	b := s.setup(t)
	a, k := signingKey('a'), signingKey('k')
	_, err := b.store.EnsureSigningKey(b.ctx, a, "system:start")
	wantOK(t, err)
	b.clock.Advance(time.Minute)
	at := b.clock.Now().Truncate(time.Microsecond)
	const delay = 30 * time.Second
	got, err := b.store.RotateSigningKey(b.ctx, k, delay, time.Hour, "tok_admin")
	wantOK(t, err)
	switchAt := at.Add(delay)
	if got.ID != k.ID || !bytes.Equal(got.Seed, k.Seed) || !got.CreatedAt.Equal(at) || !got.ActivatesAt.Equal(switchAt) || got.RetiredAt != nil {
		t.Fatalf("RotateSigningKey = %s created %s, signing from %s, retired %v; want %s created %s, signing from %s", got, got.CreatedAt, got.ActivatesAt, got.RetiredAt, k.ID, at, switchAt)
	}
	keys, err := b.store.ListSigningKeys(b.ctx)
	wantOK(t, err)
	if len(keys) != 2 || keys[0].ID != k.ID || keys[1].ID != a.ID {
		t.Fatalf("ListSigningKeys = %v; want the new key, then the old", keys)
	}
	// The old key signs until the new one starts, the same instant.
	old := keys[1]
	if old.RetiredAt == nil || !old.RetiredAt.Equal(switchAt) || old.PublishedUntil == nil || !old.PublishedUntil.Equal(switchAt.Add(time.Hour)) {
		t.Fatalf("retired key %s: retired %v, published until %v; want %s and an hour later", old, old.RetiredAt, old.PublishedUntil, switchAt)
	}
	for _, tc := range []struct {
		at       time.Time
		old, new bool
	}{{at, true, false}, {switchAt.Add(-time.Microsecond), true, false}, {switchAt, false, true}, {switchAt.Add(time.Hour), false, true}} {
		if old.SignsAt(tc.at) != tc.old || keys[0].SignsAt(tc.at) != tc.new {
			t.Errorf("at %s the old key signs: %v, the new: %v; want %v and %v", tc.at, old.SignsAt(tc.at), keys[0].SignsAt(tc.at), tc.old, tc.new)
		}
	}
	// A retired key never becomes active again, even by EnsureSigningKey.
	active, err := b.store.EnsureSigningKey(b.ctx, a, "system:start")
	wantOK(t, err)
	if active.ID != k.ID {
		t.Fatalf("EnsureSigningKey after a rotation = %s; want %s", active, k.ID)
	}
	b.clock.Advance(delay + time.Hour)
	keys, err = b.store.ListSigningKeys(b.ctx)
	wantOK(t, err)
	if len(keys) != 1 || keys[0].ID != k.ID {
		t.Fatalf("ListSigningKeys after the old key's tokens expired = %v; want [%s]", keys, k.ID)
	}
	want := []string{"signing_key.created kid-a by system:start", "signing_key.retired kid-a by tok_admin", "signing_key.created kid-k by tok_admin"}
	if got := signingKeyEvents(t, b); !slices.Equal(got, want) {
		t.Fatalf("events %q; want %q", got, want)
	}
}

func (s *suite) signingKeyRefused(t *testing.T) {
	b := s.setup(t)
	short := signingKey('a')
	short.Seed = short.Seed[:31]
	_, err := b.store.EnsureSigningKey(b.ctx, short, "system:start")
	wantErr(t, err, airlock.CodeInvalidRequest, "")
	_, err = b.store.RotateSigningKey(b.ctx, store.SigningKey{Seed: signingKey('a').Seed}, time.Second, time.Hour, "tok_admin")
	wantErr(t, err, airlock.CodeInvalidRequest, "")
	keys, err := b.store.ListSigningKeys(b.ctx)
	wantOK(t, err)
	if len(keys) != 0 {
		t.Fatalf("refused keys were stored: %v", keys)
	}
}

// signingKeyEvents returns the store's signing-key events as "type subject
// by actor".
func signingKeyEvents(t *testing.T, b *bundle) []string {
	var out []string
	for _, e := range AllEvents(t, b.store) {
		if e.Type == airlock.EventSigningKeyCreated || e.Type == airlock.EventSigningKeyRetired {
			out = append(out, fmt.Sprintf("%s %s by %s", e.Type, e.Subject, e.Actor))
		}
	}
	return out
}

// signingKeyOnce: replicas starting at once each offer a key; one wins
// and every replica gets it.
func (s *replicaSuite) signingKeyOnce(t *testing.T) {
	r := s.setup(t)
	const callers = 8
	got := make([]store.SigningKey, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			<-start
			k, err := r.on(c).EnsureSigningKey(r.ctx, signingKey(byte('a'+c)), "system:start")
			if err != nil {
				t.Errorf("EnsureSigningKey: %v", err)
			}
			got[c] = k
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for c := range callers {
		if got[c].ID != got[0].ID || !bytes.Equal(got[c].Seed, got[0].Seed) {
			t.Fatalf("replicas starting at once got keys %s and %s, want one", got[0], got[c])
		}
	}
	if events := signingKeyEvents(t, r.bundle); len(events) != 1 {
		t.Fatalf("events %q; want one signing_key.created", events)
	}
}
