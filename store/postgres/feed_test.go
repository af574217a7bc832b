package postgres_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/storetest"
	"github.com/jackc/pgx/v5"
)

// holder stops one write of a store just before its COMMIT, after the
// write has appended its events (and drawn their IDs), until released. It
// puts a statement that waits for an advisory lock the test holds into
// that write's commit pipeline (WithBeforeCommitForTest), so the held
// write runs the path production runs.
type holder struct {
	lock  *pgx.Conn // holds the advisory lock (holdClass, key) until release
	key   int32
	armed atomic.Bool
	once  sync.Once
}

// holdClass is the first key of a holder's advisory lock ("HOLD"), apart
// from Airlock's own locks.
const holdClass int32 = 0x484f4c44

// newHolder takes the lock a held write will wait for, on a connection of
// its own to schema's database.
func newHolder(t *testing.T, schema string) *holder {
	t.Helper()
	h := &holder{lock: conn(t, schema), key: mrand.Int32()}
	if _, err := h.lock.Exec(t.Context(), `SELECT pg_advisory_lock($1, $2)`, holdClass, h.key); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *holder) option() postgres.Option {
	return postgres.WithBeforeCommitForTest(func() string {
		if h.armed.CompareAndSwap(true, false) {
			return fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d, %d)`, holdClass, h.key)
		}
		return ""
	})
}

// hold starts create on its own goroutine with the holder armed and
// returns once that write has appended its events and waits to commit
// (it waits for the holder's lock); the returned channel gets its result
// once released.
func (h *holder) hold(t *testing.T, create func() (airlock.Request, error)) <-chan error {
	t.Helper()
	h.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := create()
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the held write to reach its COMMIT", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the held write ended before its COMMIT: %v", err)
		default:
		}
		var n int
		err := h.lock.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2`,
			int64(uint32(holdClass)), int64(uint32(h.key))).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	return done
}

// release lets the held write commit; releasing again does nothing.
func (h *holder) release() {
	h.once.Do(func() {
		h.lock.Exec(context.Background(), `SELECT pg_advisory_unlock($1, $2)`, holdClass, h.key)
	})
}

// heldReplicas opens two stores on a new schema, as two replicas: h holds
// a's writes before their COMMIT when asked to, and never b's.
func heldReplicas(t *testing.T) (h *holder, a, b *postgres.Store) {
	t.Helper()
	schema := testkit.SchemaName(t, "t_")
	h = newHolder(t, schema)
	return h, open(t, schema, h.option()), open(t, schema)
}

// TestHeldWriteIsOnePipeline: a write held before its COMMIT runs the
// path production runs — its statements, its COMMIT and the holding
// statement between them in one pipeline, one round trip — so the tests
// that hold writes test the code that serves.
func TestHeldWriteIsOnePipeline(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	h := newHolder(t, schema)
	var c trips
	s := open(t, schema, h.option(), postgres.WithTracerForTest(&c),
		postgres.WithDroppedNotificationsForTest(func() bool { return true }))
	in := instance(t, s, "tok_a")
	if _, _, err := s.CreateRequest(t.Context(), params(in)); err != nil { // prepares the statements
		t.Fatal(err)
	}
	c.since()
	done := h.hold(t, func() (airlock.Request, error) {
		r, _, err := s.CreateRequest(context.Background(), params(in))
		return r, err
	})
	h.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q, b := c.since(); q != 0 || b != 1 {
		t.Errorf("a held create took %d queries and %d pipelines, want one pipeline, as one not held", q, b)
	}
}

// lockWaiters counts the sessions waiting for store's events lock.
func lockWaiters(t *testing.T, s *postgres.Store) int {
	t.Helper()
	classid, objid := s.EventsLockForTest()
	var n int
	err := s.PoolForTest().QueryRow(t.Context(), `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2`, classid, objid).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHeldCommitHoldsBackLaterEvents is the reason event IDs are settled
// before they are listed. Writer A draws its event IDs and stops before
// COMMIT; writer B then draws larger IDs and commits — without waiting for
// A: appending events does not serialize commits. A reader must not list
// B's event yet: a stream resuming after it would never see A's. It waits
// until A has committed, then lists both, in ID order.
func TestHeldCommitHoldsBackLaterEvents(t *testing.T) {
	t.Parallel()
	h, a, b := heldReplicas(t)
	in := instance(t, b, "tok_a")
	start := storetest.AllEvents(t, b)
	after := start[len(start)-1].ID

	var held airlock.Request
	aDone := h.hold(t, func() (airlock.Request, error) {
		r, _, err := a.CreateRequest(context.Background(), params(in))
		held = r
		return r, err
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	later, _, err := b.CreateRequest(ctx, params(in))
	if err != nil {
		h.release()
		t.Fatalf("B's write while A waits to commit: %v; B waited for A's COMMIT, so commits are serialized", err)
	}

	listed := make(chan []airlock.Event, 1)
	go func() {
		for {
			// A settling gives up after a while; a stream would read again.
			evs, err := b.ListEvents(t.Context(), after, 100)
			if err == nil {
				listed <- evs
				return
			}
			if t.Context().Err() != nil {
				listed <- nil
				return
			}
		}
	}()
	testkit.Eventually(t, 10*time.Second, "the reader to wait for A's commit", func() bool {
		select {
		case evs := <-listed:
			h.release()
			t.Fatalf("with A's events not committed, the reader listed %+v instead of waiting", evs)
		default:
		}
		return lockWaiters(t, b) > 0
	})
	h.release()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	evs := <-listed
	var got []string
	for _, e := range evs {
		got = append(got, e.RequestID)
	}
	if want := []string{held.ID, later.ID}; !slices.Equal(got, want) {
		t.Fatalf("listed the events of requests %v, want A's then B's %v", got, want)
	}
	if !slices.IsSortedFunc(evs, func(x, y airlock.Event) int { return int(x.ID - y.ID) }) {
		t.Fatalf("events out of ID order: %+v", evs)
	}
}

// TestHeldCommitDoesNotStallWriters: a writer that stops between
// appending its events and its COMMIT (a frozen replica) makes a reader
// that must settle give up after a moment, with an error that says why —
// and writers queued behind that reader go on, instead of waiting for the
// frozen one.
func TestHeldCommitDoesNotStallWriters(t *testing.T) {
	t.Parallel()
	h, a, b := heldReplicas(t)
	in := instance(t, b, "tok_a")
	aDone := h.hold(t, func() (airlock.Request, error) {
		r, _, err := a.CreateRequest(context.Background(), params(in))
		return r, err
	})
	defer func() {
		h.release()
		if err := <-aDone; err != nil {
			t.Error(err)
		}
	}()
	if _, _, err := b.CreateRequest(t.Context(), params(in)); err != nil {
		t.Fatal(err)
	}
	listed := make(chan error, 1)
	go func() {
		_, err := b.ListEvents(t.Context(), 0, 1000)
		listed <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the reader to wait for A's commit", func() bool { return lockWaiters(t, b) > 0 })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, _, err := b.CreateRequest(ctx, params(in)); err != nil {
		t.Fatalf("a write queued behind the reader: %v; it waited for the frozen writer", err)
	}
	err := <-listed
	if err == nil || !strings.Contains(err.Error(), "events lock") {
		t.Fatalf("ListEvents while a writer is frozen before COMMIT = %v, want an error naming the events lock", err)
	}
}

// listen runs s.Listen until the test ends, once it listens, and returns
// what it hears.
func listen(t *testing.T, s *postgres.Store) <-chan []string {
	t.Helper()
	heard := make(chan []string, 64)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan error, 1)
	go func() { listening <- s.Listen(ctx, func(ids []string) { heard <- ids }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-listening; err != nil {
			t.Errorf("Listen = %v", err)
		}
	})
	if ids := <-heard; ids != nil {
		t.Fatalf("first call = %v, want nil", ids)
	}
	return heard
}

// TestListenCatchesUpOnMissedNotifications: store B commits changes but
// never announces them, as a replica that dies between its COMMIT and its
// NOTIFY. A listener on A still hears them, from the audit log, within a
// few polls — a request's ID, and an event stream's wake-up for a change
// that names no request.
func TestListenCatchesUpOnMissedNotifications(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	a := open(t, schema)
	b := open(t, schema, postgres.WithDroppedNotificationsForTest(func() bool { return true }))
	in := instance(t, b, "tok_a")
	heard := listen(t, a)

	r, _, err := b.CreateRequest(t.Context(), params(in))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.Decide(t.Context(), store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"}); err != nil {
		t.Fatal(err)
	}
	bound := 10 * postgres.ListenPoll
	timeout := time.After(bound)
	for heardIt := false; !heardIt; {
		select {
		case ids := <-heard:
			if ids == nil {
				t.Fatal("heard re-read-everything; want the request's ID from the audit log")
			}
			heardIt = slices.Contains(ids, r.ID)
		case <-timeout:
			t.Fatalf("a change never announced was not heard within %s", bound)
		}
	}
	t.Logf("an unannounced decision was heard after %s", time.Since(start))

	if _, err := b.CreateColumn(t.Context(), airlock.Column{Key: "todo", Name: "To do"}, "tok_r"); err != nil {
		t.Fatal(err)
	}
	timeout = time.After(bound)
	for {
		select {
		case ids := <-heard:
			if ids != nil && len(ids) == 0 {
				return // a wake-up for event streams
			}
		case <-timeout:
			t.Fatalf("a board change never announced did not wake event streams within %s", bound)
		}
	}
}

// TestPutTokenTogether: replicas starting together install the same
// bootstrap token at once; every put succeeds and one token remains.
func TestPutTokenTogether(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	stores := []*postgres.Store{open(t, schema), open(t, schema), open(t, schema)}
	for round := range 20 {
		tok := airlock.Token{ID: airlock.NewID(airlock.PrefixToken), Name: "bootstrap", Role: airlock.RoleAdmin,
			Hash: []byte(airlock.NewID("hash_")), CreatedBy: "bootstrap"}
		errs := make(chan error, len(stores))
		for _, s := range stores {
			go func() { errs <- s.PutToken(t.Context(), tok) }()
		}
		for range stores {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: PutToken on replicas at once: %v", round, err)
			}
		}
	}
}

// TestChangeFeedAnnouncesTokens: a token revoked or replaced on store B is
// announced to a listener on A by its ID, so that A's long-polls of that
// token re-check it at once: by notification, and, when B never notifies
// (a replica that died between its COMMIT and its NOTIFY), from the audit
// log.
func TestChangeFeedAnnouncesTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		a, b []postgres.Option
	}{
		// A reads the audit log only once an hour: what it hears, it
		// heard from notifications.
		{"notified", []postgres.Option{postgres.WithListenPollForTest(time.Hour)}, nil},
		{"read from the audit log", nil, []postgres.Option{postgres.WithDroppedNotificationsForTest(func() bool { return true })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := testkit.SchemaName(t, "t_")
			a, b := open(t, schema, tc.a...), open(t, schema, tc.b...)
			heard := listen(t, a)
			hear := func(what, id string) {
				t.Helper()
				bound := 10 * postgres.ListenPoll
				timeout := time.After(bound)
				for {
					select {
					case ids := <-heard:
						if slices.Contains(ids, id) {
							return
						}
					case <-timeout:
						t.Fatalf("%s on B: %s not heard on A within %s", what, id, bound)
					}
				}
			}

			tok := airlock.Token{ID: airlock.NewID(airlock.PrefixToken), Name: "agent", Role: airlock.RoleAgent,
				Hash: airlock.HashSecret(airlock.NewTokenSecret()), CreatedBy: "tok_admin"}
			if err := b.CreateToken(t.Context(), tok); err != nil {
				t.Fatal(err)
			}
			if _, err := b.RevokeToken(t.Context(), tok.ID, "tok_admin"); err != nil {
				t.Fatal(err)
			}
			hear("a revocation", tok.ID)
			tok.Hash = airlock.HashSecret(airlock.NewTokenSecret())
			if err := b.PutToken(t.Context(), tok); err != nil {
				t.Fatal(err)
			}
			hear("a new secret", tok.ID)
		})
	}
}

// TestSequencerSettlesLately: the audit log's sequencer does not settle
// event IDs again while a recent settling's mark stands (SettleLately), so
// it does not pause writers each round, and it loses nothing by it. Writer
// A draws an event ID and stops before COMMIT; B commits a later one. The
// sequencer's read, within the mark's time, neither waits for A (a
// settling would, and give up with an error) nor moves Next past A's
// event; once A commits, the next read from that Next finds it.
func TestSequencerSettlesLately(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	h := newHolder(t, schema)
	a, b := open(t, schema, h.option()), open(t, schema, postgres.WithSettleLatelyForTest(time.Hour, 1000))
	in := instance(t, b, "tok_a")
	first, err := b.UnsequencedEvents(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) == 0 || first.Next != first.Events[len(first.Events)-1].Event.ID {
		t.Fatalf("the first read = %d events, Next %d; want the instance's events, Next at the last (it settles)", len(first.Events), first.Next)
	}

	var held airlock.Request
	aDone := h.hold(t, func() (airlock.Request, error) {
		r, _, err := a.CreateRequest(context.Background(), params(in))
		held = r
		return r, err
	})
	defer h.release()
	later, _, err := b.CreateRequest(t.Context(), params(in))
	if err != nil {
		t.Fatal(err)
	}
	page, err := b.UnsequencedEvents(t.Context(), first.Next, 100)
	if err != nil {
		t.Fatalf("the sequencer's read while A waits to commit: %v; it settled again instead of taking the recent mark", err)
	}
	if got := requestsOf(page); !slices.Equal(got, []string{later.ID}) {
		t.Fatalf("with A's event not committed, the read found the events of %v; want B's alone, %s", got, later.ID)
	}
	if page.Next != first.Next {
		t.Fatalf("Next = %d with A's event drawn and not committed; want it to stay at the settled %d", page.Next, first.Next)
	}

	h.release()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	page, err = b.UnsequencedEvents(t.Context(), page.Next, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := requestsOf(page); !slices.Contains(got, held.ID) || !slices.Contains(got, later.ID) {
		t.Fatalf("once A committed, the read found the events of %v; want A's %s (and B's, still without a leaf)", got, held.ID)
	}
}

// TestSequencerSettlesFarBehind: however recent the last settling, the
// sequencer settles again once its mark is that many IDs behind the
// largest (settleLatelyEvents), so that a burst of events is not read
// again round after round. With the bound at 2, A's held event and B's
// committed one are two past the mark: the read waits for A's commit, and
// then moves Next past both.
func TestSequencerSettlesFarBehind(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	h := newHolder(t, schema)
	a, b := open(t, schema, h.option()), open(t, schema, postgres.WithSettleLatelyForTest(time.Hour, 2))
	in := instance(t, b, "tok_a")
	first, err := b.UnsequencedEvents(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var held airlock.Request
	aDone := h.hold(t, func() (airlock.Request, error) {
		r, _, err := a.CreateRequest(context.Background(), params(in))
		held = r
		return r, err
	})
	defer h.release()
	later, _, err := b.CreateRequest(t.Context(), params(in))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		page store.Unsequenced
		err  error
	}
	read := make(chan result, 1)
	go func() {
		for {
			// A settling gives up after a while; the sequencer reads again.
			p, err := b.UnsequencedEvents(t.Context(), first.Next, 100)
			if err == nil || t.Context().Err() != nil {
				read <- result{p, err}
				return
			}
		}
	}()
	testkit.Eventually(t, 10*time.Second, "the read to settle, waiting for A's commit", func() bool {
		select {
		case r := <-read:
			h.release()
			t.Fatalf("with the mark two IDs behind, the read returned %v, Next %d, %v without settling", requestsOf(r.page), r.page.Next, r.err)
		default:
		}
		return lockWaiters(t, b) > 0
	})
	h.release()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	r := <-read
	if r.err != nil {
		t.Fatal(r.err)
	}
	last := r.page.Events[len(r.page.Events)-1].Event.ID
	if got := requestsOf(r.page); !slices.Contains(got, held.ID) || !slices.Contains(got, later.ID) || r.page.Next != last {
		t.Fatalf("the settled read found the events of %v, Next %d; want A's %s and B's %s, Next at the last, %d", got, r.page.Next, held.ID, later.ID, last)
	}
}

// requestsOf returns the requests of a page's events, in its order.
func requestsOf(p store.Unsequenced) []string {
	var ids []string
	for _, u := range p.Events {
		ids = append(ids, u.Event.RequestID)
	}
	return ids
}
