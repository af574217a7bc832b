package provider

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
)

// TestAuthorization checks who may do what to a pending request, and that
// a refused call changes nothing.
func TestAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	r := b.create(t, "10m")
	approve := airlock.DecisionInput{Status: airlock.StateApproved}

	for _, tc := range []struct {
		name  string
		do    func() error
		code  airlock.Code
		field string
	}{
		{"a reviewer cannot create a request", func() error {
			_, _, err := b.svc.CreateRequest(ctx, b.reviewer, b.inst.ID, newKey(), call("10m"))
			return err
		}, airlock.CodeForbidden, ""},
		{"an admin cannot create a request", func() error {
			_, _, err := b.svc.CreateRequest(ctx, b.admin, b.inst.ID, newKey(), call("10m"))
			return err
		}, airlock.CodeForbidden, ""},
		{"a reviewer cannot register an instance", func() error {
			_, err := b.svc.RegisterInstance(ctx, b.reviewer, airlock.InstanceInput{Name: "x"})
			return err
		}, airlock.CodeForbidden, ""},
		{"another agent cannot create on the instance", func() error {
			_, _, err := b.svc.CreateRequest(ctx, b.otherAgent, b.inst.ID, newKey(), call("10m"))
			return err
		}, airlock.CodeNotFound, ""},
		{"another agent cannot read the request", func() error {
			_, err := b.svc.Request(ctx, b.otherAgent, r.ID, 0)
			return err
		}, airlock.CodeNotFound, ""},
		{"another agent cannot long-poll the request", func() error {
			_, err := b.svc.Request(ctx, b.otherAgent, r.ID, time.Second)
			return err
		}, airlock.CodeNotFound, ""},
		{"another agent cannot cancel the request", func() error {
			_, err := b.svc.Cancel(ctx, b.otherAgent, r.ID)
			return err
		}, airlock.CodeNotFound, ""},
		{"another agent cannot claim the request", func() error {
			_, err := b.svc.Claim(ctx, b.otherAgent, r.ID)
			return err
		}, airlock.CodeNotFound, ""},
		{"another agent cannot read the instance", func() error {
			_, err := b.svc.Instance(ctx, b.otherAgent, b.inst.ID)
			return err
		}, airlock.CodeNotFound, ""},
		{"another agent cannot delete the instance", func() error {
			_, err := b.svc.DeleteInstance(ctx, b.otherAgent, b.inst.ID)
			return err
		}, airlock.CodeNotFound, ""},
		{"a reviewer cannot delete the instance", func() error {
			_, err := b.svc.DeleteInstance(ctx, b.reviewer, b.inst.ID)
			return err
		}, airlock.CodeForbidden, ""},
		{"a reviewer cannot cancel", func() error {
			_, err := b.svc.Cancel(ctx, b.reviewer, r.ID)
			return err
		}, airlock.CodeForbidden, ""},
		{"a reviewer cannot claim", func() error {
			_, err := b.svc.Claim(ctx, b.reviewer, r.ID)
			return err
		}, airlock.CodeForbidden, ""},
		{"the owning agent cannot decide", func() error {
			_, err := b.svc.Decide(ctx, b.agent, r.ID, approve)
			return err
		}, airlock.CodeForbidden, ""},
		{"another agent cannot decide", func() error {
			_, err := b.svc.Decide(ctx, b.otherAgent, r.ID, approve)
			return err
		}, airlock.CodeForbidden, ""},
		{"an admin cannot decide", func() error {
			_, err := b.svc.Decide(ctx, b.admin, r.ID, approve)
			return err
		}, airlock.CodeForbidden, ""},
		{"a reviewer token of the agent's own principal cannot approve", func() error {
			_, err := b.svc.Decide(ctx, b.selfReviewer, r.ID, approve)
			return err
		}, airlock.CodeForbidden, ""},
		{"nor deny", func() error {
			_, err := b.svc.Decide(ctx, b.selfReviewer, r.ID, airlock.DecisionInput{Status: airlock.StateDenied})
			return err
		}, airlock.CodeForbidden, ""},
		{"an agent cannot mint tokens", func() error {
			_, _, err := b.svc.CreateToken(ctx, b.agent, airlock.NewTokenInput{Name: "x", Role: airlock.RoleAdmin})
			return err
		}, airlock.CodeForbidden, ""},
		{"an agent cannot read the event stream", func() error {
			_, err := b.svc.Events(ctx, b.agent, 0, 10)
			return err
		}, airlock.CodeForbidden, ""},
	} {
		wantCode(t, tc.do(), tc.code, "")
		if got := b.stored(t, r.ID); got.State != airlock.StatePending || got.Execution != nil {
			t.Fatalf("%s: refused call changed the request: %s", tc.name, got.State)
		}
	}

	// What the others may not do, the right callers may.
	if _, err := b.svc.Request(ctx, b.reviewer, r.ID, 0); err != nil {
		t.Fatalf("reviewer read: %v", err)
	}
	if in, err := b.svc.Instance(ctx, b.reviewer, b.inst.ID); err != nil || in.PendingCount != 1 {
		t.Fatalf("reviewer reads the instance: %+v, %v", in, err)
	}
	got, err := b.svc.Decide(ctx, b.reviewer, r.ID, approve)
	if err != nil || got.State != airlock.StateApproved || got.Decision.DecidedBy != b.reviewer.ID {
		t.Fatalf("another principal's reviewer approves: %+v, %v", got, err)
	}
	if list, err := b.svc.ListRequests(ctx, b.otherAgent, ListQuery{}); err != nil || len(list.Requests) != 0 {
		t.Fatalf("another agent lists %d requests (%v), want none", len(list.Requests), err)
	}
	if list, err := b.svc.ListRequests(ctx, b.agent, ListQuery{}); err != nil || len(list.Requests) != 1 {
		t.Fatalf("the owner lists %d requests (%v), want 1", len(list.Requests), err)
	}
}

// TestRevokedTokenStopsAtOnce checks that a revoked token fails at its
// next call (tokens are cached between calls: TestTokenCache).
func TestRevokedTokenStopsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	tok, secret, err := b.svc.CreateToken(ctx, b.admin, airlock.NewTokenInput{Name: "short-lived", Role: airlock.RoleAgent})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.RevokeToken(ctx, b.admin, tok.ID); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.Authenticate(ctx, secret)
	wantCode(t, err, airlock.CodeUnauthorized, "")
	_, err = b.svc.Authenticate(ctx, "airlock_nonsense")
	wantCode(t, err, airlock.CodeUnauthorized, "")
}

// TestWindow checks docs/protocol.md L3: the provider sets deadline_at from the
// asked window, may shorten it to its maximum, never lengthens it.
func TestWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, tc := range []struct {
		name    string
		timeout string
		want    time.Duration // 0: refused
	}{
		{"no timeout takes the default", "", 15 * time.Minute},
		{"a Go duration is kept", "30m", 30 * time.Minute},
		{"an ISO 8601 duration is kept", "PT2H30M", 150 * time.Minute},
		{"exactly the maximum is kept", "168h", 168 * time.Hour},
		{"longer than the maximum is shortened to it", "1000h", 168 * time.Hour},
		{"days beyond the maximum are shortened", "P30D", 168 * time.Hour},
		{"exactly the minimum is kept", "1s", time.Second},
		{"shorter than the minimum is refused, not lengthened", "500ms", 0},
		{"a negative window is refused", "-5m", 0},
		{"garbage is refused", "soon", 0},
	} {
		r, _, err := b.svc.CreateRequest(t.Context(), b.agent, b.inst.ID, newKey(), call(tc.timeout))
		if tc.want == 0 {
			wantCode(t, err, airlock.CodeInvalidRequest, "")
			if e, ok := errors.AsType[*airlock.Error](err); !ok || e.Field != "timeout" {
				t.Errorf("%s: error %v does not name the field timeout", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := r.DeadlineAt.Sub(r.CreatedAt); got != tc.want {
			t.Errorf("%s: window %s, want %s", tc.name, got, tc.want)
		}
		if !r.CreatedAt.Equal(b.clock.Now()) {
			t.Errorf("%s: created_at %s, want the clock's %s", tc.name, r.CreatedAt, b.clock.Now())
		}
		// Its ID starts with the clock's millisecond (airlock.NewRequestID).
		if n := len(airlock.PrefixRequest) + 9; r.ID[:n] != airlock.NewRequestID(b.clock.Now())[:n] {
			t.Errorf("%s: ID %s, want one made at the clock's %s", tc.name, r.ID, b.clock.Now())
		}
		if r.Timeout != tc.timeout {
			t.Errorf("%s: timeout stored as %q, want it as asked, %q", tc.name, r.Timeout, tc.timeout)
		}
	}
}

// TestValidFor checks the approval's validity: default 5m, a reviewer's
// valid_for up to the maximum, no more.
func TestValidFor(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, tc := range []struct {
		name     string
		validFor string
		want     time.Duration // 0: refused
	}{
		{"no valid_for takes the default of 5m", "", 5 * time.Minute},
		{"a shorter valid_for is kept", "90s", 90 * time.Second},
		{"a longer valid_for is kept", "20m", 20 * time.Minute},
		{"exactly the maximum is kept", "PT1H", time.Hour},
		{"over the maximum is refused", "2h", 0},
		{"under a second is refused", "500ms", 0},
		{"garbage is refused", "a while", 0},
	} {
		r := b.create(t, "10m")
		got, err := b.svc.Decide(t.Context(), b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved, ValidFor: tc.validFor})
		if tc.want == 0 {
			wantCode(t, err, airlock.CodeInvalidRequest, "")
			if st := b.stored(t, r.ID).State; st != airlock.StatePending {
				t.Errorf("%s: a refused decision left the request %s", tc.name, st)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d := got.Decision
		if d == nil || d.ExpiresAt == nil || d.ExpiresAt.Sub(d.DecidedAt) != tc.want || !d.DecidedAt.Equal(b.clock.Now()) {
			t.Errorf("%s: decision %+v, want expires_at = decided_at (%s) + %s", tc.name, d, b.clock.Now(), tc.want)
		}
		if d.Status != got.State {
			t.Errorf("%s: decision status %s, request state %s", tc.name, d.Status, got.State)
		}
	}

	// A denial has no expires_at, and valid_for makes no sense on it.
	r := b.create(t, "10m")
	_, err := b.svc.Decide(t.Context(), b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateDenied, ValidFor: "5m"})
	wantCode(t, err, airlock.CodeInvalidRequest, "")
	got, err := b.svc.Decide(t.Context(), b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateDenied, Note: "not today"})
	if err != nil || got.Decision.ExpiresAt != nil || got.Decision.Note != "not today" {
		t.Fatalf("deny: %+v, %v", got.Decision, err)
	}
}

// question creates an MCP request that asks the reviewer a question (free
// text when there are no choices), through the MCP create path.
func (b *bundle) question(t *testing.T, choices ...string) airlock.Request {
	t.Helper()
	r, created, err := b.svc.CreateMCPRequest(t.Context(), b.agent, MCPRequestInput{
		Kind: airlock.KindAgentRequest, Title: "Which colour?", Proposal: &airlock.Proposal{Mode: "advisory"},
		Question: &airlock.Question{Choices: choices}, IdempotencyKey: newKey(),
	})
	if err != nil || !created {
		t.Fatalf("create question: %v", err)
	}
	return r
}

// TestAnswer checks that an answer must fit the question.
func TestAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	decide := func(id, answer string, status airlock.State) (airlock.Request, error) {
		return b.svc.Decide(ctx, b.reviewer, id, airlock.DecisionInput{Status: status, Answer: answer})
	}

	choice := b.question(t, "red", "green")
	_, err := decide(choice.ID, "blue", airlock.StateApproved)
	wantCode(t, err, airlock.CodeInvalidRequest, "")
	_, err = decide(choice.ID, "Red", airlock.StateApproved)
	wantCode(t, err, airlock.CodeInvalidRequest, "")
	_, err = decide(choice.ID, "red", airlock.StateDenied)
	wantCode(t, err, airlock.CodeInvalidRequest, "")
	if st := b.stored(t, choice.ID).State; st != airlock.StatePending {
		t.Fatalf("refused answers left the request %s", st)
	}
	got, err := decide(choice.ID, "green", airlock.StateApproved)
	if err != nil || got.Decision.Answer != "green" {
		t.Fatalf("answer one of the choices: %+v, %v", got.Decision, err)
	}

	free := b.question(t)
	got, err = decide(free.ID, "any colour you like", airlock.StateApproved)
	if err != nil || got.Decision.Answer != "any colour you like" {
		t.Fatalf("free-text answer: %+v, %v", got.Decision, err)
	}

	plain := b.create(t, "10m")
	_, err = decide(plain.ID, "red", airlock.StateApproved)
	wantCode(t, err, airlock.CodeInvalidRequest, "")
}

// TestDeadline checks docs/protocol.md L4 at the boundary, with the clock
// standing exactly at, just before and just after deadline_at.
func TestDeadline(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	approve := airlock.DecisionInput{Status: airlock.StateApproved}

	t.Run("decide 1µs before the deadline succeeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		r := b.create(t, "10m")
		b.clock.Set(r.DeadlineAt.Add(-time.Microsecond))
		got := b.approve(t, r.ID)
		if !got.Decision.DecidedAt.Before(got.DeadlineAt) {
			t.Fatalf("decided at %s, deadline %s", got.Decision.DecidedAt, got.DeadlineAt)
		}
	})

	for _, tc := range []struct {
		name string
		at   time.Duration // after the deadline
		do   func(b *bundle, id string) (airlock.Request, error)
	}{
		{"approve at the deadline", 0, func(b *bundle, id string) (airlock.Request, error) {
			return b.svc.Decide(ctx, b.reviewer, id, approve)
		}},
		{"deny at the deadline", 0, func(b *bundle, id string) (airlock.Request, error) {
			return b.svc.Decide(ctx, b.reviewer, id, airlock.DecisionInput{Status: airlock.StateDenied})
		}},
		{"cancel at the deadline", 0, func(b *bundle, id string) (airlock.Request, error) {
			return b.svc.Cancel(ctx, b.agent, id)
		}},
		{"approve 1µs after the deadline", time.Microsecond, func(b *bundle, id string) (airlock.Request, error) {
			return b.svc.Decide(ctx, b.reviewer, id, approve)
		}},
		{"approve an hour after the deadline", time.Hour, func(b *bundle, id string) (airlock.Request, error) {
			return b.svc.Decide(ctx, b.reviewer, id, approve)
		}},
	} {
		t.Run(tc.name+" is deadline_passed and expires it", func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			r := b.create(t, "10m")
			b.clock.Set(r.DeadlineAt.Add(tc.at))
			_, err := tc.do(b, r.ID)
			wantCode(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)
			got := b.stored(t, r.ID)
			if got.State != airlock.StateExpired || got.Decision == nil || !got.Decision.DecidedAt.Equal(r.DeadlineAt) ||
				got.Decision.DecidedBy != airlock.ActorExpiry || got.Decision.ExpiresAt != nil {
				t.Fatalf("stored after a late call: %s %+v; want expired at its deadline by %s", got.State, got.Decision, airlock.ActorExpiry)
			}
			// And it stays expired: a second try names the same state.
			_, err = b.svc.Decide(ctx, b.reviewer, r.ID, approve)
			wantCode(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)
		})
	}

	t.Run("a read at the deadline expires it, as the scheduler would", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		read := b.create(t, "10m")
		b.clock.Advance(time.Second)
		swept := b.create(t, "10m")
		b.clock.Set(read.DeadlineAt.Add(-time.Microsecond))
		if got, err := b.svc.Request(ctx, b.agent, read.ID, 0); err != nil || got.State != airlock.StatePending {
			t.Fatalf("read 1µs before the deadline: %s, %v", got.State, err)
		}
		b.clock.Set(read.DeadlineAt)
		got, err := b.svc.Request(ctx, b.agent, read.ID, 0)
		if err != nil || got.State != airlock.StateExpired {
			t.Fatalf("read at the deadline: %s, %v; want expired", got.State, err)
		}
		if st := b.stored(t, read.ID).State; st != airlock.StateExpired {
			t.Fatalf("the read did not record the expiry: stored %s", st)
		}
		if st := b.stored(t, swept.ID).State; st != airlock.StatePending {
			t.Fatalf("a request not yet due was %s by the read", st)
		}
		// The scheduler's sweep records the same decision a read does.
		b.clock.Set(swept.DeadlineAt)
		n, err := b.svc.ExpireDue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got2 := b.stored(t, swept.ID); got2.State != airlock.StateExpired {
			t.Fatalf("swept: %s", got2.State)
		} else if !got2.Decision.DecidedAt.Equal(got2.DeadlineAt) || got.Decision.DecidedBy != got2.Decision.DecidedBy ||
			!got.Decision.DecidedAt.Equal(got.DeadlineAt) {
			t.Fatalf("read and sweep disagree: read %+v, swept %+v", got.Decision, got2.Decision)
		}
		if n != 1 {
			t.Fatalf("ExpireDue expired %d, want the one not yet read", n)
		}
	})

	t.Run("a read expires its own request alone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		read := b.create(t, "10m")
		other := b.create(t, "10m")
		b.clock.Set(other.DeadlineAt.Add(time.Second)) // both are due
		if got, err := b.svc.Request(ctx, b.agent, read.ID, 0); err != nil || got.State != airlock.StateExpired {
			t.Fatalf("read after the deadline: %s, %v; want expired", got.State, err)
		}
		// Behind a backlog, a reader must not wait for a sweep of requests
		// that are not its own: the other stays for the scheduler.
		if st := b.stored(t, other.ID).State; st != airlock.StatePending {
			t.Fatalf("another due request is %s after the read, want pending until a sweep", st)
		}
		if n, err := b.svc.ExpireDue(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireDue = %d, %v; want the other request only", n, err)
		}
	})

	t.Run("a reviewer's read at the deadline expires it too", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{})
		r := b.create(t, "10m")
		b.clock.Set(r.DeadlineAt.Add(time.Second))
		got, err := b.svc.Request(ctx, b.reviewer, r.ID, 0)
		if err != nil || got.State != airlock.StateExpired {
			t.Fatalf("reviewer read after the deadline: %s, %v", got.State, err)
		}
		page, err := b.svc.ListRequests(ctx, b.reviewer, ListQuery{State: airlock.StatePending})
		if err != nil || len(page.Requests) != 0 {
			t.Fatalf("pending list after expiry: %d, %v", len(page.Requests), err)
		}
	})
}

// TestLongPoll checks that a waiting read returns as soon as the request
// is decided, its deadline passes, its instance is deleted, or the wait
// ends — on the real clock, since the wait uses real timers.
func TestLongPoll(t *testing.T) {
	t.Parallel()
	limits := testLimits()

	// poll starts a long-poll and returns its result channel once the
	// waiter is subscribed, so the test exercises the wake-up and not the
	// first read.
	type result struct {
		r   airlock.Request
		err error
		at  time.Time
	}
	poll := func(t *testing.T, b *bundle, id string, wait time.Duration) <-chan result {
		t.Helper()
		before := b.svc.Waiters()
		ch := make(chan result, 1)
		go func() {
			r, err := b.svc.Request(context.Background(), b.agent, id, wait)
			ch <- result{r, err, time.Now()}
		}()
		deadline := time.Now().Add(5 * time.Second)
		for b.svc.Waiters() == before {
			select {
			case res := <-ch:
				// It answered without waiting: the request was already
				// terminal (a loaded machine can let a short deadline pass
				// first). Hand the answer on for the caller to judge.
				done := make(chan result, 1)
				done <- res
				return done
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("the long-poll never subscribed")
			}
			time.Sleep(100 * time.Microsecond) // nothing to inject: poll the waiter count
		}
		return ch
	}
	recv := func(t *testing.T, ch <-chan result) result {
		t.Helper()
		select {
		case res := <-ch:
			return res
		case <-time.After(10 * time.Second):
			t.Fatal("the long-poll did not return")
			return result{}
		}
	}

	t.Run("returns when decided", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{realClock: true, limits: limits})
		r := b.create(t, "1h")
		ch := poll(t, b, r.ID, 30*time.Second)
		b.approve(t, r.ID)
		decided := time.Now()
		res := recv(t, ch)
		lag := res.at.Sub(decided)
		t.Logf("long-poll woke %s after the decision", lag)
		if res.err != nil || res.r.State != airlock.StateApproved || lag > time.Second {
			t.Fatalf("got %s, %v after %s; want approved within 1s", res.r.State, res.err, lag)
		}
	})

	t.Run("returns expired when the deadline passes, without a scheduler", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{realClock: true, limits: limits})
		r := b.create(t, "150ms")
		res := recv(t, poll(t, b, r.ID, 30*time.Second))
		lag := res.at.Sub(r.DeadlineAt)
		t.Logf("long-poll returned %s after the deadline", lag)
		if res.err != nil || res.r.State != airlock.StateExpired || lag < 0 || lag > time.Second {
			t.Fatalf("got %s, %v, %s after the deadline; want expired within 1s of it", res.r.State, res.err, lag)
		}
	})

	t.Run("returns expired when the deadline passes, with the scheduler", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{realClock: true, limits: limits})
		b.runScheduler(t)
		r := b.create(t, "150ms")
		res := recv(t, poll(t, b, r.ID, 30*time.Second))
		lag := res.at.Sub(r.DeadlineAt)
		if res.err != nil || res.r.State != airlock.StateExpired || lag < 0 || lag > time.Second {
			t.Fatalf("got %s, %v, %s after the deadline; want expired within 1s of it", res.r.State, res.err, lag)
		}
	})

	t.Run("returns pending when the wait ends first", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{realClock: true, limits: limits})
		r := b.create(t, "1h")
		start := time.Now()
		res := recv(t, poll(t, b, r.ID, 100*time.Millisecond))
		took := res.at.Sub(start)
		if res.err != nil || res.r.State != airlock.StatePending || took < 100*time.Millisecond || took > 2*time.Second {
			t.Fatalf("got %s, %v after %s; want pending after about 100ms", res.r.State, res.err, took)
		}
		if n := b.svc.Waiters(); n != 0 {
			t.Fatalf("%d waiters left subscribed", n)
		}
	})

	t.Run("returns cancelled when the instance is deleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{realClock: true, limits: limits})
		r := b.create(t, "1h")
		ch := poll(t, b, r.ID, 30*time.Second)
		if n, err := b.svc.DeleteInstance(t.Context(), b.agent, b.inst.ID); err != nil || n != 1 {
			t.Fatalf("delete: %d, %v", n, err)
		}
		deleted := time.Now()
		res := recv(t, ch)
		if res.err != nil || res.r.State != airlock.StateCancelled || res.at.Sub(deleted) > time.Second {
			t.Fatalf("got %s, %v after %s; want cancelled within 1s", res.r.State, res.err, res.at.Sub(deleted))
		}
	})

	t.Run("returns when the caller goes away", func(t *testing.T) {
		t.Parallel()
		b := setup(t, options{realClock: true, limits: limits})
		r := b.create(t, "1h")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := b.svc.Request(ctx, b.agent, r.ID, 30*time.Second)
			done <- err
		}()
		// Nothing to inject: poll the waiter count.
		testkit.Eventually(t, 30*time.Second, "the long-poll to wait", func() bool { return b.svc.Waiters() != 0 })
		cancel()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a cancelled long-poll returned no error")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the long-poll ignored its context")
		}
	})
}

// TestDeleteInstance checks docs/protocol.md L5: deleting an instance cancels
// its pending requests in one step and leaves the terminal ones alone.
func TestDeleteInstance(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	pending := []airlock.Request{b.create(t, "10m"), b.create(t, "20m"), b.create(t, "30m")}
	approved := b.approve(t, b.create(t, "10m").ID)
	overdue := b.create(t, "1s")
	other := b.instance(t, b.agent)
	untouched, _, err := b.svc.CreateRequest(ctx, b.agent, other.ID, newKey(), call("10m"))
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Second)

	n, err := b.svc.DeleteInstance(ctx, b.agent, b.inst.ID)
	if err != nil || n != len(pending) {
		t.Fatalf("delete cancelled %d (%v), want %d", n, err, len(pending))
	}
	for _, r := range pending {
		got := b.stored(t, r.ID)
		if got.State != airlock.StateCancelled || got.Decision == nil || got.Decision.DecidedBy != b.agent.ID {
			t.Errorf("pending request after delete: %s %+v", got.State, got.Decision)
		}
	}
	if got := b.stored(t, approved.ID); got.State != airlock.StateApproved || !got.Decision.DecidedAt.Equal(approved.Decision.DecidedAt) {
		t.Errorf("approved request after delete: %s", got.State)
	}
	if got := b.stored(t, overdue.ID); got.State != airlock.StateExpired {
		t.Errorf("a request past its deadline at the delete: %s, want expired (the deadline won)", got.State)
	}
	if got := b.stored(t, untouched.ID); got.State != airlock.StatePending {
		t.Errorf("another instance's request after delete: %s", got.State)
	}
	_, err = b.svc.Instance(ctx, b.agent, b.inst.ID)
	wantCode(t, err, airlock.CodeNotFound, "")
	_, _, err = b.svc.CreateRequest(ctx, b.agent, b.inst.ID, newKey(), call("10m"))
	wantCode(t, err, airlock.CodeNotFound, "")
	_, err = b.svc.DeleteInstance(ctx, b.agent, b.inst.ID)
	wantCode(t, err, airlock.CodeNotFound, "")
	// The requests stay readable.
	if got, err := b.svc.Request(ctx, b.agent, pending[0].ID, 0); err != nil || got.State != airlock.StateCancelled {
		t.Errorf("read after delete: %s, %v", got.State, err)
	}
	// An admin may delete any instance.
	if n, err := b.svc.DeleteInstance(ctx, b.admin, other.ID); err != nil || n != 1 {
		t.Errorf("admin delete: %d, %v", n, err)
	}
}

// TestReplay checks docs/protocol.md L9: a replay returns the original, even
// when it is terminal and its instance is gone, and neither replays nor
// reads move decided_at or expires_at.
func TestReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	key := newKey()
	body := call("10m")
	first, created, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, key, body)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	replay := func(step string) airlock.Request {
		t.Helper()
		r, created, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, key, body)
		if err != nil || created || r.ID != first.ID {
			t.Fatalf("%s: replay gave %s created=%v err=%v; want the original %s", step, r.ID, created, err, first.ID)
		}
		if !r.CreatedAt.Equal(first.CreatedAt) || !r.DeadlineAt.Equal(first.DeadlineAt) {
			t.Fatalf("%s: replay moved created/deadline: %s %s", step, r.CreatedAt, r.DeadlineAt)
		}
		return r
	}

	b.clock.Advance(time.Minute)
	if r := replay("pending"); r.State != airlock.StatePending {
		t.Fatalf("replay of a pending request: %s", r.State)
	}
	approved := b.approve(t, first.ID)
	want := *approved.Decision
	same := func(step string, d *airlock.Decision) {
		t.Helper()
		if d == nil || !d.DecidedAt.Equal(want.DecidedAt) || d.ExpiresAt == nil || !d.ExpiresAt.Equal(*want.ExpiresAt) {
			t.Fatalf("%s: decision %+v, want decided_at %s and expires_at %s unchanged", step, d, want.DecidedAt, want.ExpiresAt)
		}
	}
	for _, step := range []time.Duration{time.Second, 4 * time.Minute, time.Hour} {
		b.clock.Advance(step)
		name := "after " + step.String()
		same(name+", replay", replay(name).Decision)
		r, err := b.svc.Request(ctx, b.agent, first.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		same(name+", read", r.Decision)
		same(name+", stored", b.stored(t, first.ID).Decision)
	}

	// A replay at the deadline answers like a read: expired, not pending.
	dueKey := newKey()
	due, _, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, dueKey, call("1m"))
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	if r, created, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, dueKey, call("1m")); err != nil || created || r.ID != due.ID || r.State != airlock.StateExpired {
		t.Fatalf("replay at the deadline: %s %s created=%v err=%v; want %s expired", r.ID, r.State, created, err, due.ID)
	}

	// The same key with another body is a conflict, not a replay.
	changed := body
	changed.Arguments = json.RawMessage(`{"payment_id":"payment_123","amount":490000,"currency":"GBP"}`)
	_, _, err = b.svc.CreateRequest(ctx, b.agent, b.inst.ID, key, changed)
	wantCode(t, err, airlock.CodeIdempotencyConflict, "")
	// Another agent's same key is its own.
	otherInst := b.instance(t, b.otherAgent)
	if r, created, err := b.svc.CreateRequest(ctx, b.otherAgent, otherInst.ID, key, body); err != nil || !created || r.ID == first.ID {
		t.Fatalf("another agent's same key: %s created=%v err=%v", r.ID, created, err)
	}

	// Still the original once the instance is deleted, approved or
	// cancelled by the delete.
	cancelledKey := newKey()
	pending, _, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, cancelledKey, body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.DeleteInstance(ctx, b.agent, b.inst.ID); err != nil {
		t.Fatal(err)
	}
	same("after delete, replay", replay("after delete").Decision)
	r, created, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, cancelledKey, body)
	if err != nil || created || r.ID != pending.ID || r.State != airlock.StateCancelled {
		t.Fatalf("replay of a request the delete cancelled: %s %s created=%v err=%v", r.ID, r.State, created, err)
	}
}

// TestClaim checks the one execution attempt through the service.
func TestClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	pending := b.create(t, "10m")
	_, err := b.svc.Claim(ctx, b.agent, pending.ID)
	wantCode(t, err, airlock.CodeNotApproved, airlock.StatePending)

	r := b.approve(t, b.create(t, "10m").ID)
	b.clock.Set(r.Decision.ExpiresAt.Add(-time.Microsecond))
	got, err := b.svc.Claim(ctx, b.agent, r.ID)
	if err != nil || got.Execution == nil || got.Execution.Status != airlock.ExecClaimed {
		t.Fatalf("claim before expires_at: %+v, %v", got.Execution, err)
	}
	_, err = b.svc.Claim(ctx, b.agent, r.ID)
	wantCode(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved)
	if got, err := b.svc.Report(ctx, b.agent, r.ID, airlock.ReportInput{Status: airlock.ExecSucceeded}); err != nil || got.Execution.Status != airlock.ExecSucceeded {
		t.Fatalf("report: %+v, %v", got.Execution, err)
	}
	_, err = b.svc.Report(ctx, b.agent, r.ID, airlock.ReportInput{Status: airlock.ExecFailed})
	wantCode(t, err, airlock.CodeAlreadyExecuted, "")

	late := b.approve(t, b.create(t, "10m").ID)
	b.clock.Set(*late.Decision.ExpiresAt)
	_, err = b.svc.Claim(ctx, b.agent, late.ID)
	wantCode(t, err, airlock.CodeApprovalExpired, airlock.StateApproved)
	if got := b.stored(t, late.ID); got.State != airlock.StateApproved || got.Execution != nil {
		t.Fatalf("a lapsed approval stays approved and unclaimed: %s %+v", got.State, got.Execution)
	}
}

// TestEveryEventWakesStreams: on SQLite, a write whose call publishes
// nothing itself (an instance registered, a grant made) still wakes the
// event streams and the audit log's sequencer (store.Extras.Events), before
// the call returns.
func TestEveryEventWakesStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	changes := b.svc.Changes()
	inst, err := b.svc.RegisterInstance(ctx, b.agent, airlock.InstanceInput{Name: "woken"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	default:
		t.Fatal("registering an instance (event instance.created) woke no event stream")
	}
	changes = b.svc.Changes()
	if _, err := b.svc.CreateGrant(ctx, b.reviewer, airlock.GrantInput{Tool: "ls", Match: "true", InstanceID: inst.ID, ExpiresIn: "1h"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	default:
		t.Fatal("a grant (event grant.created) woke no event stream")
	}
}
