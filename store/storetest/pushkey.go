package storetest

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// vapidKey returns a fresh VAPID key pair.
func vapidKey(t *testing.T) store.VAPIDKey {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return store.VAPIDKey{Private: k.Bytes(), Public: k.PublicKey().Bytes()}
}

// testPushKeys checks the VAPID key pair pushes are signed with
// (store.PushKeys).
func (s *suite) testPushKeys(t *testing.T) {
	runAll(t, []test{
		{"the first VAPID key stays the stored one", s.vapidKeyFirstWins},
		{"bad VAPID keys are refused", s.vapidKeyRefused},
	})
}

func (s *suite) vapidKeyFirstWins(t *testing.T) {
	b := s.setup(t)
	if _, err := b.store.VAPIDKey(b.ctx); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("VAPIDKey on a new store = %v; want not_found", err)
	}
	a, k := vapidKey(t), vapidKey(t)
	got, err := b.store.EnsureVAPIDKey(b.ctx, a, "system:start")
	wantOK(t, err)
	now := b.clock.Now().Truncate(time.Microsecond)
	if !bytes.Equal(got.Private, a.Private) || !bytes.Equal(got.Public, a.Public) || !got.CreatedAt.Equal(now) {
		t.Fatalf("EnsureVAPIDKey = %s created %s; want %s created now (%s)", got, got.CreatedAt, a, now)
	}
	again, err := b.store.EnsureVAPIDKey(b.ctx, k, "system:start")
	wantOK(t, err)
	if !bytes.Equal(again.Private, a.Private) || !bytes.Equal(again.Public, a.Public) {
		t.Fatalf("a second EnsureVAPIDKey = %s; want the first key %s", again, a)
	}
	read, err := b.store.VAPIDKey(b.ctx)
	wantOK(t, err)
	if !bytes.Equal(read.Private, a.Private) || !bytes.Equal(read.Public, a.Public) || !read.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("VAPIDKey = %s; want %s", read, a)
	}
	if got, want := vapidKeyEvents(t, b), []string{"vapid_key.created " + airlock.EncodePushKey(a.Public) + " by system:start"}; !slices.Equal(got, want) {
		t.Fatalf("events %q; want %q", got, want)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", a, a, a, a); bytes.Contains([]byte(s), []byte(airlock.EncodePushKey(a.Private))) {
		t.Fatalf("a VAPID key formats its private key: %s", s)
	}
}

func (s *suite) vapidKeyRefused(t *testing.T) {
	b := s.setup(t)
	good := vapidKey(t)
	for _, k := range []store.VAPIDKey{
		{Private: good.Private[:31], Public: good.Public},
		{Private: good.Private, Public: good.Public[1:]},
		{Private: good.Private, Public: append([]byte{2}, good.Public[1:]...)},
		{},
	} {
		if _, err := b.store.EnsureVAPIDKey(b.ctx, k, "system:start"); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Fatalf("EnsureVAPIDKey(%d-byte private, %d-byte public) = %v; want invalid_request", len(k.Private), len(k.Public), err)
		}
	}
	if _, err := b.store.VAPIDKey(b.ctx); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("a refused key was stored: VAPIDKey = %v", err)
	}
}

func vapidKeyEvents(t *testing.T, b *bundle) []string {
	var out []string
	for _, e := range AllEvents(t, b.store) {
		if e.Type == airlock.EventVAPIDKeyCreated {
			out = append(out, fmt.Sprintf("%s %s by %s", e.Type, e.Subject, e.Actor))
		}
	}
	return out
}

// vapidKeyOnce: replicas starting at once each offer a key; one wins and
// every replica pushes with it.
func (s *replicaSuite) vapidKeyOnce(t *testing.T) {
	r := s.setup(t)
	const callers = 8
	got := make([]store.VAPIDKey, callers)
	offered := make([]store.VAPIDKey, callers)
	for c := range callers {
		offered[c] = vapidKey(t)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			<-start
			k, err := r.on(c).EnsureVAPIDKey(r.ctx, offered[c], "system:start")
			if err != nil {
				t.Errorf("EnsureVAPIDKey: %v", err)
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
		if !bytes.Equal(got[c].Public, got[0].Public) || !bytes.Equal(got[c].Private, got[0].Private) {
			t.Fatalf("replicas starting at once got keys %s and %s, want one", got[0], got[c])
		}
	}
	if events := vapidKeyEvents(t, r.bundle); len(events) != 1 {
		t.Fatalf("events %q; want one vapid_key.created", events)
	}
}
