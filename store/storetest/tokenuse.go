package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// verifier is the suite's tool server: the token that consumes approval
// tokens.
const verifier = "tok_verifier"

// testTokenUses checks the single use of approval tokens
// (store.TokenUses).
func (s *suite) testTokenUses(t *testing.T) {
	runAll(t, []test{
		{"the first consume wins, with its event", s.tokenUseFirstWins},
		{"a later consume names the first's time, whatever its jti", s.tokenUseSecondRefused},
		{"an unknown request is not_found", s.tokenUseUnknown},
		{"16 consumes at once: exactly one wins", s.tokenUseRace},
	})
}

// claimed creates a request, approves it and claims its execution: the
// request an approval token is signed for.
func (b *bundle) claimed(t *testing.T) airlock.Request {
	t.Helper()
	r := b.into(t, airlock.StateApproved)
	if _, err := b.claim(r.ID); err != nil {
		t.Fatalf("claim %s: %v", r.ID, err)
	}
	return r
}

func (s *suite) tokenUseFirstWins(t *testing.T) {
	b := s.setup(t)
	r := b.claimed(t)
	use, err := b.store.ConsumeApprovalToken(b.ctx, r.ID, "jti_one", verifier)
	wantOK(t, err)
	now := b.clock.Now().Truncate(time.Microsecond)
	if use.RequestID != r.ID || use.JTI != "jti_one" || use.ConsumedBy != verifier || !use.ConsumedAt.Equal(now) {
		t.Fatalf("ConsumeApprovalToken = %+v; want %s's use of jti_one by %s at %s", use, r.ID, verifier, now)
	}
	evs := b.eventsOf(t, airlock.EventExecutionTokenConsumed)
	if len(evs) != 1 {
		t.Fatalf("%d execution.token_consumed events, want 1", len(evs))
	}
	if e := evs[0]; e.RequestID != r.ID || e.InstanceID != r.InstanceID || e.Actor != verifier || e.Subject != "jti_one" || !e.At.Equal(now) {
		t.Fatalf("event %+v; want on %s (%s) by %s, subject jti_one, at %s", e, r.ID, r.InstanceID, verifier, now)
	}
}

func (s *suite) tokenUseSecondRefused(t *testing.T) {
	b := s.setup(t)
	r := b.claimed(t)
	first, err := b.store.ConsumeApprovalToken(b.ctx, r.ID, "jti_one", verifier)
	wantOK(t, err)
	b.clock.Advance(time.Minute)
	for _, jti := range []string{"jti_one", "jti_other"} {
		_, err := b.store.ConsumeApprovalToken(b.ctx, r.ID, jti, "tok_admin")
		wantErr(t, err, airlock.CodeAlreadyUsed, "")
		e, _ := errors.AsType[*airlock.Error](err)
		if e.ConsumedAt == nil || !e.ConsumedAt.Equal(first.ConsumedAt) {
			t.Fatalf("a second consume (%s) names %v; want the first's time %s", jti, e.ConsumedAt, first.ConsumedAt)
		}
	}
	if n := len(b.eventsOf(t, airlock.EventExecutionTokenConsumed)); n != 1 {
		t.Fatalf("%d execution.token_consumed events, want 1", n)
	}
}

func (s *suite) tokenUseUnknown(t *testing.T) {
	b := s.setup(t)
	_, err := b.store.ConsumeApprovalToken(b.ctx, "apr_nosuchrequest", "jti_one", verifier)
	wantErr(t, err, airlock.CodeNotFound, "")
	if n := len(b.eventsOf(t, airlock.EventExecutionTokenConsumed)); n != 0 {
		t.Fatalf("%d execution.token_consumed events, want none", n)
	}
}

func (s *suite) tokenUseRace(t *testing.T) {
	b := s.setup(t)
	r := b.claimed(t)
	wins, used := consumeRace(t, r.ID, []store.Store{b.store})
	if wins != 1 || used != consumers-1 {
		t.Fatalf("%d consumes won and %d were already_used; want 1 and %d", wins, used, consumers-1)
	}
}

// consumers is how many consumes of one request race.
const consumers = 16

// consumeRace consumes request id 16 times at once, each with its own
// jti, spread over stores, and returns how many won and how many were
// already_used; any other answer fails t.
func consumeRace(t *testing.T, id string, stores []store.Store) (wins, used int) {
	t.Helper()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range consumers {
		st := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			_, err := st.ConsumeApprovalToken(t.Context(), id, "jti_"+string(rune('a'+i)), verifier)
			mu.Lock()
			defer mu.Unlock()
			switch e, _ := errors.AsType[*airlock.Error](err); {
			case err == nil:
				wins++
			case e != nil && e.Code == airlock.CodeAlreadyUsed && e.ConsumedAt != nil:
				used++
			default:
				t.Errorf("consume %d: %v, want success or already_used", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return wins, used
}
