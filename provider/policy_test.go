package provider

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// decideAll is a policy that tries to decide every request it is asked
// about the same way, and remembers what it was shown.
type decideAll struct {
	verdict airlock.PolicyVerdict
	mu      sync.Mutex
	seen    []airlock.PolicyInput
}

func (p *decideAll) Evaluate(ctx context.Context, in airlock.PolicyInput) airlock.PolicyVerdict {
	p.mu.Lock()
	p.seen = append(p.seen, in)
	p.mu.Unlock()
	return p.verdict
}

// A policy that approves everything still never approves a question or a
// command (a command is not even shown to it); its approval keeps to the
// validity limits; its agent and instance are the request's.
func TestPolicyNeverApprovesQuestionsOrCommands(t *testing.T) {
	t.Parallel()
	pol := &decideAll{verdict: airlock.PolicyVerdict{Initial: &airlock.InitialDecision{
		Status: airlock.StateApproved, Validity: 48 * time.Hour, DecidedBy: airlock.PolicyActor("everything"), PolicyHash: "abc"}}}
	b := &boardBundle{bundle: setup(t, options{policy: pol})}
	ctx := t.Context()

	r := b.create(t, "")
	if r.State != airlock.StateApproved || r.Decision.DecidedBy != "policy:everything" ||
		r.Decision.ExpiresAt.Sub(r.Decision.DecidedAt) != b.svc.Limits().MaxApprovalValidity {
		t.Fatalf("tool call: %+v %+v, want approved by the rule, valid for the longest validity", r.State, r.Decision)
	}
	in := pol.seen[0]
	if in.Agent.ID != b.agent.ID || in.Request.Tool != "issue_refund" || in.Window != b.svc.Limits().DefaultTimeout {
		t.Fatalf("policy saw %+v", in)
	}
	if inst, err := in.Instance(ctx); err != nil || inst.ID != b.inst.ID {
		t.Fatalf("policy's instance: %+v %v", inst, err)
	}

	if q := b.question(t, "yes", "no"); q.State != airlock.StatePending {
		t.Fatalf("a question was approved by the policy: %+v", q.Decision)
	}

	for _, k := range []string{"todo", "done"} {
		if _, err := b.svc.CreateColumn(ctx, b.reviewer, k, k); err != nil {
			t.Fatal(err)
		}
	}
	item, err := b.svc.CreateWorkItem(ctx, b.reviewer, "Ship it", "todo")
	if err != nil {
		t.Fatal(err)
	}
	b.mover = b.mint(t, airlock.RoleAgent, "alice", airlock.ScopeWorkWrite)
	b.item = item
	seen := len(pol.seen)
	if c := b.propose(t, "done"); c.State != airlock.StatePending || len(pol.seen) != seen {
		t.Fatalf("a command: %s, policy asked %d times more; want pending and not asked", c.State, len(pol.seen)-seen)
	}
}

// An ask with a shorter window shortens the request's, never below the
// shortest window; a policy's denial is recorded as it says.
func TestPolicyWindowAndDenial(t *testing.T) {
	t.Parallel()
	pol := &decideAll{verdict: airlock.PolicyVerdict{Window: time.Millisecond}}
	b := setup(t, options{policy: pol})
	r := b.create(t, "10m")
	if got := r.DeadlineAt.Sub(r.CreatedAt); r.State != airlock.StatePending || got != b.svc.Limits().MinTimeout {
		t.Fatalf("window %s, want the shortest, %s", got, b.svc.Limits().MinTimeout)
	}
	pol.verdict = airlock.PolicyVerdict{Window: 2 * time.Minute}
	r = b.create(t, "10m")
	if got := r.DeadlineAt.Sub(r.CreatedAt); got != 2*time.Minute {
		t.Fatalf("window %s, want 2m", got)
	}
	r = b.create(t, "1m")
	if got := r.DeadlineAt.Sub(r.CreatedAt); got != time.Minute {
		t.Fatalf("window %s, want the request's own 1m", got)
	}
	pol.verdict = airlock.PolicyVerdict{Initial: &airlock.InitialDecision{Status: airlock.StateDenied, Note: "no", DecidedBy: airlock.PolicyActor("deny")}}
	r = b.create(t, "")
	if r.State != airlock.StateDenied || r.Decision.DecidedBy != "policy:deny" || r.Decision.Note != "no" {
		t.Fatalf("denial: %s %+v", r.State, r.Decision)
	}
}

// recorded is a policy that decides nothing and counts how many of its
// verdicts the provider recorded.
type recorded struct{ n atomic.Int64 }

func (p *recorded) Evaluate(context.Context, airlock.PolicyInput) airlock.PolicyVerdict {
	return airlock.PolicyVerdict{Record: func() { p.n.Add(1) }}
}

// A policy's verdict is recorded (its rules' counters, its logs) for a
// request stored as new, never for a replay, which answers with the
// original, nor for a create refused.
func TestPolicyRecordedOncePerRequest(t *testing.T) {
	t.Parallel()
	pol := &recorded{}
	b := setup(t, options{policy: pol})
	ctx := t.Context()
	want := func(n int64, after string) {
		t.Helper()
		if got := pol.n.Load(); got != n {
			t.Fatalf("after %s: %d verdicts recorded, want %d", after, got, n)
		}
	}
	key := newKey()
	if _, created, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, key, call("")); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	want(1, "a create")
	if _, created, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, key, call("")); err != nil || created {
		t.Fatalf("replay: created=%v %v, want the original", created, err)
	}
	want(1, "its replay")
	other := call("")
	other.Tool = "cancel_order"
	if _, _, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, key, other); airlock.ErrorCode(err) != airlock.CodeIdempotencyConflict {
		t.Fatalf("same key, another call: %v, want idempotency_conflict", err)
	}
	want(1, "a conflicting create")
	if _, _, err := b.svc.CreateRequest(ctx, b.agent, "ins_none", newKey(), call("")); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("create on no instance: %v, want not_found", err)
	}
	want(1, "a create on no instance")

	in := MCPRequestInput{Kind: airlock.KindAgentRequest, Title: "Read the logs",
		Proposal: &airlock.Proposal{Mode: airlock.ProposalAdvisory}, IdempotencyKey: newKey()}
	for i := range 2 {
		if _, created, err := b.svc.CreateMCPRequest(ctx, b.agent, in); err != nil || created != (i == 0) {
			t.Fatalf("MCP create %d: created=%v %v", i, created, err)
		}
	}
	want(2, "an MCP create and its replay")
}
