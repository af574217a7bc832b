package storetest

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testSessions checks MCP sessions: instances of kind session that stay
// readable once closed, and whose close cancels their pending requests.
func (s *mcpSuite) testSessions(t *testing.T) {
	runAll(t, []test{
		{"open, read and list", s.sessionsOpen},
		{"heartbeat stamps last seen", s.sessionsHeartbeat},
		{"close cancels pending and keeps the session readable", s.sessionsClose},
	})
}

func (s *mcpSuite) sessionsOpen(t *testing.T) {
	b := s.setup(t)
	s1 := b.session(t, ownerA)
	b.clock.Advance(time.Second)
	s2 := b.session(t, ownerA)
	sb := b.session(t, ownerB)

	if s1.Kind != airlock.InstanceSession || !strings.HasPrefix(s1.ID, airlock.PrefixSession) ||
		s1.LastSeenAt != nil || s1.ClosedAt != nil || !s1.CreatedAt.Equal(epoch.Truncate(time.Microsecond)) {
		t.Fatalf("opened session = %s", show(s1))
	}
	got, err := b.sessions.GetSession(b.ctx, s1.ID)
	wantOK(t, err)
	if show(got) != show(s1) {
		t.Fatalf("GetSession = %s, want %s", show(got), show(s1))
	}
	inst, err := b.store.GetInstance(b.ctx, s1.ID)
	wantOK(t, err)
	if inst.Kind != airlock.InstanceSession {
		t.Fatalf("GetInstance(session).Kind = %q, want session", inst.Kind)
	}
	adapter, err := b.store.GetInstance(b.ctx, b.inst.ID)
	wantOK(t, err)
	if adapter.Kind != airlock.InstanceAdapter || b.inst.Kind != airlock.InstanceAdapter {
		t.Fatalf("an instance created without a kind is %q (created %q), want adapter", adapter.Kind, b.inst.Kind)
	}
	_, err = b.sessions.GetSession(b.ctx, b.inst.ID)
	wantErr(t, err, airlock.CodeNotFound, "")
	_, err = b.sessions.GetSession(b.ctx, "ses_missing")
	wantErr(t, err, airlock.CodeNotFound, "")

	mine, err := b.sessions.ListSessions(b.ctx, ownerA)
	wantOK(t, err)
	all, err := b.sessions.ListSessions(b.ctx, "")
	wantOK(t, err)
	if got, want := instanceIDs(mine), []string{s2.ID, s1.ID}; !slices.Equal(got, want) {
		t.Fatalf("ListSessions(A) = %v, want %v (newest first, sessions only)", got, want)
	}
	if got, want := instanceIDs(all), []string{sb.ID, s2.ID, s1.ID}; !slices.Equal(got, want) {
		t.Fatalf("ListSessions() = %v, want %v", got, want)
	}
}

func (s *mcpSuite) sessionsHeartbeat(t *testing.T) {
	b := s.setup(t)
	sess := b.session(t, ownerA)
	b.linked(t, sess)
	at := b.clock.Advance(90 * time.Second).Truncate(time.Microsecond)
	in, ists, err := b.sessions.Heartbeat(b.ctx, sess.ID)
	wantOK(t, err)
	if len(ists) != 0 || in.LastSeenAt == nil || !in.LastSeenAt.Equal(at) || in.PendingCount != 1 || in.ID != sess.ID {
		t.Fatalf("Heartbeat = %s, %s; want last seen %v, 1 pending, no instructions", show(in), show(ists), at)
	}
	got, err := b.sessions.GetSession(b.ctx, sess.ID)
	wantOK(t, err)
	if got.LastSeenAt == nil || !got.LastSeenAt.Equal(at) {
		t.Fatalf("GetSession after heartbeat: last seen %v, want %v", got.LastSeenAt, at)
	}
	_, _, err = b.sessions.Heartbeat(b.ctx, "ses_missing")
	wantErr(t, err, airlock.CodeNotFound, "")
	_, _, err = b.sessions.Heartbeat(b.ctx, b.inst.ID)
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *mcpSuite) sessionsClose(t *testing.T) {
	b := s.setup(t)
	sess := b.session(t, ownerA)
	p1, p2 := b.linked(t, sess), b.linked(t, sess)
	approved := b.linked(t, sess)
	_, err := b.decide(approved.ID, airlock.StateApproved, "", "blue")
	wantOK(t, err)
	elsewhere := b.create(t)

	at := b.clock.Advance(time.Second).Truncate(time.Microsecond)
	cancelled, err := b.sessions.CloseSession(b.ctx, sess.ID, ownerA)
	wantOK(t, err)
	if want := []string{p1.ID, p2.ID}; !slices.Equal(cancelled, want) {
		t.Fatalf("CloseSession cancelled %v, want %v", cancelled, want)
	}
	for _, id := range cancelled {
		if r := b.get(t, id); r.State != airlock.StateCancelled || r.Decision.DecidedBy != ownerA || !r.Decision.DecidedAt.Equal(at) {
			t.Fatalf("%s after close = %s, want cancelled by %s at %v", id, show(r), ownerA, at)
		}
	}
	if r := b.get(t, approved.ID); r.State != airlock.StateApproved {
		t.Fatalf("approved request after close is %s", r.State)
	}
	if r := b.get(t, elsewhere.ID); r.State != airlock.StatePending {
		t.Fatalf("another instance's request after close is %s", r.State)
	}

	got, err := b.sessions.GetSession(b.ctx, sess.ID)
	wantOK(t, err)
	if got.ClosedAt == nil || !got.ClosedAt.Equal(at) || got.PendingCount != 0 {
		t.Fatalf("closed session = %s, want closed at %v with 0 pending", show(got), at)
	}
	list, err := b.sessions.ListSessions(b.ctx, ownerA)
	wantOK(t, err)
	if len(list) != 1 || list[0].ID != sess.ID || list[0].ClosedAt == nil {
		t.Fatalf("ListSessions after close = %s, want the closed session", show(list))
	}
	_, err = b.store.GetInstance(b.ctx, sess.ID)
	wantErr(t, err, airlock.CodeNotFound, "")
	_, _, err = b.sessions.Heartbeat(b.ctx, sess.ID)
	wantErr(t, err, airlock.CodeNotFound, "")
	_, _, err = b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) {
		p.Request.InstanceID, p.Request.SessionID = sess.ID, sess.ID
	}))
	wantErr(t, err, airlock.CodeNotFound, "")

	again, err := b.sessions.CloseSession(b.ctx, sess.ID, ownerA)
	if err != nil || len(again) != 0 {
		t.Fatalf("closing a closed session = %v, %v; want nothing cancelled and no error", again, err)
	}
	if got2, err := b.sessions.GetSession(b.ctx, sess.ID); err != nil || !got2.ClosedAt.Equal(at) {
		t.Fatalf("second close changed the session: %s, %v", show(got2), err)
	}
	_, err = b.sessions.CloseSession(b.ctx, "ses_missing", ownerA)
	wantErr(t, err, airlock.CodeNotFound, "")
	_, err = b.sessions.CloseSession(b.ctx, b.inst.ID, ownerA)
	wantErr(t, err, airlock.CodeNotFound, "")
	if _, err := b.store.GetInstance(b.ctx, b.inst.ID); err != nil {
		t.Fatalf("closing an adapter instance as a session touched it: %v", err)
	}

	closes := b.eventsOf(t, airlock.EventSessionClosed)
	if len(closes) != 1 || closes[0].InstanceID != sess.ID || closes[0].Actor != ownerA {
		t.Fatalf("session.closed events = %s, want one for %s by %s", show(closes), sess.ID, ownerA)
	}
}

// testInstructions checks that each decision on a request linked to a
// session is delivered exactly once, by the session's next heartbeat.
func (s *mcpSuite) testInstructions(t *testing.T) {
	runAll(t, []test{
		{"approve, deny and expiry leave one instruction each; cancel none", s.instructionsPerDecision},
		{"instructions go to their own session only", s.instructionsOwnSession},
		{"exactly once under 8 concurrent heartbeats", s.instructionsRace},
	})
}

func (s *mcpSuite) instructionsPerDecision(t *testing.T) {
	b := s.setup(t)
	sess := b.session(t, ownerA)
	short := func(p *store.NewRequestParams) { p.Window = time.Minute }
	approved, denied := b.linked(t, sess), b.linked(t, sess)
	swept, lateDecided := b.linked(t, sess, short), b.linked(t, sess, short)
	cancelled := b.linked(t, sess)
	unlinked := b.create(t)

	at1 := b.clock.Advance(time.Second).Truncate(time.Microsecond)
	_, err := b.decide(approved.ID, airlock.StateApproved, "go ahead", "green")
	wantOK(t, err)
	b.clock.Advance(time.Second)
	_, err = b.decide(denied.ID, airlock.StateDenied, "not now: too risky", "")
	wantOK(t, err)
	_, err = b.cancel(cancelled.ID)
	wantOK(t, err)
	_, err = b.decide(unlinked.ID, airlock.StateApproved, "unlinked", "")
	wantOK(t, err)

	b.clock.Set(swept.DeadlineAt)
	_, err = b.store.ExpireDue(b.ctx, 1)
	wantOK(t, err)
	_, err = b.decide(lateDecided.ID, airlock.StateApproved, "too late", "")
	wantErr(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)

	ists := b.heartbeat(t, sess.ID)
	type want struct {
		request string
		status  airlock.State
		note    string
		answer  string
	}
	wants := []want{
		{approved.ID, airlock.StateApproved, "go ahead", "green"},
		{denied.ID, airlock.StateDenied, "not now: too risky", ""},
		{swept.ID, airlock.StateExpired, "", ""},
		{lateDecided.ID, airlock.StateExpired, "", ""},
	}
	if len(ists) != len(wants) {
		t.Fatalf("heartbeat delivered %d instructions, want %d: %s", len(ists), len(wants), show(ists))
	}
	seen := map[string]bool{}
	for i, w := range wants {
		got := ists[i]
		if got.RequestID != w.request || got.Status != w.status || got.Note != w.note || got.Answer != w.answer ||
			got.SessionID != sess.ID || !strings.HasPrefix(got.ID, airlock.PrefixInstruction) || seen[got.ID] {
			t.Fatalf("instruction %d = %s, want %+v in session %s with a fresh ist_ ID", i, show(got), w, sess.ID)
		}
		seen[got.ID] = true
	}
	if !ists[0].CreatedAt.Equal(at1) {
		t.Fatalf("approval instruction created at %v, want the decision's time %v", ists[0].CreatedAt, at1)
	}
	if again := b.heartbeat(t, sess.ID); len(again) != 0 {
		t.Fatalf("second heartbeat delivered %s again", show(again))
	}
	delivered := b.eventsOf(t, airlock.EventInstructionDelivered)
	if len(delivered) != len(wants) {
		t.Fatalf("%d instruction.delivered events, want %d", len(delivered), len(wants))
	}
}

func (s *mcpSuite) instructionsOwnSession(t *testing.T) {
	b := s.setup(t)
	s1, s2 := b.session(t, ownerA), b.session(t, ownerA)
	r := b.linked(t, s1)
	_, err := b.decide(r.ID, airlock.StateDenied, "no", "")
	wantOK(t, err)
	if got := b.heartbeat(t, s2.ID); len(got) != 0 {
		t.Fatalf("the other session received %s", show(got))
	}
	if got := b.heartbeat(t, s1.ID); len(got) != 1 || got[0].RequestID != r.ID {
		t.Fatalf("the request's session received %s, want its instruction", show(got))
	}
}

func (s *mcpSuite) instructionsRace(t *testing.T) {
	b := s.setup(t)
	sess := b.session(t, ownerA)
	const n, beaters = 40, 8
	reqs := make([]airlock.Request, n)
	for i := range reqs {
		reqs[i] = b.linked(t, sess)
	}
	var (
		mu      sync.Mutex
		got     = map[string]int{} // request ID → deliveries
		ists    = map[string]bool{}
		wg      sync.WaitGroup
		done    = make(chan struct{})
		errs    = make(chan error, beaters+1)
		collect = func(list []airlock.Instruction) {
			mu.Lock()
			defer mu.Unlock()
			for _, ist := range list {
				got[ist.RequestID]++
				ists[ist.ID] = true
			}
		}
	)
	for range beaters {
		wg.Go(func() {
			for {
				select {
				case <-done:
					_, list, err := b.sessions.Heartbeat(b.ctx, sess.ID)
					if err != nil {
						errs <- err
					}
					collect(list)
					return
				default:
				}
				_, list, err := b.sessions.Heartbeat(b.ctx, sess.ID)
				if err != nil {
					errs <- err
					return
				}
				collect(list)
			}
		})
	}
	for i, r := range reqs {
		status, answer := airlock.StateApproved, "blue"
		if i%2 == 1 {
			status, answer = airlock.StateDenied, ""
		}
		if _, err := b.decide(r.ID, status, "n", answer); err != nil {
			errs <- err
			break
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("during the run: %v", err)
	}
	if last := b.heartbeat(t, sess.ID); len(last) != 0 {
		t.Fatalf("a heartbeat after all others delivered %d more", len(last))
	}
	for _, r := range reqs {
		if got[r.ID] != 1 {
			t.Fatalf("request %s was delivered %d times, want exactly once", r.ID, got[r.ID])
		}
	}
	if len(got) != n || len(ists) != n {
		t.Fatalf("%d requests and %d instruction IDs delivered, want %d each", len(got), len(ists), n)
	}
}

// testDefaultInstance checks agents' default MCP instances and reading a
// request by its idempotency key.
func (s *mcpSuite) testDefaultInstance(t *testing.T) {
	runAll(t, []test{
		{"one per agent, even when first used at once", s.defaultInstance},
		{"request by idempotency key", s.requestByKey},
	})
}

func (s *mcpSuite) defaultInstance(t *testing.T) {
	b := s.setup(t)
	const callers = 8
	got := make([]airlock.Instance, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { got[i], errs[i] = b.sessions.MCPInstance(b.ctx, ownerA, ownerA) })
	}
	wg.Wait()
	for i := range callers {
		wantOK(t, errs[i])
		if got[i].ID != got[0].ID {
			t.Fatalf("concurrent first uses got %s and %s, want one instance", got[0].ID, got[i].ID)
		}
	}
	def := got[0]
	if def.Kind != airlock.InstanceAdapter || def.Name != "mcp" || def.OwnerID != ownerA || !strings.HasPrefix(def.ID, airlock.PrefixInstance) {
		t.Fatalf("default MCP instance = %s", show(def))
	}
	other, err := b.sessions.MCPInstance(b.ctx, ownerB, ownerB)
	wantOK(t, err)
	if other.ID == def.ID || other.OwnerID != ownerB {
		t.Fatalf("agent B's default instance = %s, want its own", show(other))
	}
	if n := len(b.eventsOf(t, airlock.EventInstanceCreated)); n != 3 { // b.inst and the two defaults
		t.Fatalf("%d instance.created events, want 3", n)
	}
	_, err = b.store.DeleteInstance(b.ctx, def.ID, ownerA)
	wantOK(t, err)
	fresh, err := b.sessions.MCPInstance(b.ctx, ownerA, ownerA)
	wantOK(t, err)
	if fresh.ID == def.ID {
		t.Fatalf("after deleting the default instance MCPInstance returned it again")
	}
}

func (s *mcpSuite) requestByKey(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	got, err := b.sessions.RequestByKey(b.ctx, ownerA, r.IdempotencyKey)
	wantOK(t, err)
	sameRequest(t, "RequestByKey", got, r)
	_, err = b.sessions.RequestByKey(b.ctx, ownerB, r.IdempotencyKey)
	wantErr(t, err, airlock.CodeNotFound, "")
	_, err = b.sessions.RequestByKey(b.ctx, ownerA, "key_missing")
	wantErr(t, err, airlock.CodeNotFound, "")
}
