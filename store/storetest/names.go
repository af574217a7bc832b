package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testNames checks what a store reads with a request for people to read it
// by: the names of its instance, of the token that made it and of the
// token that decided it (a decider that is no token reads as it is), and a
// summary's start of the arguments.
func (s *suite) testNames(t *testing.T) {
	runAll(t, []test{
		{"instance, creator and decider names", s.namesRead},
		{"unknown tokens and instances read as empty names", s.namesUnknown},
		{"a summary keeps the start of the arguments", s.summaryArgumentsHead},
	})
}

func (s *suite) namesRead(t *testing.T) {
	b := s.setup(t)
	for _, tok := range []airlock.Token{
		{ID: ownerA, Name: "release bot 🤖", Role: airlock.RoleAgent, Principal: "bot"},
		{ID: reviewer, Name: "Carol", Role: airlock.RoleReviewer, Principal: "carol"},
	} {
		tok.Hash = airlock.HashSecret(tok.ID)
		tok.CreatedAt = epoch.Truncate(time.Microsecond)
		wantOK(t, b.store.CreateToken(b.ctx, tok))
	}
	r := b.create(t)
	if r.InstanceName != b.inst.Name || r.OwnerName != "release bot 🤖" {
		t.Fatalf("created: instance name %q, owner name %q; want %q, %q", r.InstanceName, r.OwnerName, b.inst.Name, "release bot 🤖")
	}
	d, err := b.approve(r.ID)
	wantOK(t, err)
	if d.Decision.DecidedByName != "Carol" {
		t.Fatalf("Decide returned decided_by_name %q, want Carol", d.Decision.DecidedByName)
	}
	sameRequest(t, "decided, then read", b.get(t, r.ID), d)
	sums, _, err := b.store.ListRequestSummaries(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	if len(sums) != 1 {
		t.Fatalf("listed %d summaries, want 1", len(sums))
	}
	sameSummary(t, "summary", sums[0], d.Summary())
	if sums[0].Decision.DecidedByName != "Carol" || sums[0].OwnerName != "release bot 🤖" || sums[0].InstanceName != b.inst.Name {
		t.Fatalf("summary names: %s", show(sums[0]))
	}
	rs, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	sameRequest(t, "listed", rs[0], d)

	// Deciders that are no token read as they are.
	for _, actor := range []string{"policy:refunds-under-50", "grant:gr_123"} {
		r := b.create(t)
		d, err := b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateDenied, Actor: actor})
		wantOK(t, err)
		if d.Decision.DecidedBy != actor || d.Decision.DecidedByName != actor {
			t.Fatalf("decided by %q: decided_by %q, decided_by_name %q", actor, d.Decision.DecidedBy, d.Decision.DecidedByName)
		}
	}
	e := b.into(t, airlock.StateExpired)
	if got := b.get(t, e.ID).Decision.DecidedByName; got != airlock.ActorExpiry {
		t.Fatalf("expired: decided_by_name %q, want %q", got, airlock.ActorExpiry)
	}
}

func (s *suite) namesUnknown(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	if r.OwnerName != "" || r.InstanceName != b.inst.Name {
		t.Fatalf("owner name %q (no such token), instance name %q", r.OwnerName, r.InstanceName)
	}
	d, err := b.deny(r.ID)
	wantOK(t, err)
	if d.Decision.DecidedByName != reviewer {
		t.Fatalf("decided_by_name %q, want the ID %q of a token the store does not hold", d.Decision.DecidedByName, reviewer)
	}
}

func (s *suite) summaryArgumentsHead(t *testing.T) {
	b := s.setup(t)
	long := `{"statement":"` + strings.Repeat("é", airlock.ArgumentsHeadLen) + `"}`
	for _, args := range []string{`{"to":"ana@example.com"}`, long, ""} {
		r := b.create(t, func(p *store.NewRequestParams) { p.Request.Arguments = json.RawMessage(args) })
		sums, _, err := b.store.ListRequestSummaries(b.ctx, store.RequestFilter{})
		wantOK(t, err)
		sameSummary(t, "summary of "+r.ID, sums[0], b.get(t, r.ID).Summary())
		wantHead, wantCut := args, false
		if args == long {
			wantHead, wantCut = string([]rune(long)[:airlock.ArgumentsHeadLen]), true
		}
		if sums[0].ArgumentsHead != wantHead || sums[0].ArgumentsCut != wantCut {
			t.Fatalf("arguments %.40q…: head %q cut %v", args, sums[0].ArgumentsHead, sums[0].ArgumentsCut)
		}
	}
}
