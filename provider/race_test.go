package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/checker"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
)

// raceRounds is how many rounds TestRacesOneProcess runs: 2,000 (the T03
// pass figure) always in CI; outside CI, 200 with -short or under the race
// detector (see heavySize).
func raceRounds(t *testing.T) int {
	t.Helper()
	if testkit.InCI() {
		return 2000
	}
	return heavySize(t, 2000, 200)
}

// TestRacesOneProcess is T03: on SQLite, 16 goroutines run rounds in which
// a request with a 5..50 ms deadline is approved, denied and cancelled
// from different goroutines with jitter around the deadline while the
// scheduler runs, then claimed twice. The recorded history must have
// exactly one terminal outcome per request, no approval at or after a
// deadline, no second claim, no internal (busy) error, and be
// linearizable.
func TestRacesOneProcess(t *testing.T) {
	t.Parallel()
	rounds := raceRounds(t)
	const workers = 16
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (rounds %d, workers %d)", seed, rounds, workers)

	b := setup(t, options{realClock: true, limits: testLimits()})
	b.runScheduler(t)
	ctx := context.WithoutCancel(t.Context())
	var rec checker.Recorder
	var unexpected atomic.Int64 // errors that are not race refusals
	approve := airlock.DecisionInput{Status: airlock.StateApproved}
	deny := airlock.DecisionInput{Status: airlock.StateDenied, Note: "no"}

	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for round := range next {
				raceRound(t, ctx, b, &rec, rng, w, round, approve, deny, &unexpected)
			}
		})
	}
	for round := range rounds {
		next <- round
	}
	close(next)
	wg.Wait()
	// The scheduler settles what nobody decided; then read every request
	// once more, so the history ends with what is stored.
	b.waitFor(t, 10*time.Second, "the scheduler to expire the rest", func() bool { return b.pending(t) == 0 })
	elapsed := time.Since(start)
	rec.Add(finalReads(t, b)...)
	events := b.events(t)
	ops := append(rec.Ops(), checker.ExpiryOps(events, time.Now())...)
	rep := checker.Check(ops, checker.Options{Complete: true})
	if rep.Requests != rounds {
		t.Errorf("history holds %d requests, want %d", rep.Requests, rounds)
	}
	if err := rep.Err(); err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
	if n := unexpected.Load(); n > 0 {
		t.Errorf("seed %d: %d calls failed with an unexpected error", seed, n)
	}
	checkAuditOutcomes(t, b, events, rounds)
	if p := b.pending(t); p != 0 {
		t.Errorf("%d requests still pending", p)
	}

	var refusals = map[airlock.Code]int{}
	for _, o := range ops {
		if o.Code != "" {
			refusals[o.Code]++
		}
	}
	t.Logf("T03: %d rounds, %d ops in %s (%.0f rounds/s); outcomes %v; claims %d; refusals %v; violations %d",
		rounds, len(ops), elapsed.Round(time.Millisecond), float64(rounds)/elapsed.Seconds(),
		rep.Outcomes, rep.Claims, refusals, len(rep.Violations))
	// Under the race detector a call takes longer than most windows, so
	// nearly every round ends expired; only a normal build is fast enough
	// for every outcome to win some rounds.
	if !raceEnabled && (rep.Outcomes[airlock.StateApproved] == 0 || rep.Outcomes[airlock.StateExpired] == 0 ||
		rep.Outcomes[airlock.StateCancelled] == 0 || rep.Outcomes[airlock.StateDenied] == 0) {
		t.Errorf("the rounds did not exercise every outcome: %v", rep.Outcomes)
	}
}

// raceRound runs one round of TestRacesOneProcess.
func raceRound(t *testing.T, ctx context.Context, b *bundle, rec *checker.Recorder, rng *rand.Rand, w, round int,
	approve, deny airlock.DecisionInput, unexpected *atomic.Int64) {
	client := w * 8
	window := time.Duration(5+rng.IntN(46)) * time.Millisecond
	r, err := rec.Do(client, checker.Create, "", func() (airlock.Request, error) {
		r, _, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, fmt.Sprintf("t03-%d", round), call(window.String()))
		return r, err
	})
	if err != nil {
		unexpected.Add(1)
		t.Errorf("round %d: create: %v", round, err)
		return
	}

	// Fire the three decisions from their own goroutines, each at a time
	// drawn either anywhere up to just after the deadline or within 2 ms
	// of it, where the races are.
	fireAt := func() time.Time {
		if rng.IntN(2) == 0 {
			return r.DeadlineAt.Add(time.Duration(rng.Int64N(int64(4*time.Millisecond))) - 2*time.Millisecond)
		}
		return r.CreatedAt.Add(time.Duration(rng.Int64N(int64(window + 10*time.Millisecond))))
	}
	actions := []struct {
		kind checker.Kind
		do   func() (airlock.Request, error)
	}{
		{checker.Approve, func() (airlock.Request, error) { return b.svc.Decide(ctx, b.reviewer, r.ID, approve) }},
		{checker.Deny, func() (airlock.Request, error) { return b.svc.Decide(ctx, b.reviewer, r.ID, deny) }},
		{checker.Cancel, func() (airlock.Request, error) { return b.svc.Cancel(ctx, b.agent, r.ID) }},
	}
	var approved atomic.Bool
	var wg sync.WaitGroup
	for i, a := range actions {
		at := fireAt()
		wg.Go(func() {
			time.Sleep(time.Until(at)) // jitter, not synchronisation
			got, err := rec.Do(client+1+i, a.kind, r.ID, a.do)
			switch {
			case err == nil && got.State == airlock.StateApproved:
				approved.Store(true)
			case err != nil && !isRaceRefusal(err):
				unexpected.Add(1)
				t.Errorf("round %d: %s: %v", round, a.kind, err)
			}
		})
	}
	wg.Wait()

	// Claims after: two claimers race for an approval's one execution.
	if !approved.Load() {
		return
	}
	for i := range 2 {
		wg.Go(func() {
			_, err := rec.Do(client+4+i, checker.Claim, r.ID, func() (airlock.Request, error) { return b.svc.Claim(ctx, b.agent, r.ID) })
			if err != nil && !isRaceRefusal(err) {
				unexpected.Add(1)
				t.Errorf("round %d: claim: %v", round, err)
			}
		})
	}
	wg.Wait()
}

// finalReads reads every request from the store, as Read ops.
func finalReads(t *testing.T, b *bundle) []checker.Op {
	t.Helper()
	var ops []checker.Op
	f := store.RequestFilter{Limit: 500}
	for {
		call := time.Now()
		rs, _, err := b.store.ListRequests(context.WithoutCancel(t.Context()), f)
		if err != nil {
			t.Fatal(err)
		}
		ret := time.Now()
		for _, r := range rs {
			op := checker.Op{Client: -2, Kind: checker.Read, RequestID: r.ID, Call: call, Return: ret}
			op.SetResult(r, nil)
			ops = append(ops, op)
		}
		if len(rs) < f.Limit {
			return ops
		}
		f.BeforeSeq = rs[len(rs)-1].Seq
	}
}

// isRaceRefusal reports whether err is a refusal a lost race produces,
// rather than a failure such as a busy database. A store's failures (busy
// included) never carry these codes: they are internal. (The message is
// not searched for "busy": random request IDs contain it now and then.)
func isRaceRefusal(err error) bool {
	switch airlock.ErrorCode(err) {
	case airlock.CodeNotPending, airlock.CodeDeadlinePassed, airlock.CodeNotApproved,
		airlock.CodeAlreadyExecuted, airlock.CodeApprovalExpired:
		return true
	}
	return false
}

// checkAuditOutcomes checks the store's own record: in the audit log, every
// request created has exactly one terminal event, and no approval event
// is at or after its request's deadline.
func checkAuditOutcomes(t *testing.T, b *bundle, events []airlock.Event, want int) {
	t.Helper()
	terminal := map[string]int{}
	created := 0
	for _, e := range events {
		switch e.Type {
		case airlock.EventRequestCreated:
			created++
			terminal[e.RequestID] += 0
		case airlock.EventRequestApproved, airlock.EventRequestDenied, airlock.EventRequestExpired, airlock.EventRequestCancelled:
			terminal[e.RequestID]++
			if e.Type == airlock.EventRequestApproved {
				r := b.stored(t, e.RequestID)
				if !e.At.Before(r.DeadlineAt) || !r.Decision.DecidedAt.Before(r.DeadlineAt) {
					t.Errorf("request %s approved at %s (event %s), deadline %s", r.ID, r.Decision.DecidedAt, e.At, r.DeadlineAt)
				}
			}
		}
	}
	if created != want {
		t.Errorf("audit log holds %d creations, want %d", created, want)
	}
	bad := 0
	for id, n := range terminal {
		if n != 1 {
			bad++
			if bad <= 10 {
				t.Errorf("request %s has %d terminal events in the audit log", id, n)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d requests with ≠ 1 terminal outcome in the audit log", bad)
	}
}

// heavySize returns how many items a heavy test (T03 outside CI, T04, T06,
// T13) runs: the full pass figure, or reduced with -short outside CI, or
// under the race detector. Under it the pure-Go SQLite is 10–20 times
// slower (its SQL parser and VM are instrumented and pointer-checked), so
// the full figures would take minutes each; what the detector looks for —
// data races in the service, hub and scheduler — shows at the reduced size
// as well. The full figures run whenever the detector is off.
func heavySize(t *testing.T, full, reduced int) int {
	t.Helper()
	switch {
	case testkit.Short():
		t.Logf("-short: %d instead of %d", reduced, full)
		return reduced
	case raceEnabled:
		t.Logf("race detector on: %d instead of %d (run without -race for the full figure)", reduced, full)
		return reduced
	}
	return full
}

// TestClaimRace is T06 in one process: 1,000 approved requests, each
// claimed by 8 concurrent claimers. Exactly one claim per request
// succeeds (the tool runs once), the other 7 get already_executed.
func TestClaimRace(t *testing.T) {
	t.Parallel()
	n, claimers := heavySize(t, 1000, 100), 8
	b := setup(t, options{}) // a stopped clock: no approval lapses mid-test
	ctx := context.WithoutCancel(t.Context())
	var rec checker.Recorder
	ids := make([]string, n)
	var wg sync.WaitGroup
	const makers = 4
	for m := range makers {
		wg.Go(func() {
			for i := m; i < n; i += makers {
				r, err := rec.Do(100+m, checker.Create, "", func() (airlock.Request, error) {
					r, _, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, fmt.Sprintf("t06-%d", i), call("1h"))
					return r, err
				})
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				if _, err := rec.Do(100+m, checker.Approve, r.ID, func() (airlock.Request, error) {
					return b.svc.Decide(ctx, b.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved})
				}); err != nil {
					t.Errorf("approve: %v", err)
					return
				}
				ids[i] = r.ID
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Every claimer walks the requests in the same order, so the 8
	// claims of one request arrive together.
	ran := make([]atomic.Int32, n) // the tool, run once per successful claim
	var succeeded, already, other atomic.Int64
	start := time.Now()
	for c := range claimers {
		wg.Go(func() {
			for i, id := range ids {
				_, err := rec.Do(c, checker.Claim, id, func() (airlock.Request, error) { return b.svc.Claim(ctx, b.agent, id) })
				switch airlock.ErrorCode(err) {
				case "":
					succeeded.Add(1)
					ran[i].Add(1)
				case airlock.CodeAlreadyExecuted:
					already.Add(1)
				default:
					other.Add(1)
					t.Errorf("claim %s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	t.Logf("T06: %d requests × %d claimers in %s: %d claims succeeded, %d already_executed, %d other",
		n, claimers, elapsed.Round(time.Millisecond), succeeded.Load(), already.Load(), other.Load())
	if succeeded.Load() != int64(n) || already.Load() != int64(n*(claimers-1)) || other.Load() != 0 {
		t.Errorf("want exactly %d claims and %d already_executed", n, n*(claimers-1))
	}
	for i := range ran {
		if got := ran[i].Load(); got != 1 {
			t.Errorf("request %s: the tool ran %d times", ids[i], got)
		}
	}
	rep := checker.Check(append(rec.Ops(), finalReads(t, b)...), checker.Options{Complete: true})
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	if rep.Claims != n {
		t.Errorf("the history holds %d successful claims, want %d", rep.Claims, n)
	}
}

// TestDeleteRace is T13 on SQLite: an instance holding 1,000 pending
// requests is deleted while reviewers approve them. Each request ends
// approved (before the delete) or cancelled (by it); the audit log shows
// no approval after the delete committed, and nothing is left pending.
func TestDeleteRace(t *testing.T) {
	t.Parallel()
	n := heavySize(t, 1000, 100)
	b := setup(t, options{})
	ctx := context.WithoutCancel(t.Context())
	var rec checker.Recorder
	ids := make([]string, n)
	for i := range ids {
		r, err := rec.Do(0, checker.Create, "", func() (airlock.Request, error) {
			r, _, err := b.svc.CreateRequest(ctx, b.agent, b.inst.ID, fmt.Sprintf("t13-%d", i), call("1h"))
			return r, err
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}

	// Four reviewers approve in their own random orders; the owner deletes
	// the instance once a quarter of the requests are approved.
	const reviewers = 4
	var approvedCount atomic.Int64
	quarter := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for rv := range reviewers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(rv), 13))
			for _, i := range rng.Perm(n) {
				id := ids[i]
				_, err := rec.Do(1+rv, checker.Approve, id, func() (airlock.Request, error) {
					return b.svc.Decide(ctx, b.reviewer, id, airlock.DecisionInput{Status: airlock.StateApproved})
				})
				switch airlock.ErrorCode(err) {
				case "":
					if approvedCount.Add(1) == int64(n/4) {
						once.Do(func() { close(quarter) })
					}
				case airlock.CodeNotPending:
				default:
					t.Errorf("approve %s: %v", id, err)
				}
			}
		})
	}
	var (
		cancelled             int
		deleteCall, deleteRet time.Time
	)
	wg.Go(func() {
		<-quarter
		deleteCall = time.Now()
		got, err := b.svc.DeleteInstance(ctx, b.agent, b.inst.ID)
		deleteRet = time.Now()
		if err != nil {
			t.Errorf("delete: %v", err)
		}
		cancelled = got
	})
	wg.Wait()

	// Order by audit event IDs: every approval before the delete's event.
	events := b.events(t)
	var deletedID int64
	for _, e := range events {
		if e.Type == airlock.EventInstanceDeleted {
			deletedID = e.ID
		}
	}
	if deletedID == 0 {
		t.Fatal("no instance.deleted event")
	}
	var approved, cancelledEvents, late int
	for _, e := range events {
		switch e.Type {
		case airlock.EventRequestApproved:
			approved++
			if e.ID > deletedID {
				late++
				t.Errorf("request %s approved by event %d, after the delete's event %d", e.RequestID, e.ID, deletedID)
			}
		case airlock.EventRequestCancelled:
			cancelledEvents++
			if e.ID > deletedID {
				t.Errorf("request %s cancelled after the delete's event", e.RequestID)
			}
			// The delete's cancellations are ops of the history, over the
			// delete's interval.
			rec.Add(checker.Op{Client: 9, Kind: checker.Cancel, RequestID: e.RequestID, Call: deleteCall, Return: deleteRet,
				State: airlock.StateCancelled})
		}
	}
	states := map[airlock.State]int{}
	for _, r := range finalReadsState(t, b, ids) {
		states[r]++
	}
	t.Logf("T13: %d requests: %d approved before the delete, %d cancelled by it (delete said %d); %d approvals after; states %v",
		n, approved, cancelledEvents, cancelled, late, states)
	if approved+cancelledEvents != n || cancelled != cancelledEvents || states[airlock.StatePending] != 0 ||
		states[airlock.StateApproved] != approved || states[airlock.StateCancelled] != cancelledEvents {
		t.Errorf("want every request approved or cancelled, none pending")
	}
	if approved < n/4 || cancelledEvents == 0 {
		t.Errorf("the delete did not race the approvals (approved %d, cancelled %d)", approved, cancelledEvents)
	}
	rep := checker.Check(append(rec.Ops(), finalReads(t, b)...), checker.Options{Complete: true})
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
}

// finalReadsState returns the stored state of each request.
func finalReadsState(t *testing.T, b *bundle, ids []string) []airlock.State {
	t.Helper()
	out := make([]airlock.State, len(ids))
	for i, id := range ids {
		out[i] = b.stored(t, id).State
	}
	return out
}
