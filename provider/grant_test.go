package provider

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// grant makes a grant as the reviewer, failing the test if it cannot.
func (b *bundle) grant(t testing.TB, in airlock.GrantInput) airlock.Grant {
	t.Helper()
	g, err := b.svc.CreateGrant(t.Context(), b.reviewer, in)
	if err != nil {
		t.Fatalf("CreateGrant: %v", err)
	}
	return g
}

// refundGrant covers the bundle's refund call on its instance.
func (b *bundle) refundGrant(uses int) airlock.GrantInput {
	return airlock.GrantInput{Tool: "issue_refund", Arguments: call("").Arguments, InstanceID: b.inst.ID,
		Uses: &uses, ExpiresIn: "1h"}
}

func wantGrantDecision(t *testing.T, r airlock.Request, g airlock.Grant) {
	t.Helper()
	if r.State != airlock.StateApproved || r.Decision.DecidedBy != "grant:"+g.ID {
		t.Fatalf("request %s by %+v, want approved by grant:%s", r.State, r.Decision, g.ID)
	}
}

// A grant approves the calls it covers, each using one of its uses; the
// approval's event names it; a call it does not cover is asked; it never
// covers a question; once used up, calls are asked again.
func TestGrantApprovesWhatItCovers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	g := b.grant(t, b.refundGrant(2))
	if g.State != airlock.GrantLive || *g.UsesLeft != 2 || g.Validity != b.svc.Limits().ApprovalValidity ||
		g.CreatedByPrincipal != "bob" || g.ExpiresAt.Sub(g.CreatedAt) != time.Hour {
		t.Fatalf("grant = %+v", g)
	}
	r := b.create(t, "")
	wantGrantDecision(t, r, g)
	evs := b.events(t)
	if last := evs[len(evs)-1]; last.Type != airlock.EventRequestApproved || last.Actor != "grant:"+g.ID {
		t.Fatalf("last event %+v, want the approval by the grant", last)
	}

	other := call("")
	other.Arguments = json.RawMessage(`{"payment_id":"payment_999","amount":4900,"currency":"GBP"}`)
	if r, _, err := b.svc.CreateRequest(t.Context(), b.agent, b.inst.ID, newKey(), other); err != nil || r.State != airlock.StatePending {
		t.Fatalf("other arguments: %s %v, want pending", r.State, err)
	}
	// The same arguments in another order and spacing are the same.
	same := call("")
	same.Arguments = json.RawMessage(`{ "currency":"GBP", "amount":4900, "payment_id":"payment_123" }`)
	r, _, err := b.svc.CreateRequest(t.Context(), b.agent, b.inst.ID, newKey(), same)
	if err != nil {
		t.Fatal(err)
	}
	wantGrantDecision(t, r, g)
	if q := b.question(t, "yes", "no"); q.State != airlock.StatePending {
		t.Fatalf("a question was approved: %+v", q.Decision)
	}
	if r := b.create(t, ""); r.State != airlock.StatePending {
		t.Fatalf("third call on a grant of 2: %s by %+v", r.State, r.Decision)
	}
	got, err := b.svc.Grant(t.Context(), b.reviewer, g.ID)
	if err != nil || got.State != airlock.GrantUsedUp || *got.UsesLeft != 0 {
		t.Fatalf("grant after its uses: %+v %v", got, err)
	}
}

// A policy rule decides before any grant does.
func TestPolicyDecidesBeforeGrants(t *testing.T) {
	t.Parallel()
	pol := &decideAll{verdict: airlock.PolicyVerdict{Initial: &airlock.InitialDecision{
		Status: airlock.StateDenied, DecidedBy: airlock.PolicyActor("no-refunds")}}}
	b := setup(t, options{policy: pol})
	g := b.grant(t, b.refundGrant(2))
	if r := b.create(t, ""); r.State != airlock.StateDenied || r.Decision.DecidedBy != "policy:no-refunds" {
		t.Fatalf("request %s by %+v, want denied by the rule", r.State, r.Decision)
	}
	if got, _ := b.svc.Grant(t.Context(), b.reviewer, g.ID); *got.UsesLeft != 2 {
		t.Fatalf("the grant was used: %d left", *got.UsesLeft)
	}
}

// A CEL grant covers what its expression matches, in the policy's
// language; an expression that does not compile is refused.
func TestCELGrant(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	in := airlock.GrantInput{Tool: "issue_refund", Match: `request.arguments.amount < 5000 && agent.principal == "alice"`,
		Agent: b.agent.ID, ExpiresIn: "10m"}
	g := b.grant(t, in)
	if g.Match.Kind != airlock.MatchCEL || g.AgentID != b.agent.ID || g.Uses != nil {
		t.Fatalf("grant = %+v", g)
	}
	wantGrantDecision(t, b.create(t, ""), g)
	big := call("")
	big.Arguments = json.RawMessage(`{"payment_id":"payment_123","amount":9900,"currency":"GBP"}`)
	if r, _, err := b.svc.CreateRequest(t.Context(), b.agent, b.inst.ID, newKey(), big); err != nil || r.State != airlock.StatePending {
		t.Fatalf("a call the expression does not match: %s %v", r.State, err)
	}
	in.Match = `request.arguments.amount <`
	_, err := b.svc.CreateGrant(t.Context(), b.reviewer, in)
	if airlock.ErrorCode(err) != airlock.CodeInvalidRequest || !strings.Contains(err.Error(), "CEL") {
		t.Fatalf("bad expression: %v", err)
	}
}

// A service given no compiler of expressions takes grants of the same
// arguments only: a CEL grant is refused, saying so, and one stored
// anyway (by a server that compiles them, on the same database) covers
// nothing.
func TestCELGrantWithoutExpressions(t *testing.T) {
	t.Parallel()
	b := setup(t, options{noExpressions: true})
	in := airlock.GrantInput{Tool: "issue_refund", Match: "true", Agent: b.agent.ID, ExpiresIn: "10m"}
	_, err := b.svc.CreateGrant(t.Context(), b.reviewer, in)
	if airlock.ErrorCode(err) != airlock.CodeInvalidRequest || !strings.Contains(err.Error(), "compiles no CEL expressions") {
		t.Fatalf("a CEL grant without a compiler: %v", err)
	}
	g := airlock.Grant{ID: airlock.NewID(airlock.PrefixGrant), Tool: "issue_refund", AgentID: b.agent.ID,
		Match:    airlock.GrantMatch{Kind: airlock.MatchCEL, Expression: "true"},
		Validity: time.Minute, CreatedBy: b.reviewer.ID, CreatedByPrincipal: "bob"}
	if _, err := b.store.CreateGrant(t.Context(), store.NewGrantParams{Grant: g, Lifetime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if r := b.create(t, ""); r.State != airlock.StatePending {
		t.Fatalf("a call a stored CEL grant would cover: %s, want pending", r.State)
	}
}

// No reviewer grants for requests of their own principal; agents cannot
// grant; admins can; a grant needs an expiry and one scope.
func TestGrantRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	in := b.refundGrant(3)
	_, err := b.svc.CreateGrant(ctx, b.selfReviewer, in)
	if airlock.ErrorCode(err) != airlock.CodeForbidden || !strings.Contains(err.Error(), "your own principal") {
		t.Fatalf("self grant on the instance: %v", err)
	}
	byAgent := airlock.GrantInput{Tool: "issue_refund", Arguments: in.Arguments, Agent: b.agent.ID, ExpiresIn: "1h"}
	if _, err := b.svc.CreateGrant(ctx, b.selfReviewer, byAgent); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("self grant on the agent: %v", err)
	}
	if _, err := b.svc.CreateGrant(ctx, b.agent, in); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("agent grant: %v", err)
	}
	if _, err := b.svc.CreateGrant(ctx, b.admin, in); err != nil {
		t.Fatalf("admin grant: %v", err)
	}
	for name, mod := range map[string]func(*airlock.GrantInput){
		"no expiry":      func(g *airlock.GrantInput) { g.ExpiresIn = "" },
		"two scopes":     func(g *airlock.GrantInput) { g.Agent = b.agent.ID },
		"no scope":       func(g *airlock.GrantInput) { g.InstanceID = "" },
		"no arguments":   func(g *airlock.GrantInput) { g.Arguments = nil },
		"zero uses":      func(g *airlock.GrantInput) { g.Uses = new(0) },
		"too long":       func(g *airlock.GrantInput) { g.ExpiresIn = "800h" },
		"reviewer agent": func(g *airlock.GrantInput) { g.InstanceID, g.Agent = "", b.reviewer.ID },
		"unknown agent":  func(g *airlock.GrantInput) { g.InstanceID, g.Agent = "", "tok_missing" },
		"bad tool":       func(g *airlock.GrantInput) { g.Tool = "no spaces" },
		"long valid_for": func(g *airlock.GrantInput) { g.ValidFor = "48h" },
	} {
		g := in
		mod(&g)
		if _, err := b.svc.CreateGrant(ctx, b.reviewer, g); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}
	g := in
	g.InstanceID = "ins_missing"
	if _, err := b.svc.CreateGrant(ctx, b.reviewer, g); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("unknown instance: %v", err)
	}
	// A grant made by the agent's own principal (through another
	// principal's token, renamed later, say) is never used for it: the
	// store checks too.
}

// A grant ends at its revocation, its expiry, its instance's deletion and
// its creator's revocation: the next covered call is asked.
func TestGrantEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()

	g := b.grant(t, b.refundGrant(10))
	wantGrantDecision(t, b.create(t, ""), g)
	rv, err := b.svc.RevokeGrant(ctx, b.reviewer, g.ID)
	if err != nil || rv.State != airlock.GrantRevoked {
		t.Fatalf("revoke: %+v %v", rv, err)
	}
	if r := b.create(t, ""); r.State != airlock.StatePending {
		t.Fatalf("after revocation: %s", r.State)
	}

	g = b.grant(t, b.refundGrant(10))
	b.clock.Advance(time.Hour)
	if r := b.create(t, ""); r.State != airlock.StatePending {
		t.Fatalf("after expiry: %s", r.State)
	}

	carol := b.mint(t, airlock.RoleReviewer, "carol")
	in := b.refundGrant(10)
	in.Agent, in.InstanceID = b.agent.ID, ""
	g, err = b.svc.CreateGrant(ctx, carol, in)
	if err != nil {
		t.Fatal(err)
	}
	wantGrantDecision(t, b.create(t, ""), g)
	if _, err := b.svc.RevokeToken(ctx, b.admin, carol.ID); err != nil {
		t.Fatal(err)
	}
	if r := b.create(t, ""); r.State != airlock.StatePending {
		t.Fatalf("after the creator's revocation: %s", r.State)
	}

	g = b.grant(t, b.refundGrant(10))
	if _, err := b.svc.DeleteInstance(ctx, b.agent, b.inst.ID); err != nil {
		t.Fatal(err)
	}
	got, err := b.svc.Grant(ctx, b.reviewer, g.ID)
	if err != nil || got.State != airlock.GrantInstanceDeleted {
		t.Fatalf("after the instance's deletion: %+v %v", got, err)
	}
	live, err := b.svc.Grants(ctx, b.reviewer, store.GrantFilter{Live: true})
	if err != nil || len(live) != 0 {
		t.Fatalf("live grants: %+v %v", live, err)
	}
}

// An approval may make a grant for the same call; the grant names the
// request; a denial, a question, or a self-approval makes none, and a
// refused grant leaves the request pending.
func TestDecideWithGrant(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	first := b.create(t, "")
	uses := 2
	r, g, err := b.svc.DecideGrant(ctx, b.reviewer, first.ID, airlock.DecisionInput{Status: airlock.StateApproved, ValidFor: "2m",
		Grant: &airlock.DecisionGrant{Uses: &uses, ExpiresIn: "1h"}})
	if err != nil || r.State != airlock.StateApproved || g == nil {
		t.Fatalf("approve with a grant: %v %+v %v", r.State, g, err)
	}
	if g.RequestID != first.ID || g.InstanceID != b.inst.ID || g.Validity != 2*time.Minute || *g.UsesLeft != 2 ||
		g.Match.Kind != airlock.MatchSameArguments {
		t.Fatalf("grant = %+v", g)
	}
	wantGrantDecision(t, b.create(t, ""), *g)
	wantGrantDecision(t, b.create(t, ""), *g)
	if r := b.create(t, ""); r.State != airlock.StatePending {
		t.Fatalf("after the grant's uses: %s", r.State)
	}

	pending := b.create(t, "")
	_, _, err = b.svc.DecideGrant(ctx, b.reviewer, pending.ID, airlock.DecisionInput{Status: airlock.StateDenied,
		Grant: &airlock.DecisionGrant{ExpiresIn: "1h"}})
	if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("deny with a grant: %v", err)
	}
	_, _, err = b.svc.DecideGrant(ctx, b.reviewer, pending.ID, airlock.DecisionInput{Status: airlock.StateApproved,
		Grant: &airlock.DecisionGrant{}})
	if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("a grant without expiry: %v", err)
	}
	_, _, err = b.svc.DecideGrant(ctx, b.selfReviewer, pending.ID, airlock.DecisionInput{Status: airlock.StateApproved,
		Grant: &airlock.DecisionGrant{ExpiresIn: "1h"}})
	if airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("self-approval with a grant: %v", err)
	}
	q := b.question(t, "yes", "no")
	_, _, err = b.svc.DecideGrant(ctx, b.reviewer, q.ID, airlock.DecisionInput{Status: airlock.StateApproved, Answer: "yes",
		Grant: &airlock.DecisionGrant{ExpiresIn: "1h"}})
	if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("a grant on a question: %v", err)
	}
	if r := b.stored(t, pending.ID); r.State != airlock.StatePending {
		t.Fatalf("a refused grant decided the request: %s", r.State)
	}
	if q := b.stored(t, q.ID); q.State != airlock.StatePending {
		t.Fatalf("a refused grant decided the question: %s", q.State)
	}

	// The agent scope covers the agent's calls on another instance.
	r2 := b.create(t, "")
	_, g2, err := b.svc.DecideGrant(ctx, b.reviewer, r2.ID, airlock.DecisionInput{Status: airlock.StateApproved,
		Grant: &airlock.DecisionGrant{Scope: "agent", ExpiresIn: "1h"}})
	if err != nil || g2.AgentID != b.agent.ID || g2.InstanceID != "" || g2.Uses != nil {
		t.Fatalf("agent grant: %+v %v", g2, err)
	}
	inst2 := b.instance(t, b.agent)
	r3, _, err := b.svc.CreateRequest(ctx, b.agent, inst2.ID, newKey(), call(""))
	if err != nil {
		t.Fatal(err)
	}
	wantGrantDecision(t, r3, *g2)
	if errors.Is(err, nil) && r3.Decision.DecidedByName != "grant:"+g2.ID {
		t.Fatalf("decided_by_name %q", r3.Decision.DecidedByName)
	}
}

// TestGrantUsesRace is T28 on SQLite (a real database file, through the
// service): 16 concurrent matching creates on a grant of 5 uses approve
// exactly 5, each by the grant, with its approval event naming it; a
// revoked grant and an expired one approve none of 16 more.
func TestGrantUsesRace(t *testing.T) {
	t.Parallel()
	const uses, creates = 5, 16
	b := setup(t, options{})
	ctx := t.Context()
	race := func() (map[string]int, []airlock.Request) {
		rs := make([]airlock.Request, creates)
		errs := make([]error, creates)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range creates {
			wg.Go(func() {
				<-start
				rs[i], _, errs[i] = b.svc.CreateRequest(ctx, b.agent, b.inst.ID, newKey(), call(""))
			})
		}
		close(start)
		wg.Wait()
		by := map[string]int{}
		for i, r := range rs {
			if errs[i] != nil {
				t.Fatalf("create: %v", errs[i])
			}
			if r.State == airlock.StateApproved {
				by[r.Decision.DecidedBy]++
			} else if r.State != airlock.StatePending {
				t.Fatalf("a request is %s", r.State)
			}
		}
		return by, rs
	}

	g := b.grant(t, b.refundGrant(uses))
	by, rs := race()
	if len(by) != 1 || by["grant:"+g.ID] != uses {
		t.Fatalf("%d concurrent creates on a grant of %d uses: approved %v", creates, uses, by)
	}
	approved := map[string]bool{}
	for _, r := range rs {
		if r.State == airlock.StateApproved {
			approved[r.ID] = true
		}
	}
	for _, e := range b.events(t) {
		if e.Type != airlock.EventRequestApproved || !approved[e.RequestID] {
			continue
		}
		if e.Actor != "grant:"+g.ID {
			t.Fatalf("the approval of %s is by %q", e.RequestID, e.Actor)
		}
		delete(approved, e.RequestID)
	}
	if len(approved) != 0 {
		t.Fatalf("approvals without their event: %v", approved)
	}

	revoked := b.grant(t, b.refundGrant(100))
	if _, err := b.svc.RevokeGrant(ctx, b.reviewer, revoked.ID); err != nil {
		t.Fatal(err)
	}
	if by, _ := race(); len(by) != 0 {
		t.Fatalf("after the revocation: approved %v", by)
	}

	b.grant(t, b.refundGrant(100))
	b.clock.Advance(time.Hour)
	if by, _ := race(); len(by) != 0 {
		t.Fatalf("after the expiry: approved %v", by)
	}
}

// BenchmarkCreateByGrant measures a create that a grant approves and its
// execution claim, at one client on SQLite (a real file, the real clock):
// the grant lookup, the match, the insert that counts the use, then the
// claim; beside it, the same create with no grant at all, asked of a
// person. It reports the p50 and p99.
// AIRLOCK_BENCH_DB_DIR puts the database in another directory.
func BenchmarkCreateByGrant(b *testing.B) {
	for _, byGrant := range []bool{false, true} {
		name := "pending, no grant"
		if byGrant {
			name = "approved by a grant"
		}
		b.Run(name, func(b *testing.B) {
			opt := options{realClock: true}
			if dir := os.Getenv("AIRLOCK_BENCH_DB_DIR"); dir != "" {
				// Such as /dev/shm, to leave the disk's fsync out.
				opt.path = filepath.Join(dir, airlock.NewID("bench_")+".db")
				b.Cleanup(func() { os.Remove(opt.path) })
			}
			bb := setup(b, opt)
			ctx := b.Context()
			want := airlock.StatePending
			if byGrant {
				if _, err := bb.svc.CreateGrant(ctx, bb.reviewer, airlock.GrantInput{Tool: "issue_refund", Arguments: call("").Arguments,
					InstanceID: bb.inst.ID, ExpiresIn: "720h"}); err != nil {
					b.Fatal(err)
				}
				want = airlock.StateApproved
			}
			in := call("")
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				r, _, err := bb.svc.CreateRequest(ctx, bb.agent, bb.inst.ID, newKey(), in)
				took = append(took, time.Since(start))
				if err != nil || r.State != want {
					b.Fatalf("create: %v %s", err, r.State)
				}
				if byGrant {
					if _, err := bb.svc.Claim(ctx, bb.agent, r.ID); err != nil {
						b.Fatalf("claim: %v", err)
					}
					took[len(took)-1] = time.Since(start)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(percentile(took, 99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(percentile(took, 50).Microseconds())/1000, "p50-ms")
		})
	}
}

// grantReads counts the reads of grants a service makes.
type grantReads struct {
	store.Store
	n atomic.Int64
}

func (g *grantReads) ListGrants(ctx context.Context, f store.GrantFilter) ([]airlock.Grant, error) {
	g.n.Add(1)
	return g.Store.ListGrants(ctx, f)
}

// A create reads grants only when a live grant could cover it: the create
// is conditional on there being none, so the usual create is one write.
// A grant of the tool makes the next create read, and approve by it when
// its match holds; creates of a tool that had grants read at once, until
// a read finds none live.
func TestCreateReadsGrantsOnlyWhenOneCouldCover(t *testing.T) {
	t.Parallel()
	reads := &grantReads{}
	b := setup(t, options{wrap: func(s store.Store) store.Store { reads.Store = s; return reads }})
	for range 3 {
		if r := b.create(t, ""); r.State != airlock.StatePending {
			t.Fatalf("create with no grant: %s, want pending", r.State)
		}
	}
	if n := reads.n.Load(); n != 0 {
		t.Fatalf("three creates with no grant read grants %d times, want never", n)
	}
	g := b.grant(t, b.refundGrant(1))
	wantGrantDecision(t, b.create(t, ""), g)
	if n := reads.n.Load(); n != 1 {
		t.Fatalf("a create a grant covers read grants %d times, want once", n)
	}
	// Used up. The next create reads, as the tool had grants; finding
	// none live, the creates after it read no more.
	for range 3 {
		if r := b.create(t, ""); r.State != airlock.StatePending {
			t.Fatalf("create after the grant's last use: %s, want pending", r.State)
		}
	}
	if n := reads.n.Load(); n != 2 {
		t.Fatalf("three creates after the grant's last use: %d reads of grants in all, want 2", n)
	}
}
