package postgres_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/jackc/pgx/v5"
)

// trips counts what a store sends: each query and each batch (a pipeline
// of statements) is one round trip to the database.
type trips struct{ queries, batches atomic.Int64 }

func (c *trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.batches.Add(1)
	return ctx
}
func (c *trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// since returns the round trips since the last call.
func (c *trips) since() (queries, batches int64) {
	return c.queries.Swap(0), c.batches.Swap(0)
}

// TestRoundTrips pins how many round trips a create takes, which on a busy
// database cost more than the statements (docs/performance.md): a pending
// create is one pipeline, [BEGIN, insert with its event, COMMIT]; a replay
// adds one read, to find the request it replays. Notifications are
// dropped, so that none is sent behind the test's back.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	var c trips
	s := open(t, testkit.SchemaName(t, "t_"), postgres.WithTracerForTest(&c),
		postgres.WithDroppedNotificationsForTest(func() bool { return true }))
	in := instance(t, s, "tok_a")
	create := func(key string) (airlock.Request, bool) {
		t.Helper()
		r, created, err := s.CreateRequest(t.Context(), store.NewRequestParams{
			Request: airlock.Request{InstanceID: in.ID, OwnerID: "tok_a", Tool: "t", Arguments: json.RawMessage(`{"a":1}`),
				IdempotencyKey: key, Fingerprint: "f"},
			Window: time.Minute, Actor: "tok_a",
		})
		if err != nil {
			t.Fatal(err)
		}
		return r, created
	}
	create("warm-up") // statements are prepared once per connection
	c.since()

	first, created := create("k1")
	if q, b := c.since(); !created || q != 0 || b != 1 {
		t.Errorf("a pending create: %d queries and %d pipelines (created %v), want 0 and 1", q, b, created)
	}
	again, created := create("k1")
	if q, b := c.since(); created || again.ID != first.ID || q != 1 || b != 1 {
		t.Errorf("a replay: %d queries and %d pipelines (created %v, %s for %s), want 1 and 1", q, b, created, again.ID, first.ID)
	}
	evs, err := s.ListEvents(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == airlock.EventRequestCreated && e.RequestID == first.ID {
			n++
			if e.At != first.CreatedAt || e.Actor != "tok_a" || e.InstanceID != in.ID || e.State != airlock.StatePending {
				t.Errorf("created event = %+v, want at %v by tok_a on %s, pending", e, first.CreatedAt, in.ID)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d created events for %s, want 1 (none for the replay)", n, first.ID)
	}
}

// TestDecideRoundTrips pins a plain decision (no command, question or
// session; not the reviewer's own principal's request) at one pipeline,
// [BEGIN, decision with its event, COMMIT], and checks that a decision the
// one statement may not take still gets the general path's answer: a
// self-approval is refused, and changes nothing.
func TestDecideRoundTrips(t *testing.T) {
	t.Parallel()
	var c trips
	s := open(t, testkit.SchemaName(t, "t_"), postgres.WithTracerForTest(&c),
		postgres.WithDroppedNotificationsForTest(func() bool { return true }))
	if err := s.CreateToken(t.Context(), airlock.Token{ID: "tok_a", Role: airlock.RoleAgent, Principal: "alice",
		Hash: []byte("hash-a"), CreatedBy: "admin"}); err != nil {
		t.Fatal(err)
	}
	in := instance(t, s, "tok_a")
	create := func() airlock.Request {
		t.Helper()
		r, _, err := s.CreateRequest(t.Context(), params(in))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	decide := func(id string, status airlock.State, principal string) (airlock.Request, error) {
		p := store.DecideParams{ID: id, Status: status, Actor: "tok_r", Principal: principal, Note: "n"}
		if status == airlock.StateApproved {
			p.Validity = time.Minute
		}
		return s.Decide(t.Context(), p)
	}
	decide(create().ID, airlock.StateDenied, "bob") // statements are prepared once per connection
	decide(create().ID, airlock.StateApproved, "bob")

	for _, status := range []airlock.State{airlock.StateApproved, airlock.StateDenied} {
		r := create()
		c.since()
		got, err := decide(r.ID, status, "bob")
		if err != nil || got.State != status || got.Decision == nil || got.Decision.DecidedBy != "tok_r" || got.Decision.Note != "n" {
			t.Fatalf("%s: %+v, %v", status, got, err)
		}
		if q, b := c.since(); q != 0 || b != 1 {
			t.Errorf("a plain %s decision: %d queries and %d pipelines, want 0 and 1", status, q, b)
		}
		evs, err := s.ListEvents(t.Context(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.RequestID == r.ID && e.Type == airlock.StateEvent(status) {
				n++
				if !e.At.Equal(got.Decision.DecidedAt) || e.Actor != "tok_r" || e.State != status || e.InstanceID != in.ID {
					t.Errorf("%s event = %+v, want at %v by tok_r, %s", status, e, got.Decision.DecidedAt, status)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d %s events for %s, want 1", n, status, r.ID)
		}
	}

	own := create()
	if _, err := decide(own.ID, airlock.StateApproved, "alice"); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Errorf("approving a request of one's own principal: %v, want forbidden", err)
	}
	if got, err := s.GetRequest(t.Context(), own.ID); err != nil || got.State != airlock.StatePending {
		t.Errorf("after a refused self-approval: %s, %v; want still pending", got.State, err)
	}
}

// TestTokenCheckRidesAlong: a call through the view of a pending token
// check (Checking) sends it in the pipeline of its first statement, at no
// round trip of its own, and a token revoked or changed since the caller
// read it fails the call, as unauthorized, before its statement runs.
func TestTokenCheckRidesAlong(t *testing.T) {
	t.Parallel()
	var c trips
	s := open(t, testkit.SchemaName(t, "t_"), postgres.WithTracerForTest(&c),
		postgres.WithDroppedNotificationsForTest(func() bool { return true }))
	ctx := t.Context()
	mint := func(id string, role airlock.Role) airlock.Token {
		t.Helper()
		if err := s.CreateToken(ctx, airlock.Token{ID: id, Role: role, Hash: []byte("hash-" + id), CreatedBy: "admin"}); err != nil {
			t.Fatal(err)
		}
		tok, err := s.GetToken(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	agent, reviewer := mint("tok_a", airlock.RoleAgent), mint("tok_r", airlock.RoleReviewer)
	in := instance(t, s, agent.ID)
	checked := func(tok airlock.Token) (store.Store, *airlock.TokenCheck) {
		chk := airlock.NewTokenCheck(tok)
		return s.Checking(chk), chk
	}
	create := func(s store.Store) (airlock.Request, error) {
		r, _, err := s.CreateRequest(ctx, params(in))
		return r, err
	}
	approve := func(s store.Store, id string) (airlock.Request, error) {
		return s.Decide(ctx, store.DecideParams{ID: id, Status: airlock.StateApproved, Validity: time.Minute, Actor: reviewer.ID})
	}
	// Statements are prepared once per connection: warm them up.
	for range 2 {
		cs, _ := checked(agent)
		r, _ := create(cs)
		rs, _ := checked(reviewer)
		approve(rs, r.ID)
		rs.GetRequest(ctx, r.ID)
	}

	passes := func(what string, chk *airlock.TokenCheck, err error) {
		t.Helper()
		q, b := c.since()
		if made, passed := chk.Outcome(); err != nil || !made || !passed || q != 0 || b != 1 {
			t.Errorf("%s with a live token: err %v, check made %v passed %v, %d queries and %d pipelines; want one pipeline",
				what, err, made, passed, q, b)
		}
	}
	c.since()
	cs, chk := checked(agent)
	r, err := create(cs)
	passes("create", chk, err)
	rs, chk := checked(reviewer)
	_, err = rs.GetRequest(ctx, r.ID)
	passes("read", chk, err)
	rs, chk = checked(reviewer)
	_, err = approve(rs, r.ID)
	passes("a decision", chk, err)

	pending, err := create(s)
	if err != nil {
		t.Fatal(err)
	}
	changed := reviewer
	changed.Role = airlock.RoleAdmin
	if _, err := s.RevokeToken(ctx, agent.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, tok airlock.Token, call func(store.Store, *airlock.TokenCheck) error) {
		t.Helper()
		cs, chk := checked(tok)
		err := call(cs, chk)
		if made, passed := chk.Outcome(); airlock.ErrorCode(err) != airlock.CodeUnauthorized || !made || passed {
			t.Errorf("%s: err %v, check made %v passed %v; want unauthorized, check failed", what, err, made, passed)
		}
	}
	refused("a create by a revoked token", agent, func(s store.Store, _ *airlock.TokenCheck) error { _, err := create(s); return err })
	refused("a read by a revoked token", agent, func(s store.Store, _ *airlock.TokenCheck) error {
		_, err := s.GetRequest(ctx, pending.ID)
		return err
	})
	refused("a list by a revoked token", agent, func(s store.Store, _ *airlock.TokenCheck) error {
		_, _, err := s.ListRequests(ctx, store.RequestFilter{})
		return err
	})
	refused("a decision by a token whose role changed", changed, func(s store.Store, _ *airlock.TokenCheck) error {
		_, err := approve(s, pending.ID)
		return err
	})
	refused("a check on its own", agent, func(_ store.Store, chk *airlock.TokenCheck) error { return s.CheckToken(ctx, chk) })
	if got, err := s.GetRequest(ctx, pending.ID); err != nil || got.State != airlock.StatePending {
		t.Errorf("after a refused decision: %s, %v; want pending", got.State, err)
	}
	if all, _, err := s.ListRequests(ctx, store.RequestFilter{}); err != nil || len(all) != 4 {
		t.Errorf("%d requests (%v), want 4: the refused create inserted one", len(all), err)
	}
}
