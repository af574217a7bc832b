package provider

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// openSession opens a session for agent.
func (b *bundle) openSession(t *testing.T, agent airlock.Caller) airlock.Instance {
	t.Helper()
	s, err := b.svc.OpenSession(t.Context(), agent, "claude in repo x", json.RawMessage(`{"cwd":"/src/x"}`))
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	return s
}

// ask creates an advisory question on a session and fails the test if it
// cannot.
func (b *bundle) ask(t *testing.T, agent airlock.Caller, sessionID string, choices ...string) airlock.Request {
	t.Helper()
	in := MCPRequestInput{
		Kind: airlock.KindAgentRequest, Title: "Which colour?", SessionID: sessionID, IdempotencyKey: newKey(),
		Proposal: &airlock.Proposal{Mode: airlock.ProposalAdvisory}, Question: &airlock.Question{Choices: choices},
	}
	r, created, err := b.svc.CreateMCPRequest(t.Context(), agent, in)
	if err != nil || !created {
		t.Fatalf("CreateMCPRequest: created=%v err=%v", created, err)
	}
	return r
}

// beat heartbeats a session and fails the test on error.
func (b *bundle) beat(t *testing.T, agent airlock.Caller, sessionID string) (airlock.Instance, []airlock.Instruction) {
	t.Helper()
	in, ists, err := b.svc.Heartbeat(t.Context(), agent, sessionID)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	return in, ists
}

// TestSessionLifecycle follows a session from open to closed, with its
// status by the fake clock at each step.
func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	if b.svc.StaleAfter() != airlock.DefaultStaleAfter {
		t.Fatalf("StaleAfter() = %v, want the default %v", b.svc.StaleAfter(), airlock.DefaultStaleAfter)
	}
	sess := b.openSession(t, b.agent)
	if sess.Kind != airlock.InstanceSession || !strings.HasPrefix(sess.ID, airlock.PrefixSession) || sess.OwnerID != b.agent.ID ||
		string(sess.Metadata) != `{"cwd":"/src/x"}` {
		t.Fatalf("opened session = %+v", sess)
	}
	status := func() airlock.SessionStatus {
		t.Helper()
		list, err := b.svc.Sessions(ctx, b.agent)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.ID == sess.ID {
				return b.svc.SessionStatus(s)
			}
		}
		t.Fatalf("session %s is not listed", sess.ID)
		return ""
	}
	if got := status(); got != airlock.SessionActive {
		t.Fatalf("a new session is %s, want active", got)
	}
	r := b.ask(t, b.agent, sess.ID, "blue", "green")
	if got := status(); got != airlock.SessionWaiting {
		t.Fatalf("with a pending request the session is %s, want waiting", got)
	}
	b.clock.Advance(airlock.DefaultStaleAfter)
	if got := status(); got != airlock.SessionStale {
		t.Fatalf("after %v without a heartbeat the session is %s, want stale", airlock.DefaultStaleAfter, got)
	}
	if _, err := b.svc.Request(ctx, b.agent, r.ID, 0); err != nil {
		t.Fatalf("a stale session's request cannot be read: %v", err)
	}
	in, ists := b.beat(t, b.agent, sess.ID)
	if len(ists) != 0 || b.svc.SessionStatus(in) != airlock.SessionWaiting {
		t.Fatalf("heartbeat = %s with %d instructions, want waiting and none", b.svc.SessionStatus(in), len(ists))
	}
	if _, err := b.svc.Decide(ctx, b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved, Answer: "green", Note: "green it is"}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != airlock.SessionActive {
		t.Fatalf("after the decision the session is %s, want active", got)
	}
	_, ists = b.beat(t, b.agent, sess.ID)
	if len(ists) != 1 || ists[0].RequestID != r.ID || ists[0].Status != airlock.StateApproved || ists[0].Answer != "green" || ists[0].Note != "green it is" {
		t.Fatalf("heartbeat after the decision delivered %+v, want the approval with its answer and note", ists)
	}
	pending := b.ask(t, b.agent, sess.ID)
	n, err := b.svc.CloseSession(ctx, b.agent, sess.ID)
	if err != nil || n != 1 {
		t.Fatalf("CloseSession = %d, %v; want 1 cancelled", n, err)
	}
	if got := b.stored(t, pending.ID); got.State != airlock.StateCancelled {
		t.Fatalf("the pending request after close is %s, want cancelled", got.State)
	}
	if got := status(); got != airlock.SessionClosed {
		t.Fatalf("after close the session is %s, want closed", got)
	}
	if n, err := b.svc.CloseSession(ctx, b.agent, sess.ID); err != nil || n != 0 {
		t.Fatalf("closing again = %d, %v; want 0 and no error", n, err)
	}
	_, _, err = b.svc.Heartbeat(ctx, b.agent, sess.ID)
	wantCode(t, err, airlock.CodeNotFound, "")
	if !strings.Contains(err.Error(), "closed") {
		t.Fatalf("heartbeat on a closed session says %q; want it to say the session is closed", err)
	}
}

// TestSessionAuthorization checks who may open, use, close and list
// sessions: another agent's session is not found.
func TestSessionAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	sess := b.openSession(t, b.agent)
	other := b.openSession(t, b.otherAgent)

	_, err := b.svc.OpenSession(ctx, b.reviewer, "x", nil)
	wantCode(t, err, airlock.CodeForbidden, "")
	_, err = b.svc.OpenSession(ctx, b.admin, "x", nil)
	wantCode(t, err, airlock.CodeForbidden, "")
	_, err = b.svc.OpenSession(ctx, b.agent, "", nil)
	wantCode(t, err, airlock.CodeInvalidRequest, "")
	_, err = b.svc.OpenSession(ctx, b.agent, "x", json.RawMessage(`[1]`))
	wantCode(t, err, airlock.CodeInvalidRequest, "")

	_, _, err = b.svc.Heartbeat(ctx, b.otherAgent, sess.ID)
	wantCode(t, err, airlock.CodeNotFound, "")
	_, err = b.svc.CloseSession(ctx, b.otherAgent, sess.ID)
	wantCode(t, err, airlock.CodeNotFound, "")
	_, _, err = b.svc.Heartbeat(ctx, b.agent, b.inst.ID) // an adapter instance is no session
	wantCode(t, err, airlock.CodeNotFound, "")
	_, _, err = b.svc.Heartbeat(ctx, b.agent, "ses_missing")
	wantCode(t, err, airlock.CodeNotFound, "")
	_, _, err = b.svc.Heartbeat(ctx, b.reviewer, sess.ID)
	wantCode(t, err, airlock.CodeForbidden, "")
	if got, err := b.svc.Instance(ctx, b.agent, sess.ID); err != nil || got.ID != sess.ID {
		t.Fatalf("the owner cannot read its session as an instance: %v", err)
	}

	ids := func(c airlock.Caller) []string {
		list, err := b.svc.Sessions(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list {
			out = append(out, s.ID)
		}
		return out
	}
	if got := ids(b.agent); !slices.Equal(got, []string{sess.ID}) {
		t.Fatalf("agent's sessions = %v, want only its own", got)
	}
	for _, c := range []airlock.Caller{b.reviewer, b.admin} {
		if got := ids(c); !slices.Equal(got, []string{other.ID, sess.ID}) {
			t.Fatalf("%s's sessions = %v, want all", c.Role, got)
		}
	}
}

// TestInstructions checks which outcomes reach the session's heartbeat:
// approve, deny and expiry, with note and answer, each exactly once; not
// the agent's own cancel.
func TestInstructions(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	sess := b.openSession(t, b.agent)
	approved := b.ask(t, b.agent, sess.ID, "yes", "no")
	denied := b.ask(t, b.agent, sess.ID)
	cancelled := b.ask(t, b.agent, sess.ID)
	expiring, _, err := b.svc.CreateMCPRequest(ctx, b.agent, MCPRequestInput{
		Kind: airlock.KindLifeChange, Title: "Book the dentist", SessionID: sess.ID, IdempotencyKey: newKey(),
		Proposal: &airlock.Proposal{Mode: airlock.ProposalAdvisory}, ExpiresInMinutes: new(5),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Decide(ctx, b.reviewer, approved.ID, airlock.DecisionInput{Status: airlock.StateApproved, Answer: "yes", Note: "fine"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Decide(ctx, b.reviewer, denied.ID, airlock.DecisionInput{Status: airlock.StateDenied, Note: "not like this"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Cancel(ctx, b.agent, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(5 * time.Minute)
	if n, err := b.svc.ExpireDue(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireDue = %d, %v; want the 5-minute request expired", n, err)
	}
	_, ists := b.beat(t, b.agent, sess.ID)
	var got []string
	for _, ist := range ists {
		got = append(got, ist.RequestID+" "+string(ist.Status)+" "+ist.Note+" "+ist.Answer)
	}
	want := []string{
		approved.ID + " approved fine yes",
		denied.ID + " denied not like this ",
		expiring.ID + " expired  ",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("instructions:\n got  %q\n want %q", got, want)
	}
	if _, again := b.beat(t, b.agent, sess.ID); len(again) != 0 {
		t.Fatalf("a second heartbeat delivered %d again", len(again))
	}
}

// TestHeartbeatsRaceForInstructions: 8 heartbeats at once while decisions
// land; every instruction is delivered exactly once.
func TestHeartbeatsRaceForInstructions(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.WithoutCancel(t.Context())
	sess := b.openSession(t, b.agent)
	const n = 24
	var reqs []airlock.Request
	for range n {
		reqs = append(reqs, b.ask(t, b.agent, sess.ID))
	}
	var (
		mu    sync.Mutex
		count = map[string]int{}
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for range 8 {
		wg.Go(func() {
			<-start
			for range n / 2 {
				_, ists, err := b.svc.Heartbeat(ctx, b.agent, sess.ID)
				if err != nil {
					t.Errorf("heartbeat: %v", err)
					return
				}
				mu.Lock()
				for _, ist := range ists {
					count[ist.ID+" "+ist.RequestID]++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	for _, r := range reqs {
		if _, err := b.svc.Decide(ctx, b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	_, rest := b.beat(t, b.agent, sess.ID)
	for _, ist := range rest {
		count[ist.ID+" "+ist.RequestID]++
	}
	if len(count) != n {
		t.Fatalf("%d distinct instructions delivered, want %d", len(count), n)
	}
	for k, c := range count {
		if c != 1 {
			t.Fatalf("instruction %s delivered %d times", k, c)
		}
	}
}
