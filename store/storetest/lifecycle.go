package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// op is one of the five operations of the T01 matrix.
type op struct {
	name string
	// event is what a successful run appends.
	event airlock.EventType
	// do runs the operation on r; done reports whether it changed r.
	do func(t *testing.T, b *bundle, r airlock.Request) (done bool, err error)
}

var matrixOps = []op{
	{"approve", airlock.EventRequestApproved, func(t *testing.T, b *bundle, r airlock.Request) (bool, error) {
		_, err := b.approve(r.ID)
		return err == nil, err
	}},
	{"deny", airlock.EventRequestDenied, func(t *testing.T, b *bundle, r airlock.Request) (bool, error) {
		_, err := b.deny(r.ID)
		return err == nil, err
	}},
	{"cancel", airlock.EventRequestCancelled, func(t *testing.T, b *bundle, r airlock.Request) (bool, error) {
		_, err := b.cancel(r.ID)
		return err == nil, err
	}},
	// expire runs the scheduler's sweep once the deadline has come; it
	// must pick up a pending request and pass over a terminal one.
	{"expire", airlock.EventRequestExpired, func(t *testing.T, b *bundle, r airlock.Request) (bool, error) {
		if b.clock.Now().Before(r.DeadlineAt) {
			b.clock.Set(r.DeadlineAt)
		}
		rs, err := b.store.ExpireDue(b.ctx, 100)
		return slices.Contains(ids(rs), r.ID), err
	}},
	{"claim", airlock.EventExecutionClaimed, func(t *testing.T, b *bundle, r airlock.Request) (bool, error) {
		_, err := b.claim(r.ID)
		return err == nil, err
	}},
}

// outcome is what one operation of the T01 matrix must do to a request in
// one start state.
type outcome struct {
	code  airlock.Code  // "" when the operation succeeds or has nothing to do
	state airlock.State // what holds afterwards, and the error's State
	done  bool          // the operation changed the request
}

// lifecycleMatrix is T01's table: for every start state, the outcome of
// each operation, in the order of matrixOps.
func lifecycleMatrix() map[airlock.State][]outcome {
	ok := func(s airlock.State) outcome { return outcome{state: s, done: true} }
	noop := func(s airlock.State) outcome { return outcome{state: s} }
	refused := func(c airlock.Code, s airlock.State) outcome { return outcome{code: c, state: s} }
	const (
		pending, approved, denied, expired, cancelled = airlock.StatePending, airlock.StateApproved, airlock.StateDenied, airlock.StateExpired, airlock.StateCancelled
		notPending, deadlinePassed, notApproved       = airlock.CodeNotPending, airlock.CodeDeadlinePassed, airlock.CodeNotApproved
	)
	return map[airlock.State][]outcome{
		// A pending request takes any decision, cancellation or expiry, but
		// has nothing to execute.
		pending: {ok(approved), ok(denied), ok(cancelled), ok(expired), refused(notApproved, pending)},
		// An approved request keeps its approval; it may be claimed once.
		approved: {refused(notPending, approved), refused(notPending, approved), refused(notPending, approved), noop(approved), ok(approved)},
		denied:   {refused(notPending, denied), refused(notPending, denied), refused(notPending, denied), noop(denied), refused(notApproved, denied)},
		// An expired request refuses decisions because its deadline passed.
		expired:   {refused(deadlinePassed, expired), refused(deadlinePassed, expired), refused(deadlinePassed, expired), noop(expired), refused(notApproved, expired)},
		cancelled: {refused(notPending, cancelled), refused(notPending, cancelled), refused(notPending, cancelled), noop(cancelled), refused(notApproved, cancelled)},
	}
}

// testLifecycle is T01: every start state × every operation, with the
// exact outcome, and terminal rows untouched by anything that follows.
func (s *suite) testLifecycle(t *testing.T) {
	matrix := lifecycleMatrix()
	var tests []test
	for _, start := range airlock.States {
		for i, o := range matrixOps {
			tests = append(tests, test{fmt.Sprintf("%s/%s", start, o.name), func(t *testing.T) { s.matrixCase(t, start, o, matrix[start][i]) }})
		}
	}
	runAll(t, append(tests, []test{
		{"unknown request", s.unknownRequest},
		{"decisions record who, when and what", s.decisionsRecord},
		{"invalid decisions", s.invalidDecisions},
		{"refusals say what holds in the same words", s.refusalsInSameWords},
		{"decisions the check refuses change nothing", s.checkRefusals},
	}...))
}

// matrixCase runs o on a request in state start and checks that w is what
// happens: its error, the state that holds, its one event or none, and a
// terminal request untouched.
func (s *suite) matrixCase(t *testing.T, start airlock.State, o op, w outcome) {
	b := s.setup(t)
	before := b.into(t, start)
	eventsBefore := len(b.events(t))

	done, err := o.do(t, b, before)
	if w.code == "" {
		wantOK(t, err)
	} else {
		wantErr(t, err, w.code, w.state)
	}
	if done != w.done {
		t.Fatalf("%s changed the request: %v, want %v", o.name, done, w.done)
	}
	after := b.get(t, before.ID)
	if after.State != w.state {
		t.Fatalf("state after %s = %s, want %s", o.name, after.State, w.state)
	}

	evs := b.events(t)
	switch {
	case w.done:
		if len(evs) != eventsBefore+1 {
			t.Fatalf("%s appended %d events, want 1", o.name, len(evs)-eventsBefore)
		}
		if e := evs[len(evs)-1]; e.Type != o.event || e.RequestID != before.ID || e.State != w.state {
			t.Fatalf("event = %+v, want %s of %s in state %s", e, o.event, before.ID, w.state)
		}
	case len(evs) != eventsBefore:
		t.Fatalf("refused %s appended %d events, want none: %+v", o.name, len(evs)-eventsBefore, evs[eventsBefore:])
	}

	if start.Terminal() {
		// Nothing may touch a terminal request's state or decision; only
		// a claim may add the execution.
		if o.name == "claim" && w.done {
			if after.Execution == nil || after.Execution.Status != airlock.ExecClaimed {
				t.Fatalf("execution after claim = %+v, want claimed", after.Execution)
			}
			after.Execution = nil
		}
		sameRequest(t, "terminal request after "+o.name, after, before)
	}
}

func (s *suite) unknownRequest(t *testing.T) {
	b := s.setup(t)
	for _, o := range matrixOps {
		if o.name == "expire" {
			continue
		}
		_, err := o.do(t, b, airlock.Request{ID: "apr_missing"})
		wantErr(t, err, airlock.CodeNotFound, "")
	}
	_, err := b.store.GetRequest(b.ctx, "apr_missing")
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) decisionsRecord(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, func(p *store.NewRequestParams) { p.Request.Question = &airlock.Question{} })
	at := b.clock.Advance(time.Minute)
	got, err := b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved,
		Note: "fine ✓", Answer: "yes", Validity: 90 * time.Second, Actor: reviewer})
	wantOK(t, err)
	exp := at.Truncate(time.Microsecond).Add(90 * time.Second)
	want := airlock.Decision{Status: airlock.StateApproved, Note: "fine ✓", Answer: "yes",
		DecidedAt: at.Truncate(time.Microsecond), DecidedBy: reviewer, ExpiresAt: &exp}
	if d := got.Decision; d == nil || d.Status != want.Status || d.Note != want.Note || d.Answer != want.Answer ||
		!d.DecidedAt.Equal(want.DecidedAt) || d.DecidedBy != want.DecidedBy || d.ExpiresAt == nil || !d.ExpiresAt.Equal(exp) {
		t.Fatalf("decision = %s, want %s", show(got.Decision), show(want))
	}
	sameRequest(t, "read after decide", b.get(t, r.ID), got)

	r2 := b.create(t)
	got, err = b.deny(r2.ID)
	wantOK(t, err)
	if d := got.Decision; d.Status != airlock.StateDenied || d.ExpiresAt != nil || d.Note != "not today" {
		t.Fatalf("denial = %s, want denied with its note and no expires_at", show(d))
	}

	r3 := b.create(t)
	got, err = b.cancel(r3.ID)
	wantOK(t, err)
	if d := got.Decision; d.Status != airlock.StateCancelled || d.DecidedBy != ownerA || d.ExpiresAt != nil {
		t.Fatalf("cancellation = %s, want cancelled by %s", show(d), ownerA)
	}
}

func (s *suite) invalidDecisions(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	const (
		status   = "status must be approved or denied"
		validity = "an approval needs a validity of at least 1µs, so that expires_at is after decided_at"
	)
	for _, tc := range []struct {
		p              store.DecideParams
		field, message string
	}{
		{store.DecideParams{ID: r.ID, Status: airlock.StatePending, Actor: reviewer}, "status", status},
		{store.DecideParams{ID: r.ID, Status: airlock.StateExpired, Actor: reviewer}, "status", status},
		{store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: 0, Actor: reviewer}, "valid_for", validity},
		{store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: 999 * time.Nanosecond, Actor: reviewer}, "valid_for", validity},
	} {
		_, err := b.store.Decide(b.ctx, tc.p)
		wantInvalid(t, err, tc.field, tc.message)
	}
	sameRequest(t, "after invalid decisions", b.get(t, r.ID), r)
}

// A lost change is refused with the code and state of what holds, in
// words the domain writes (Request.DecisionConflict, ClaimConflict,
// ReportConflict), so that every store says the same.
func (s *suite) refusalsInSameWords(t *testing.T) {
	b := s.setup(t)
	stamp := func(at time.Time) string { return at.Format(time.RFC3339Nano) }

	denied := b.into(t, airlock.StateDenied)
	_, err := b.approve(denied.ID)
	wantMessage(t, err, airlock.CodeNotPending, airlock.StateDenied, "request "+denied.ID+" is already denied")
	_, err = b.claim(denied.ID)
	wantMessage(t, err, airlock.CodeNotApproved, airlock.StateDenied, "request "+denied.ID+" is denied, not approved; it may not run")
	_, err = b.store.ReportExecution(b.ctx, denied.ID, airlock.ReportInput{Status: airlock.ExecSucceeded}, ownerA)
	wantMessage(t, err, airlock.CodeNotApproved, airlock.StateDenied, "request "+denied.ID+" is denied, not approved; nothing ran")

	approved := b.into(t, airlock.StateApproved)
	_, err = b.store.ReportExecution(b.ctx, approved.ID, airlock.ReportInput{Status: airlock.ExecSucceeded}, ownerA)
	wantInvalid(t, err, "status", "request "+approved.ID+" has no claimed execution; claim it before reporting")
	claimed, err := b.claim(approved.ID)
	wantOK(t, err)
	_, err = b.claim(approved.ID)
	wantMessage(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved,
		"request "+approved.ID+" was already claimed at "+stamp(claimed.Execution.ClaimedAt)+"; an approval permits one attempt")
	_, err = b.store.ReportExecution(b.ctx, approved.ID, airlock.ReportInput{Status: airlock.ExecFailed}, ownerA)
	wantOK(t, err)
	_, err = b.store.ReportExecution(b.ctx, approved.ID, airlock.ReportInput{Status: airlock.ExecSucceeded}, ownerA)
	wantMessage(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved, "request "+approved.ID+"'s execution was already reported as failed")

	lapsed := b.into(t, airlock.StateApproved)
	b.clock.Set(*lapsed.Decision.ExpiresAt)
	_, err = b.claim(lapsed.ID)
	wantMessage(t, err, airlock.CodeApprovalExpired, airlock.StateApproved,
		"the approval of request "+lapsed.ID+" lapsed at "+stamp(*lapsed.Decision.ExpiresAt)+"; ask again with a new request")

	late := b.create(t)
	b.clock.Set(late.DeadlineAt)
	_, err = b.cancel(late.ID)
	wantMessage(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired,
		"request "+late.ID+" expired at its deadline "+stamp(late.DeadlineAt)+"; no decision can be recorded")

	_, _, err = b.store.ListRequests(b.ctx, store.RequestFilter{State: "done"})
	wantInvalid(t, err, "state", "state must be one of pending, approved, denied, expired, cancelled")
	_, _, err = b.store.ListRequestSummaries(b.ctx, store.RequestFilter{Kind: "rm_rf"})
	wantInvalid(t, err, "kind", `unknown kind "rm_rf"`)
}

// DecideParams.Check runs inside the decision: a refused one changes
// nothing, a passing one decides.
func (s *suite) checkRefusals(t *testing.T) {
	b := s.setup(t)
	owner := airlock.Token{ID: ownerA, Name: "agent", Role: airlock.RoleAgent, Principal: "alice",
		Hash: airlock.HashSecret("agent a"), CreatedAt: epoch.Truncate(time.Microsecond), CreatedBy: "tok_admin"}
	wantOK(t, b.store.CreateToken(b.ctx, owner))
	plain := b.create(t)
	question := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Question = &airlock.Question{Choices: []string{"blue", "green"}}
	})
	for _, tc := range []struct {
		name string
		p    store.DecideParams
		code airlock.Code
	}{
		{"self-approval by principal", store.DecideParams{ID: plain.ID, Status: airlock.StateApproved, Validity: validity,
			Actor: "tok_alices_reviewer", Principal: "alice"}, airlock.CodeForbidden},
		{"self-denial by principal", store.DecideParams{ID: plain.ID, Status: airlock.StateDenied,
			Actor: "tok_alices_reviewer", Principal: "alice"}, airlock.CodeForbidden},
		{"answer to no question", store.DecideParams{ID: plain.ID, Status: airlock.StateApproved, Answer: "yes",
			Validity: validity, Actor: reviewer, Principal: reviewer}, airlock.CodeInvalidRequest},
		{"question approved without an answer", store.DecideParams{ID: question.ID, Status: airlock.StateApproved,
			Validity: validity, Actor: reviewer, Principal: reviewer}, airlock.CodeInvalidRequest},
		{"answer not among the choices", store.DecideParams{ID: question.ID, Status: airlock.StateApproved, Answer: "red",
			Validity: validity, Actor: reviewer, Principal: reviewer}, airlock.CodeInvalidRequest},
	} {
		_, err := b.store.Decide(b.ctx, tc.p)
		wantErr(t, err, tc.code, "")
	}
	sameRequest(t, "plain after refused decisions", b.get(t, plain.ID), plain)
	sameRequest(t, "question after refused decisions", b.get(t, question.ID), question)
	if in, err := b.store.GetInstance(b.ctx, b.inst.ID); err != nil || in.PendingCount != 2 {
		t.Fatalf("instance after refused decisions: %d pending (%v), want 2", in.PendingCount, err)
	}

	got, err := b.store.Decide(b.ctx, store.DecideParams{ID: question.ID, Status: airlock.StateApproved, Answer: "green",
		Validity: validity, Actor: reviewer, Principal: "bob"})
	wantOK(t, err)
	if got.State != airlock.StateApproved || got.Decision.Answer != "green" {
		t.Fatalf("answered approval = %s, want approved with answer green", show(got))
	}
	got, err = b.store.Decide(b.ctx, store.DecideParams{ID: plain.ID, Status: airlock.StateDenied,
		Actor: reviewer, Principal: "bob"})
	wantOK(t, err)
	if got.State != airlock.StateDenied {
		t.Fatalf("denial by another principal = %s, want denied", show(got))
	}
	var decided int
	for _, e := range b.events(t) {
		if e.Type == airlock.EventRequestApproved || e.Type == airlock.EventRequestDenied {
			decided++
		}
	}
	if decided != 2 {
		t.Fatalf("%d decision events, want 2: refused decisions must leave none", decided)
	}
}

// testDeadlineBoundaries is T05: one microsecond either side of the
// deadline and of expires_at.
func (s *suite) testDeadlineBoundaries(t *testing.T) {
	offsets := []struct {
		name string
		d    time.Duration
	}{{"-1µs", -time.Microsecond}, {"", 0}, {"+1µs", time.Microsecond}}

	decide := []struct {
		name string
		do   func(b *bundle, id string) (airlock.Request, error)
		to   airlock.State
	}{
		{"approve", (*bundle).approve, airlock.StateApproved},
		{"deny", (*bundle).deny, airlock.StateDenied},
		{"cancel", (*bundle).cancel, airlock.StateCancelled},
	}
	for _, d := range decide {
		for _, off := range offsets {
			t.Run(d.name+"/deadline"+off.name, func(t *testing.T) {
				t.Parallel()
				b := s.setup(t)
				r := b.create(t)
				b.clock.Set(r.DeadlineAt.Add(off.d))
				got, err := d.do(b, r.ID)
				if off.d < 0 {
					wantOK(t, err)
					if got.State != d.to {
						t.Fatalf("state = %s, want %s", got.State, d.to)
					}
					return
				}
				// At or after the deadline the deadline has won: the
				// request is expired, by the expiry actor, and no decision
				// is recorded.
				wantErr(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)
				after := b.get(t, r.ID)
				if after.State != airlock.StateExpired || after.Decision == nil || after.Decision.DecidedBy != airlock.ActorExpiry || after.Decision.ExpiresAt != nil {
					t.Fatalf("after a late %s: %s, want expired by %s", d.name, show(after), airlock.ActorExpiry)
				}
			})
		}
	}

	for _, off := range offsets {
		t.Run("claim/expires_at"+off.name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t)
			r := b.create(t)
			b.clock.Advance(time.Minute)
			r, err := b.approve(r.ID)
			wantOK(t, err)
			b.clock.Set(r.Decision.ExpiresAt.Add(off.d))
			got, err := b.claim(r.ID)
			if off.d < 0 {
				wantOK(t, err)
				if got.Execution == nil || got.Execution.Status != airlock.ExecClaimed {
					t.Fatalf("execution = %s, want claimed", show(got.Execution))
				}
				return
			}
			// Permission to start has lapsed; the request stays approved
			// (docs/protocol.md L6) and nothing is claimed.
			wantErr(t, err, airlock.CodeApprovalExpired, airlock.StateApproved)
			sameRequest(t, "after a late claim", b.get(t, r.ID), r)
		})
	}
}

// testRaces fires competing changes at once: the store, not the caller,
// picks exactly one winner, and every loser is told what won.
func (s *suite) testRaces(t *testing.T) {
	runAll(t, []test{
		{"approve, deny and cancel race", s.decisionRace},
		{"concurrent claims", s.claimRace},
	})
}

func (s *suite) decisionRace(t *testing.T) {
	b := s.setup(t)
	for range 20 {
		r := b.create(t)
		racers := []func(string) (airlock.Request, error){b.approve, b.deny, b.cancel}
		res := make([]airlock.Request, len(racers))
		errs := make([]error, len(racers))
		var wg sync.WaitGroup
		for i, do := range racers {
			wg.Go(func() { res[i], errs[i] = do(r.ID) })
		}
		wg.Wait()

		final := b.get(t, r.ID)
		wins := 0
		for i, err := range errs {
			if err == nil {
				wins++
				sameRequest(t, "winner's result", res[i], final)
				continue
			}
			wantErr(t, err, airlock.CodeNotPending, final.State)
		}
		if wins != 1 {
			t.Fatalf("%d of 3 racers won on %s, want exactly 1 (errors %v)", wins, r.ID, errs)
		}
	}
}

func (s *suite) claimRace(t *testing.T) {
	b := s.setup(t)
	r := b.into(t, airlock.StateApproved)
	const claimers = 8
	errs := make([]error, claimers)
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() { _, errs[i] = b.claim(r.ID) })
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		wantErr(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved)
	}
	if wins != 1 {
		t.Fatalf("%d of %d claims succeeded, want exactly 1", wins, claimers)
	}
}
