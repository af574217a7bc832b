package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testExtras checks each optional part the store has (Store.Extras), as
// every driver that has one must keep it. A driver's own tests say which
// parts it has.
func (s *suite) testExtras(t *testing.T) {
	clock := NewFakeClock(epoch)
	probe := s.newStore(t, clock)
	x := probe.Extras()
	wantOK(t, probe.Close())
	if x.TokenStamp != nil {
		t.Run("TokenStamp", s.testTokenStamp)
	}
	if x.TokenCheck != nil {
		t.Run("TokenCheck", s.testTokenCheck)
	}
	if x.Feed != nil {
		t.Run("Feed", s.testFeed)
	}
}

// testTokenStamp: the stamp moves when a token is revoked or replaced,
// before the call returns, and holds still while no token changes.
func (s *suite) testTokenStamp(t *testing.T) {
	t.Parallel()
	b := s.setup(t)
	stamp := b.store.Extras().TokenStamp
	read := func() uint64 {
		t.Helper()
		v, err := stamp.TokenStamp()
		wantOK(t, err)
		return v
	}
	tok := airlock.Token{ID: "tok_a", Name: "agent", Role: airlock.RoleAgent, Hash: airlock.HashSecret("first"), CreatedBy: "tok_admin"}
	wantOK(t, b.store.CreateToken(b.ctx, tok))
	before := read()
	_, err := b.store.TokenByHash(b.ctx, tok.Hash)
	wantOK(t, err)
	b.create(t)
	if after := read(); after != before {
		t.Fatalf("the stamp moved from %d to %d with no token changed", before, after)
	}
	_, err = b.store.RevokeToken(b.ctx, tok.ID, "tok_admin")
	wantOK(t, err)
	revoked := read()
	if revoked == before {
		t.Fatal("the stamp held still across a revocation")
	}
	tok.Hash = airlock.HashSecret("second")
	wantOK(t, b.store.PutToken(b.ctx, tok))
	if read() == revoked {
		t.Fatal("the stamp held still across a token's replacement")
	}
}

// testTokenCheck: a call through the view Checking returns makes its
// pending token check before its effects: a live token's call succeeds and
// the check passes, once, for every call through the view; a revoked
// token's call, or one whose token changed since the caller read it, fails
// as unauthorized and changes nothing; CheckToken makes the check alone.
func (s *suite) testTokenCheck(t *testing.T) {
	t.Parallel()
	b := s.setup(t)
	checker := b.store.Extras().TokenCheck
	mint := func(id string, role airlock.Role) airlock.Token {
		t.Helper()
		wantOK(t, b.store.CreateToken(b.ctx, airlock.Token{ID: id, Name: id, Role: role, Hash: airlock.HashSecret(id), CreatedBy: "tok_admin"}))
		tok, err := b.store.GetToken(b.ctx, id)
		wantOK(t, err)
		return tok
	}
	agent, rev := mint(ownerA, airlock.RoleAgent), mint(reviewer, airlock.RoleReviewer)
	outcome := func(what string, chk *airlock.TokenCheck, err error, wantPassed bool) {
		t.Helper()
		made, passed := chk.Outcome()
		switch {
		case wantPassed && (err != nil || !made || !passed):
			t.Errorf("%s with a live token: %v, check made %v passed %v; want it done, the check passed", what, err, made, passed)
		case !wantPassed && (airlock.ErrorCode(err) != airlock.CodeUnauthorized || !made || passed):
			t.Errorf("%s: %v, check made %v passed %v; want unauthorized, the check failed", what, err, made, passed)
		}
	}
	chk := airlock.NewTokenCheck(agent)
	view := checker.Checking(chk)
	r, _, err := view.CreateRequest(b.ctx, b.params())
	outcome("a create", chk, err, true)
	_, err = view.GetRequest(b.ctx, r.ID)
	outcome("a read after the check passed", chk, err, true)
	chk = airlock.NewTokenCheck(rev)
	_, err = checker.Checking(chk).GetRequest(b.ctx, r.ID)
	outcome("a read", chk, err, true)
	chk = airlock.NewTokenCheck(rev)
	outcome("a check on its own", chk, checker.CheckToken(b.ctx, chk), true)
	wantOK(t, checker.CheckToken(b.ctx, chk)) // made: nothing to do

	pending := b.create(t)
	before := b.events(t)
	_, err = b.store.RevokeToken(b.ctx, agent.ID, "tok_admin")
	wantOK(t, err)
	changed := rev
	changed.Role = airlock.RoleAdmin
	chk = airlock.NewTokenCheck(agent)
	_, _, err = checker.Checking(chk).CreateRequest(b.ctx, b.params())
	outcome("a create by a revoked token", chk, err, false)
	chk = airlock.NewTokenCheck(agent)
	_, err = checker.Checking(chk).Cancel(b.ctx, pending.ID, agent.ID)
	outcome("a cancellation by a revoked token", chk, err, false)
	chk = airlock.NewTokenCheck(agent)
	_, err = checker.Checking(chk).GetRequest(b.ctx, pending.ID)
	outcome("a read by a revoked token", chk, err, false)
	chk = airlock.NewTokenCheck(changed)
	_, err = checker.Checking(chk).Decide(b.ctx, store.DecideParams{ID: pending.ID, Status: airlock.StateApproved, Validity: validity, Actor: rev.ID})
	outcome("a decision by a token whose role changed", chk, err, false)
	chk = airlock.NewTokenCheck(agent)
	outcome("a check on its own of a revoked token", chk, checker.CheckToken(b.ctx, chk), false)

	if got := b.get(t, pending.ID); got.State != airlock.StatePending {
		t.Errorf("after the refused calls the request is %s, want pending", got.State)
	}
	if after := b.events(t); len(after) != len(before)+1 {
		t.Errorf("%d events after the refused calls, want %d: the revocation's alone", len(after), len(before)+1)
	}
}

// testFeed: Listen first says that notifications may have been missed
// (changed(nil)), then announces the ID of every request changed; it
// returns nil when its context ends.
func (s *suite) testFeed(t *testing.T) {
	t.Parallel()
	b := s.setup(t)
	feed := b.store.Extras().Feed
	heard := make(chan []string, 64)
	ctx, cancel := context.WithCancel(b.ctx)
	listened := make(chan error, 1)
	go func() { listened <- feed.Listen(ctx, func(ids []string) { heard <- ids }) }()
	defer func() {
		cancel()
		if err := <-listened; err != nil {
			t.Errorf("Listen = %v, want nil once its context ends", err)
		}
	}()
	if first := <-heard; first != nil {
		t.Fatalf("Listen's first call = %v, want nil", first)
	}
	r := b.create(t)
	_, err := b.approve(r.ID)
	wantOK(t, err)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ids := <-heard:
			if slices.Contains(ids, r.ID) {
				return
			}
		case <-timeout:
			t.Fatalf("Listen never announced request %s", r.ID)
		}
	}
}
