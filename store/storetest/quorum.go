package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// quorum makes a new request need n approvals from the payments group.
func quorum(n int) func(*store.NewRequestParams) {
	return func(p *store.NewRequestParams) {
		p.Request.Reviewers = []string{"payments"}
		p.Request.Approvals = n
	}
}

// vote casts principal's vote (through a token of the same name, in the
// payments group) on request id.
func (b *bundle) vote(id, principal string, status airlock.State) (airlock.Request, error) {
	p := store.DecideParams{ID: id, Status: status, Note: "vote of " + principal, Actor: "tok_" + principal,
		Principal: principal, Groups: []string{"payments"}}
	if status == airlock.StateApproved {
		p.Validity = validity
	}
	return b.store.Decide(b.ctx, p)
}

// principals lists the principals of votes, in order.
func principals(vs []airlock.Vote) []string {
	return mapped(vs, func(v airlock.Vote) string { return v.Principal })
}

// testQuorum checks requests routed to a group and needing several of its
// members' approvals: every vote is kept, the last approval needed or any
// denial decides, and votes cast at once count exactly as many as needed.
func (s *suite) testQuorum(t *testing.T) {
	tests := []test{
		{"each vote is kept and counted; the last approval needed decides", s.votesCounted},
		{"lists carry the votes, summaries count the approvals", s.votesListed},
		{"a denial decides", s.denialDecides},
		{"routing, a second vote and the creator's principal are refused and change nothing", s.votesRefused},
		{"a request routed to a group without quorum is decided by one member", s.routedOneMember},
		{"bad routing and quorum are refused at creation", s.badRouting},
	}
	for _, tc := range []struct{ need, voters int }{{2, 3}, {3, 5}} {
		tests = append(tests, test{fmt.Sprintf("%d of %d voting at once: exactly %d votes count and one decides", tc.need, tc.voters, tc.need),
			func(t *testing.T) { s.votesAtOnce(t, tc.need, tc.voters) }})
	}
	runAll(t, append(tests, test{"a denial racing the last approval: one outcome", s.denialRacesApproval}))
}

// votesAtOnce has voters members approve each of ten requests needing
// need approvals, all at once.
func (s *suite) votesAtOnce(t *testing.T, need, voters int) {
	b := s.setup(t)
	for range 10 {
		r := b.create(t, quorum(need))
		res := make([]airlock.Request, voters)
		errs := make([]error, voters)
		var wg sync.WaitGroup
		for i := range voters {
			wg.Go(func() { res[i], errs[i] = b.vote(r.ID, fmt.Sprintf("p%d", i), airlock.StateApproved) })
		}
		wg.Wait()
		final := b.get(t, r.ID)
		counted, decided := 0, 0
		for i, err := range errs {
			if err != nil {
				wantErr(t, err, airlock.CodeNotPending, airlock.StateApproved)
				continue
			}
			counted++
			if res[i].State == airlock.StateApproved {
				decided++
				sameRequest(t, "the deciding vote's result", res[i], final)
			}
		}
		vs := principals(final.Votes)
		slices.Sort(vs)
		if final.State != airlock.StateApproved || counted != need || decided != 1 ||
			len(slices.Compact(vs)) != need || len(final.Votes) != need {
			t.Fatalf("%s: %s with %d votes counted, %d deciding, votes by %q; want approved, %d counted, 1 deciding",
				r.ID, final.State, counted, decided, vs, need)
		}
	}
}

func (s *suite) votesCounted(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, quorum(2))
	if r.Approvals != 2 || !slices.Equal(r.Reviewers, []string{"payments"}) {
		t.Fatalf("created with approvals %d, reviewers %q; want 2, [payments]", r.Approvals, r.Reviewers)
	}
	first, err := b.vote(r.ID, "ada", airlock.StateApproved)
	wantOK(t, err)
	if first.State != airlock.StatePending || first.Decision != nil || len(first.Votes) != 1 {
		t.Fatalf("after one of two approvals: state %s, decision %v, %d votes; want pending, none, 1", first.State, first.Decision, len(first.Votes))
	}
	v := first.Votes[0]
	if v.Principal != "ada" || v.Actor != "tok_ada" || v.Name != "tok_ada" || v.Status != airlock.StateApproved ||
		v.Note != "vote of ada" || !v.At.Equal(b.clock.Now().Truncate(time.Microsecond)) {
		t.Fatalf("vote = %+v; want ada's approval through tok_ada at %s", v, b.clock.Now())
	}
	sameRequest(t, "read after the first vote", b.get(t, r.ID), first)

	b.clock.Advance(time.Second)
	done, err := b.vote(r.ID, "grace", airlock.StateApproved)
	wantOK(t, err)
	if done.State != airlock.StateApproved || done.Decision == nil {
		t.Fatalf("after two of two approvals: state %s; want approved", done.State)
	}
	d := done.Decision
	if d.DecidedBy != "tok_grace" || d.Note != "vote of grace" || !d.DecidedAt.Equal(b.clock.Now().Truncate(time.Microsecond)) ||
		d.ExpiresAt == nil || !d.ExpiresAt.Equal(d.DecidedAt.Add(validity)) {
		t.Fatalf("decision = %+v; want the completing vote's: by tok_grace, its note, valid %s from it", d, validity)
	}
	if got := principals(done.Votes); !slices.Equal(got, []string{"ada", "grace"}) {
		t.Fatalf("votes by %q, want [ada grace]", got)
	}
	sameRequest(t, "read after the quorum", b.get(t, r.ID), done)

	var types []airlock.EventType
	for _, e := range b.events(t) {
		if e.RequestID == r.ID {
			types = append(types, e.Type)
		}
	}
	want := []airlock.EventType{airlock.EventRequestCreated, airlock.EventRequestVoted, airlock.EventRequestApproved}
	if !slices.Equal(types, want) {
		t.Fatalf("events %q, want %q", types, want)
	}
	_, err = b.vote(r.ID, "linus", airlock.StateApproved)
	wantErr(t, err, airlock.CodeNotPending, airlock.StateApproved)
}

func (s *suite) votesListed(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, quorum(3))
	_, err := b.vote(r.ID, "ada", airlock.StateApproved)
	wantOK(t, err)
	full, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	if len(full) != 1 || len(full[0].Votes) != 1 || full[0].Votes[0].Principal != "ada" {
		t.Fatalf("listed requests = %s; want one with ada's vote", show(full))
	}
	rs, _, err := b.store.ListRequestSummaries(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	if len(rs) != 1 || rs[0].ApprovedVotes != 1 || rs[0].Approvals != 3 || !slices.Equal(rs[0].Reviewers, []string{"payments"}) {
		t.Fatalf("summaries = %s; want one with 1 of 3 approvals, for payments", show(rs))
	}
}

func (s *suite) denialDecides(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, quorum(3))
	_, err := b.vote(r.ID, "ada", airlock.StateApproved)
	wantOK(t, err)
	got, err := b.vote(r.ID, "grace", airlock.StateDenied)
	wantOK(t, err)
	if got.State != airlock.StateDenied || got.Decision.DecidedBy != "tok_grace" || got.Decision.ExpiresAt != nil {
		t.Fatalf("after a denial: %s", show(got))
	}
	if vs := principals(got.Votes); !slices.Equal(vs, []string{"ada", "grace"}) {
		t.Fatalf("votes by %q, want [ada grace]", vs)
	}
}

func (s *suite) votesRefused(t *testing.T) {
	b := s.setup(t)
	owner := airlock.Token{ID: ownerA, Name: "agent", Role: airlock.RoleAgent, Principal: "alice",
		Hash: airlock.HashSecret("agent a"), CreatedAt: epoch.Truncate(time.Microsecond), CreatedBy: "tok_admin"}
	wantOK(t, b.store.CreateToken(b.ctx, owner))
	r := b.create(t, quorum(2))
	_, err := b.vote(r.ID, "ada", airlock.StateApproved)
	wantOK(t, err)
	before := b.get(t, r.ID)

	_, err = b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: validity,
		Actor: "tok_bob", Principal: "bob", Groups: []string{"ops"}})
	wantMessage(t, err, airlock.CodeForbidden, "",
		fmt.Sprintf("request %s is for payments: only members of that group may decide it; others may read it", r.ID))
	_, err = b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateDenied, Actor: "tok_bob", Principal: "bob"})
	wantErr(t, err, airlock.CodeForbidden, "")

	_, err = b.vote(r.ID, "ada", airlock.StateApproved)
	wantErr(t, err, airlock.CodeForbidden, "")
	if !strings.Contains(err.Error(), "ada has already voted") {
		t.Fatalf("second vote: %v; want it to say ada has already voted", err)
	}
	_, err = b.vote(r.ID, "ada", airlock.StateDenied)
	wantErr(t, err, airlock.CodeForbidden, "")

	_, err = b.vote(r.ID, "alice", airlock.StateApproved)
	wantErr(t, err, airlock.CodeForbidden, "")
	sameRequest(t, "after the refused votes", b.get(t, r.ID), before)
	n := 0
	for _, e := range b.events(t) {
		if e.RequestID == r.ID && e.Type == airlock.EventRequestVoted {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d vote events, want 1: refused votes leave none", n)
	}
}

func (s *suite) routedOneMember(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, func(p *store.NewRequestParams) { p.Request.Reviewers = []string{"payments", "sre"} })
	_, err := b.approve(r.ID) // no groups
	wantErr(t, err, airlock.CodeForbidden, "")
	got, err := b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: validity,
		Actor: reviewer, Principal: reviewer, Groups: []string{"eng", "sre"}})
	wantOK(t, err)
	if got.State != airlock.StateApproved || len(got.Votes) != 0 {
		t.Fatalf("routed, one approval: %s", show(got))
	}
}

func (s *suite) badRouting(t *testing.T) {
	b := s.setup(t)
	for name, mod := range map[string]func(*store.NewRequestParams){
		"a control character": func(p *store.NewRequestParams) { p.Request.Reviewers = []string{"pay\x1bments"} },
		"too many approvals":  func(p *store.NewRequestParams) { p.Request.Approvals = airlock.MaxApprovals + 1 },
		"a grant's approval": func(p *store.NewRequestParams) {
			p.Request.Approvals = 2
			p.Grant = &store.GrantUse{IDs: []string{"grt_x"}, Principal: "alice"}
		},
	} {
		_, _, err := b.store.CreateRequest(b.ctx, b.params(mod))
		if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Errorf("%s: err = %v, want invalid_request", name, err)
		}
	}
}

func (s *suite) denialRacesApproval(t *testing.T) {
	b := s.setup(t)
	outcomes := map[airlock.State]int{}
	for range 20 {
		r := b.create(t, quorum(2))
		_, err := b.vote(r.ID, "ada", airlock.StateApproved)
		wantOK(t, err)
		var (
			wg                 sync.WaitGroup
			approveErr, denyEr error
		)
		wg.Go(func() { _, approveErr = b.vote(r.ID, "grace", airlock.StateApproved) })
		wg.Go(func() { _, denyEr = b.vote(r.ID, "linus", airlock.StateDenied) })
		wg.Wait()
		final := b.get(t, r.ID)
		outcomes[final.State]++
		switch final.State {
		case airlock.StateApproved:
			wantOK(t, approveErr)
			wantErr(t, denyEr, airlock.CodeNotPending, airlock.StateApproved)
		case airlock.StateDenied:
			wantOK(t, denyEr)
			wantErr(t, approveErr, airlock.CodeNotPending, airlock.StateDenied)
		default:
			t.Fatalf("%s ended %s", r.ID, final.State)
		}
		if len(final.Votes) != 2 {
			t.Fatalf("%s: %d votes, want 2 (ada's and the winner's)", r.ID, len(final.Votes))
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
