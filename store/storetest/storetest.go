// Package storetest is the conformance suite every store.Store driver
// runs: one set of tests, so the SQLite and PostgreSQL drivers keep the
// lifecycle's rules (docs/protocol.md L1–L11) in exactly the same way.
//
// A driver's test calls Run with a function that opens a fresh, empty store
// judging time by the given clock:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock airlock.Clock) store.Store {
//			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"), sqlite.WithClock(clock))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// NewStore opens a fresh, empty store that judges every deadline by clock.
// Run closes the store when the test that asked for it ends.
type NewStore func(t *testing.T, clock airlock.Clock) store.Store

// Run runs the conformance suite against the stores newStore opens. Every
// test is parallel and gets its own store and FakeClock.
func Run(t *testing.T, newStore NewStore) {
	s := &suite{newStore: newStore}
	runAll(t, []test{
		{"T01_Lifecycle", s.testLifecycle},
		{"T05_DeadlineBoundaries", s.testDeadlineBoundaries},
		{"Races", s.testRaces},
		{"Create", s.testCreate},
		{"Idempotency", s.testIdempotency},
		{"Data", s.testData},
		{"Instances", s.testInstances},
		{"List", s.testList},
		{"GetRequests", s.testGetRequests},
		{"Execution", s.testExecution},
		{"Expiry", s.testExpiry},
		{"Events", s.testEvents},
		{"Tokens", s.testTokens},
		{"CountPending", s.testCountPending},
		{"Extras", s.testExtras},
		{"Names", s.testNames},
		{"Notify", s.testNotify},
		{"Reviewers", s.testReviewers},
		{"Grants", s.testGrants},
		{"WebSessions", s.testWebSessions},
		{"Quorum", s.testQuorum},
		{"Escalation", s.testEscalation},
		{"OIDC", s.testOIDC},
		{"SigningKeys", s.testSigningKeys},
		{"PushKeys", s.testPushKeys},
		{"Passkeys", s.testPasskeys},
		{"TokenUses", s.testTokenUses},
		{"AuditLog", s.testAuditLog},
		{"Retention", s.testRetention},
		{"T36_Tasks", s.testTasks},
		{"T37_EditRebind", s.testEditRebind},
		{"AdapterClaims", s.testClaims},
		{"History", s.testHistory},
		{"ReviewClaims", s.testReviewClaims},
	})
}

// test is one named test of the suite. Its name reads as the rule it
// checks, so that a failure says which rule broke and docs/ can cite it.
type test struct {
	name string
	run  func(t *testing.T)
}

// runAll runs each of tests as a parallel subtest of t.
func runAll(t *testing.T, tests []test) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}

type suite struct {
	newStore NewStore
}

// epoch is where every test's clock starts. It has a sub-microsecond part
// on purpose: stores keep microseconds, and must truncate, not round.
var epoch = time.Date(2030, time.March, 4, 5, 6, 7, 123456789, time.UTC)

// Owners and actors the tests use.
const (
	ownerA   = "tok_agent_a"
	ownerB   = "tok_agent_b"
	reviewer = "tok_reviewer"
)

// Windows the tests use.
const (
	window   = 10 * time.Minute
	validity = 5 * time.Minute
)

// bundle is what every test starts from: a fresh store, its clock, and one
// instance owned by ownerA.
type bundle struct {
	ctx   context.Context
	store store.Store
	clock *FakeClock
	inst  airlock.Instance
}

// setup opens a fresh store for t with its clock at epoch and one instance.
func (s *suite) setup(t *testing.T) *bundle {
	t.Helper()
	clock := NewFakeClock(epoch)
	st := s.newStore(t, clock)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	b := &bundle{ctx: t.Context(), store: st, clock: clock}
	b.inst = b.instance(t, ownerA)
	return b
}

// instance creates a live instance owned by owner.
func (b *bundle) instance(t *testing.T, owner string) airlock.Instance {
	t.Helper()
	in, err := b.store.CreateInstance(b.ctx, airlock.Instance{
		ID: airlock.NewID(airlock.PrefixInstance), OwnerID: owner, Name: "laptop of " + owner,
	}, owner)
	if err != nil {
		t.Fatalf("CreateInstance: %v", err)
	}
	return in
}

// params returns the parameters of a new tool-call request on b's
// instance, with a fresh idempotency key, changed by mods.
func (b *bundle) params(mods ...func(*store.NewRequestParams)) store.NewRequestParams {
	key := airlock.NewID("key_")
	p := store.NewRequestParams{
		Request: airlock.Request{
			ID:             airlock.NewID(airlock.PrefixRequest),
			InstanceID:     b.inst.ID,
			OwnerID:        b.inst.OwnerID,
			Kind:           airlock.KindToolCall,
			Tool:           "shell.exec",
			Arguments:      json.RawMessage(`{"cmd":"ls -la"}`),
			Timeout:        "10m",
			AgentReasoning: "I need to see the files",
			IdempotencyKey: key,
			Fingerprint:    "fp_" + key,
		},
		Window: window,
		Actor:  b.inst.OwnerID,
	}
	for _, m := range mods {
		m(&p)
	}
	return p
}

// create creates a request that must be new.
func (b *bundle) create(t *testing.T, mods ...func(*store.NewRequestParams)) airlock.Request {
	t.Helper()
	r, created, err := b.store.CreateRequest(b.ctx, b.params(mods...))
	if err != nil || !created {
		t.Fatalf("CreateRequest = created %v, %v; want a new request", created, err)
	}
	// What a create returns is what a read returns, whatever the request
	// holds (a driver may build it rather than read it back).
	sameRequest(t, "created, then read", b.get(t, r.ID), r)
	return r
}

// get reads a request that must exist.
func (b *bundle) get(t *testing.T, id string) airlock.Request {
	t.Helper()
	r, err := b.store.GetRequest(b.ctx, id)
	if err != nil {
		t.Fatalf("GetRequest(%s): %v", id, err)
	}
	return r
}

// events reads the whole audit log.
func (b *bundle) events(t *testing.T) []airlock.Event {
	t.Helper()
	evs, err := b.store.ListEvents(b.ctx, 0, 1000)
	if err != nil {
		t.Fatalf("ListEvents: %v", err)
	}
	return evs
}

// eventsOf is the events of type typ in the log, in order.
func (b *bundle) eventsOf(t *testing.T, typ airlock.EventType) []airlock.Event {
	t.Helper()
	return ofType(b.events(t), typ)
}

// ofType is those of evs of type typ, in order.
func ofType(evs []airlock.Event, typ airlock.EventType) []airlock.Event {
	var out []airlock.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (b *bundle) approve(id string) (airlock.Request, error) {
	return b.store.Decide(b.ctx, store.DecideParams{ID: id, Status: airlock.StateApproved, Note: "go ahead", Validity: validity, Actor: reviewer})
}

func (b *bundle) deny(id string) (airlock.Request, error) {
	return b.store.Decide(b.ctx, store.DecideParams{ID: id, Status: airlock.StateDenied, Note: "not today", Actor: reviewer})
}

func (b *bundle) cancel(id string) (airlock.Request, error) {
	return b.store.Cancel(b.ctx, id, ownerA)
}

func (b *bundle) claim(id string) (airlock.Request, error) {
	return b.store.ClaimExecution(b.ctx, id, ownerA, nil)
}

// moveTo brings pending request r to state by the ordinary route: a
// decision, a cancellation, or a sweep at its deadline (leaving the clock
// there).
func (b *bundle) moveTo(r airlock.Request, state airlock.State) error {
	var err error
	switch state {
	case airlock.StateApproved:
		_, err = b.approve(r.ID)
	case airlock.StateDenied:
		_, err = b.deny(r.ID)
	case airlock.StateCancelled:
		_, err = b.cancel(r.ID)
	case airlock.StateExpired:
		b.clock.Set(r.DeadlineAt)
		_, err = b.store.ExpireDue(b.ctx, 100)
	}
	return err
}

// replayable sets up a bundle and creates a request from its params,
// which it returns for a replay.
func (s *suite) replayable(t *testing.T) (*bundle, store.NewRequestParams, airlock.Request) {
	t.Helper()
	b := s.setup(t)
	p := b.params()
	return b, p, b.create(t, func(q *store.NewRequestParams) { *q = p })
}

// into creates a request and brings it to state by the ordinary route. An
// expired request leaves the clock at its deadline.
func (b *bundle) into(t *testing.T, state airlock.State) airlock.Request {
	t.Helper()
	r := b.create(t)
	if state == airlock.StatePending {
		return r
	}
	if err := b.moveTo(r, state); err != nil {
		t.Fatalf("bringing %s to %s: %v", r.ID, state, err)
	}
	r = b.get(t, r.ID)
	if r.State != state {
		t.Fatalf("bringing %s to %s: it is %s", r.ID, state, r.State)
	}
	return r
}

// wantErr fails t unless err is an *airlock.Error with code and state.
func wantErr(t *testing.T, err error, code airlock.Code, state airlock.State) {
	t.Helper()
	e, ok := errors.AsType[*airlock.Error](err)
	if !ok {
		t.Fatalf("err = %v (%T), want *airlock.Error with code %s", err, err, code)
	}
	if e.Code != code || e.State != state {
		t.Fatalf("err = %s (state %q): %q; want %s (state %q)", e.Code, e.State, e.Message, code, state)
	}
}

// wantInvalid fails t unless err is an invalid_request naming field with
// exactly message: what the domain says, whichever store says it.
func wantInvalid(t *testing.T, err error, field, message string) {
	t.Helper()
	wantMessage(t, err, airlock.CodeInvalidRequest, "", message)
	if e, _ := errors.AsType[*airlock.Error](err); e.Field != field {
		t.Fatalf("err %q names field %q, want %q", e.Message, e.Field, field)
	}
}

// wantMessage fails t unless err is an *airlock.Error with code and state
// and exactly message.
func wantMessage(t *testing.T, err error, code airlock.Code, state airlock.State, message string) {
	t.Helper()
	wantErr(t, err, code, state)
	if e, _ := errors.AsType[*airlock.Error](err); e.Message != message {
		t.Fatalf("err = %s: %q, want %q", e.Code, e.Message, message)
	}
}

// wantOK fails t on err.
func wantOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
}

// sameRequest fails t unless got and want are identical, field by field and
// byte by byte.
func sameRequest(t *testing.T, what string, got, want airlock.Request) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, show(got), show(want))
	}
}

// show renders v for a failure message.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// ids returns the IDs of rs, in order.
func ids(rs []airlock.Request) []string {
	return mapped(rs, func(r airlock.Request) string { return r.ID })
}

// mapped is f of each of xs, in order.
func mapped[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
