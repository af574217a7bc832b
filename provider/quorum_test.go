package provider

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/checker"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/policy"
)

// quorumRules: refunds need two of the payments group (bob, dave, erin);
// tool "three" needs three of them and frank.
const quorumRules = `groups:
  payments: [bob, dave, erin]
  wide: [bob, dave, erin, frank, gina]
  leads: [frank]
rules:
  - {name: refunds, match: 'request.tool == "issue_refund"', action: ask, reviewers: payments, approvals: 2}
  - {name: three, match: 'request.tool == "three"', action: ask, reviewers: wide, approvals: 3}
  - {name: escalating, match: 'request.tool == "deploy"', action: ask, reviewers: payments, escalate_after: 10m, escalate_to: leads}
`

// quorumSetup is setup with quorumRules in force, from a real file.
func quorumSetup(t testing.TB, opt options) *bundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(quorumRules), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := policy.NewEngine(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	opt.policy, opt.groups = e, e
	return setup(t, opt)
}

// TestGroupsFromConfiguration: a token caller's groups are those the
// policy file lists its principal in, joined to any its sign-in brought;
// a non-member is refused with the group named, a member's approval is a
// vote, and a routed request takes no grant.
func TestGroupsFromConfiguration(t *testing.T) {
	t.Parallel()
	b := quorumSetup(t, options{})
	ctx := t.Context()
	dave := b.mint(t, airlock.RoleReviewer, "dave")
	frank := b.mint(t, airlock.RoleReviewer, "frank")
	if got := b.svc.GroupsOf(dave); !slices.Equal(got, []string{"payments", "wide"}) {
		t.Fatalf("GroupsOf(dave) = %q", got)
	}
	signedIn := frank
	signedIn.Groups = []string{"sre"}
	if got := b.svc.GroupsOf(signedIn); !slices.Equal(got, []string{"sre", "leads", "wide"}) {
		t.Fatalf("GroupsOf(frank signed in with sre) = %q, want [sre leads wide]", got)
	}

	// A grant that would cover the call is not used: the request is routed.
	if _, err := b.svc.CreateGrant(ctx, b.reviewer, airlock.GrantInput{Tool: "issue_refund", Arguments: call("").Arguments,
		InstanceID: b.inst.ID, ExpiresIn: "1h"}); err != nil {
		t.Fatal(err)
	}
	r := b.create(t, "10m")
	if r.State != airlock.StatePending || !slices.Equal(r.Reviewers, []string{"payments"}) || r.Approvals != 2 {
		t.Fatalf("created %s for %q needing %d; want pending, for payments, needing 2", r.State, r.Reviewers, r.Approvals)
	}
	if b.svc.MayDecide(frank, r) || !b.svc.MayDecide(dave, r) {
		t.Fatal("MayDecide: frank may, or dave may not")
	}
	_, err := b.svc.Decide(ctx, frank, r.ID, airlock.DecisionInput{Status: airlock.StateDenied})
	if airlock.ErrorCode(err) != airlock.CodeForbidden || !strings.Contains(err.Error(), "is for payments") {
		t.Fatalf("frank's denial: %v; want forbidden naming payments", err)
	}
	_, _, err = b.svc.DecideGrant(ctx, dave, r.ID, airlock.DecisionInput{Status: airlock.StateApproved, Grant: &airlock.DecisionGrant{ExpiresIn: "1h"}})
	if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("approving with a grant: %v; want invalid_request", err)
	}
	got, err := b.svc.Decide(ctx, dave, r.ID, airlock.DecisionInput{Status: airlock.StateApproved})
	if err != nil || got.State != airlock.StatePending || got.QuorumProgress() != "1 of 2 approvals (reviewer of dave)" {
		t.Fatalf("dave's vote: %v, %s, %q", err, got.State, got.QuorumProgress())
	}
	got, err = b.svc.Decide(ctx, b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved})
	if err != nil || got.State != airlock.StateApproved || len(got.Votes) != 2 {
		t.Fatalf("bob's vote: %v, %s, %d votes", err, got.State, len(got.Votes))
	}
}

// TestQuorumRacesOnSQLite is T29 on SQLite through the service: 2-of-3
// and 3-of-5 votes fired at once, with the creator's principal voting, a
// member voting twice and sometimes a denial racing the approvals; the
// history checker judges the lot.
func TestQuorumRacesOnSQLite(t *testing.T) {
	t.Parallel()
	b := quorumSetup(t, options{realClock: true})
	ctx := t.Context()
	members := map[string][]airlock.Caller{}
	for _, p := range []string{"bob", "dave", "erin", "frank", "gina"} {
		c := b.mint(t, airlock.RoleReviewer, p)
		members["three"] = append(members["three"], c)
		if p != "frank" && p != "gina" {
			members["issue_refund"] = append(members["issue_refund"], c)
		}
	}
	var rec checker.Recorder
	for round := range 40 {
		tool := "issue_refund"
		if round%2 == 1 {
			tool = "three"
		}
		in := call("1m")
		in.Tool = tool
		create := checker.Op{Client: 0, Kind: checker.Create, Principal: "alice", Call: time.Now()}
		cr, _, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, newKey(), in)
		create.Return = time.Now()
		create.SetResult(cr, err)
		rec.Add(create)
		if err != nil {
			t.Fatal(err)
		}
		voters := append(slices.Clone(members[tool]), b.selfReviewer, members[tool][round%len(members[tool])])
		var wg sync.WaitGroup
		for i, c := range voters {
			kind, status := checker.Approve, airlock.StateApproved
			if round%3 == 0 && i == 1 {
				kind, status = checker.Deny, airlock.StateDenied
			}
			wg.Go(func() {
				op := checker.Op{Client: 1 + i, Kind: kind, RequestID: cr.ID, Principal: c.Principal, Call: time.Now()}
				r, err := b.svc.Decide(ctx, c, cr.ID, airlock.DecisionInput{Status: status})
				op.Return = time.Now()
				op.SetResult(r, err)
				rec.Add(op)
			})
		}
		wg.Wait()
	}
	rep := checker.Check(rec.Ops(), checker.Options{Complete: true})
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if rep.Outcomes[airlock.StateApproved] == 0 || rep.Outcomes[airlock.StateDenied] == 0 {
		t.Fatalf("outcomes %v: want approvals and denials", rep.Outcomes)
	}
	t.Logf("%d requests, %d ops, outcomes %v", rep.Requests, rep.Ops, rep.Outcomes)
}

// BenchmarkQuorumLifecycle: the lifecycle of a request (create, its
// decisions, the claim of its execution) at one client on SQLite (a real
// file, the real clock), alternating, in one run, a request one approval
// decides and one that needs two, so that both meet the same load of a
// shared machine. Each vote is one conditional write (and its vote row),
// so the second lifecycle costs one write more. It reports each one's
// lifecycles per second and their ratio (the two-vote one's over the
// one-vote one's). AIRLOCK_BENCH_DB_DIR puts the database in another
// directory.
func BenchmarkQuorumLifecycle(b *testing.B) {
	opt := options{realClock: true}
	if dir := os.Getenv("AIRLOCK_BENCH_DB_DIR"); dir != "" {
		opt.path = filepath.Join(dir, airlock.NewID("bench_")+".db")
		b.Cleanup(func() { os.Remove(opt.path) })
	}
	bb := quorumSetup(b, opt)
	ctx := b.Context()
	dave := bb.mint(b, airlock.RoleReviewer, "dave")
	lifecycle := func(tool string, voters ...airlock.Caller) time.Duration {
		start := time.Now()
		in := call("")
		in.Tool = tool
		r, _, err := bb.svc.CreateRequest(ctx, bb.agent, bb.inst.ID, newKey(), in)
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range voters {
			if r, err = bb.svc.Decide(ctx, v, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
				b.Fatal(err)
			}
		}
		if r.State != airlock.StateApproved {
			b.Fatalf("after %d approvals: %s", len(voters), r.State)
		}
		if _, err := bb.svc.Claim(ctx, bb.agent, r.ID); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	testkit.Alternate(b, "1-vote/s", func() time.Duration { return lifecycle("one", dave) },
		"2-vote/s", func() time.Duration { return lifecycle("issue_refund", dave, bb.reviewer) })
}

// TestEscalation: a request routed to payments that waits its
// escalate_after is widened to leads, once; then a lead may decide it.
func TestEscalation(t *testing.T) {
	t.Parallel()
	b := quorumSetup(t, options{})
	ctx := t.Context()
	frank := b.mint(t, airlock.RoleReviewer, "frank")
	in := call("1h")
	in.Tool = "deploy"
	r, _, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, newKey(), in)
	if err != nil || !slices.Equal(r.EscalateTo, []string{"leads"}) || r.EscalateAfter != 10*time.Minute {
		t.Fatalf("create: %v, escalate to %q after %s", err, r.EscalateTo, r.EscalateAfter)
	}
	if n, err := b.svc.EscalateDue(ctx); n != 0 || err != nil {
		t.Fatalf("EscalateDue before it is due = %d, %v", n, err)
	}
	if _, err := b.svc.Decide(ctx, frank, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("a lead before the escalation: %v, want forbidden", err)
	}
	b.clock.Advance(10 * time.Minute)
	if n, err := b.svc.EscalateDue(ctx); n != 1 || err != nil {
		t.Fatalf("EscalateDue when due = %d, %v; want 1", n, err)
	}
	if n, err := b.svc.EscalateDue(ctx); n != 0 || err != nil {
		t.Fatalf("EscalateDue again = %d, %v; want 0", n, err)
	}
	got, err := b.svc.Decide(ctx, frank, r.ID, airlock.DecisionInput{Status: airlock.StateApproved})
	if err != nil || got.State != airlock.StateApproved || !slices.Equal(got.Reviewers, []string{"payments", "leads"}) || got.EscalatedAt == nil {
		t.Fatalf("a lead after the escalation: %v, %s for %q", err, got.State, got.Reviewers)
	}
}

// TestOIDCReviewerGroups: an OIDC reviewer's groups come from the
// identity provider's claim: one in payments votes on a request routed
// there; one signed in without it is refused.
func TestOIDCReviewerGroups(t *testing.T) {
	t.Parallel()
	b := quorumSetup(t, options{})
	ctx := t.Context()
	r := b.create(t, "10m")
	olga := oidcCaller(airlock.WebSession{Principal: "oidc:https://idp.example#olga", Name: "Olga", Groups: []string{"payments"}})
	oscar := oidcCaller(airlock.WebSession{Principal: "oidc:https://idp.example#oscar", Name: "Oscar", Groups: []string{"marketing"}})
	if _, err := b.svc.Decide(ctx, oscar, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("oscar (marketing) voting: %v, want forbidden", err)
	}
	got, err := b.svc.Decide(ctx, olga, r.ID, airlock.DecisionInput{Status: airlock.StateApproved})
	if err != nil || got.State != airlock.StatePending || len(got.Votes) != 1 || got.Votes[0].Principal != olga.Principal {
		t.Fatalf("olga (payments) voting: %v, %s, %+v", err, got.State, got.Votes)
	}
}
