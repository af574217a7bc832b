package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestModel is T04: random sequences of calls (create and replay, decide,
// cancel, advance the clock, claim, report, read, delete an instance,
// expire what is due) run against the service on SQLite and against a
// small reference model of the lifecycle (docs/protocol.md L1–L11); every
// answer and every stored request must agree with the model. Each run is
// seeded: a failure prints the seed, and AIRLOCK_MODEL_SEED=<seed> replays
// just that run.
func TestModel(t *testing.T) {
	t.Parallel()
	runs, maxSteps, workers := heavySize(t, 1000, 50), 100, 2
	base := uint64(time.Now().UnixNano())
	if s := os.Getenv("AIRLOCK_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("AIRLOCK_MODEL_SEED: %v", err)
		}
		base, runs, workers = seed, 1, 1
	}
	t.Logf("seeds %d..%d", base, base+uint64(runs)-1)

	limits := airlock.DefaultLimits()
	limits.MaxTimeout = 2 * time.Hour // so the clock crosses deadlines often
	var steps, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			// One store per worker; its runs go one after another, each
			// with fresh instances and keys.
			b := setup(t, options{limits: limits})
			for run := w; run < runs; run += workers {
				if failed.Load() > 0 {
					return
				}
				seed := base + uint64(run)
				m := newModelRun(t, b, seed, limits)
				n, err := m.run(1 + m.rng.IntN(maxSteps))
				steps.Add(int64(n))
				if err != nil {
					failed.Add(1)
					t.Errorf("divergence in run with seed %d (replay: AIRLOCK_MODEL_SEED=%d go test -run TestModel ./provider/):\n%v\nlast steps:\n  %s",
						seed, seed, err, strings.Join(m.tail(15), "\n  "))
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("T04: %d runs, %d steps in %s, %d divergences", runs, steps.Load(), time.Since(start).Round(time.Millisecond), failed.Load())
}

// mInstance is the model of an instance.
type mInstance struct {
	id      string
	deleted bool
}

// mRequest is the model of a request: what the store must hold.
type mRequest struct {
	id       string
	key      string
	sig      string // instance, body and timeout: what makes a replay a replay
	variant  int
	timeout  modelTimeout
	inst     *mInstance
	state    airlock.State
	created  time.Time
	deadline time.Time

	decidedAt time.Time
	decidedBy string
	note      string
	expiresAt time.Time // zero unless approved

	claimedAt  time.Time
	execStatus airlock.ExecutionStatus // "" until claimed
	finishedAt time.Time
}

// modelRun is one seeded run against one store.
type modelRun struct {
	t      *testing.T
	b      *bundle
	ctx    context.Context
	rng    *rand.Rand
	seed   uint64
	limits airlock.Limits
	now    time.Time

	insts []*mInstance
	reqs  []*mRequest
	keys  map[string]*mRequest
	nkey  int
	log   []string
}

func newModelRun(t *testing.T, b *bundle, seed uint64, limits airlock.Limits) *modelRun {
	return &modelRun{
		t: t, b: b, ctx: context.WithoutCancel(t.Context()), rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		seed: seed, limits: limits, keys: map[string]*mRequest{},
	}
}

func (m *modelRun) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
}

// tail returns the last n steps of the log.
func (m *modelRun) tail(n int) []string {
	return m.log[max(0, len(m.log)-n):]
}

// run starts the run on a clean slate and takes steps random steps.
func (m *modelRun) run(steps int) (int, error) {
	// Whatever earlier runs left pending expires now, so that counts of
	// expired requests concern this run only.
	m.now = m.b.clock.Advance(24 * time.Hour)
	if _, err := m.b.svc.ExpireDue(m.ctx); err != nil {
		return 0, err
	}
	for range 2 {
		if err := m.register(); err != nil {
			return 0, err
		}
	}
	type step struct {
		weight int
		do     func() error
	}
	table := []step{
		{20, m.create}, {18, m.decide}, {10, m.cancel}, {16, m.advance}, {10, m.claim},
		{6, m.report}, {8, m.read}, {2, m.deleteInstance}, {5, m.expireDue}, {1, m.register}, {3, m.readInstance},
	}
	total := 0
	for _, s := range table {
		total += s.weight
	}
	for i := range steps {
		pick := m.rng.IntN(total)
		for _, s := range table {
			if pick < s.weight {
				if err := s.do(); err != nil {
					return i + 1, fmt.Errorf("step %d: %w", i+1, err)
				}
				break
			}
			pick -= s.weight
		}
	}
	// At the end, every request the run made is stored as the model says.
	for _, r := range m.reqs {
		if err := m.checkStored(r); err != nil {
			return steps, fmt.Errorf("at the end: %w", err)
		}
	}
	return steps, nil
}

// pickCaller returns one of the bundle's callers, by weights for agent,
// other agent, reviewer, self-reviewer and admin.
func (m *modelRun) pickCaller(agent, other, reviewer, self, admin int) (airlock.Caller, string) {
	n := m.rng.IntN(agent + other + reviewer + self + admin)
	switch {
	case n < agent:
		return m.b.agent, "agent"
	case n < agent+other:
		return m.b.otherAgent, "other-agent"
	case n < agent+other+reviewer:
		return m.b.reviewer, "reviewer"
	case n < agent+other+reviewer+self:
		return m.b.selfReviewer, "self-reviewer"
	}
	return m.b.admin, "admin"
}

// pickRequest returns a request of the run, or nil for an unknown ID.
func (m *modelRun) pickRequest() *mRequest {
	if len(m.reqs) == 0 || m.rng.IntN(25) == 0 {
		return nil
	}
	return m.reqs[m.rng.IntN(len(m.reqs))]
}

func idOf(r *mRequest) string {
	if r == nil {
		return "apr_unknown"
	}
	return r.id
}

// expect compares a call's outcome with the model's: code "" means the
// call must succeed; for lifecycle refusals state is the state the error
// must name.
func expect(err error, code airlock.Code, state airlock.State) error {
	got := airlock.ErrorCode(err)
	if got != code {
		return fmt.Errorf("got error %v (code %q), model says %q", err, got, code)
	}
	if state != "" {
		if e, ok := errors.AsType[*airlock.Error](err); !ok || e.State != state {
			return fmt.Errorf("error %v does not name state %q, as the model says", err, state)
		}
	}
	return nil
}

// expireDue expires, in the model, every pending request due at now, as
// the store does; it returns how many.
func (m *modelRun) expireAllDue() int {
	n := 0
	for _, r := range m.reqs {
		if r.state == airlock.StatePending && !m.now.Before(r.deadline) {
			m.expire(r)
			n++
		}
	}
	return n
}

func (m *modelRun) expire(r *mRequest) {
	r.state, r.decidedAt, r.decidedBy = airlock.StateExpired, r.deadline, airlock.ActorExpiry
}

// checkReq compares a request the service returned (or the store holds)
// with the model.
func (m *modelRun) checkReq(want *mRequest, got airlock.Request) error {
	bad := func(field string, g, w any) error {
		return fmt.Errorf("request %s: %s is %v, model says %v", want.id, field, g, w)
	}
	switch {
	case got.ID != want.id:
		return bad("id", got.ID, want.id)
	case got.State != want.state:
		return bad("state", got.State, want.state)
	case !got.CreatedAt.Equal(want.created):
		return bad("created_at", got.CreatedAt, want.created)
	case !got.DeadlineAt.Equal(want.deadline):
		return bad("deadline_at", got.DeadlineAt, want.deadline)
	case got.InstanceID != want.inst.id:
		return bad("instance_id", got.InstanceID, want.inst.id)
	}
	if want.state == airlock.StatePending {
		if got.Decision != nil {
			return bad("decision", got.Decision, nil)
		}
	} else {
		d := got.Decision
		switch {
		case d == nil:
			return bad("decision", nil, want.state)
		case d.Status != want.state:
			return bad("decision.status", d.Status, want.state)
		case !d.DecidedAt.Equal(want.decidedAt):
			return bad("decided_at", d.DecidedAt, want.decidedAt)
		case d.DecidedBy != want.decidedBy:
			return bad("decided_by", d.DecidedBy, want.decidedBy)
		case d.Note != want.note:
			return bad("note", d.Note, want.note)
		case want.expiresAt.IsZero() != (d.ExpiresAt == nil):
			return bad("expires_at", d.ExpiresAt, want.expiresAt)
		case d.ExpiresAt != nil && !d.ExpiresAt.Equal(want.expiresAt):
			return bad("expires_at", *d.ExpiresAt, want.expiresAt)
		}
	}
	e := got.Execution
	switch {
	case want.execStatus == "" && e != nil:
		return bad("execution", e, nil)
	case want.execStatus == "":
	case e == nil:
		return bad("execution", nil, want.execStatus)
	case e.Status != want.execStatus:
		return bad("execution.status", e.Status, want.execStatus)
	case !e.ClaimedAt.Equal(want.claimedAt):
		return bad("claimed_at", e.ClaimedAt, want.claimedAt)
	case want.finishedAt.IsZero() != (e.FinishedAt == nil):
		return bad("finished_at", e.FinishedAt, want.finishedAt)
	case e.FinishedAt != nil && !e.FinishedAt.Equal(want.finishedAt):
		return bad("finished_at", *e.FinishedAt, want.finishedAt)
	}
	return nil
}

// checkStored compares what the store holds for r with the model.
func (m *modelRun) checkStored(r *mRequest) error {
	if r == nil {
		return nil
	}
	got, err := m.b.store.GetRequest(m.ctx, r.id)
	if err != nil {
		return fmt.Errorf("read %s: %w", r.id, err)
	}
	if err := m.checkReq(r, got); err != nil {
		return fmt.Errorf("stored: %w", err)
	}
	return nil
}

// register adds an instance of the agent.
func (m *modelRun) register() error {
	if len(m.insts) >= 4 {
		return nil
	}
	in, err := m.b.svc.RegisterInstance(m.ctx, m.b.agent, airlock.InstanceInput{Name: fmt.Sprintf("run-%d", m.seed)})
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	m.insts = append(m.insts, &mInstance{id: in.ID})
	m.logf("register → %s", in.ID)
	return nil
}

// modelTimeout is a timeout a create asks for and the window it gets.
type modelTimeout struct {
	timeout string
	window  time.Duration
}

// Timeouts a create may ask for, and the windows the limits make of them
// (0: refused).
var modelTimeouts = []modelTimeout{
	{"", 15 * time.Minute}, {"1s", time.Second}, {"45s", 45 * time.Second}, {"5m", 5 * time.Minute},
	{"PT10M", 10 * time.Minute}, {"90m", 90 * time.Minute}, {"3h", 2 * time.Hour}, {"500ms", 0},
}

func (m *modelRun) create() error {
	c, who := m.pickCaller(90, 5, 3, 0, 2)
	inst := m.insts[m.rng.IntN(len(m.insts))]
	to := modelTimeouts[m.rng.IntN(len(modelTimeouts))]
	variant := m.rng.IntN(3)
	var key string
	if len(m.reqs) > 0 && m.rng.IntN(10) < 3 {
		prev := m.reqs[m.rng.IntN(len(m.reqs))]
		key = prev.key
		if m.rng.IntN(3) > 0 { // mostly an exact replay
			inst, variant, to = prev.inst, prev.variant, prev.timeout
		}
	} else {
		m.nkey++
		key = fmt.Sprintf("m%d-%d", m.seed, m.nkey)
	}
	sig := fmt.Sprintf("%s %d =%s", inst.id, variant, to.timeout)
	in := airlock.CreateRequestInput{
		Tool:      "transfer",
		Arguments: json.RawMessage(fmt.Sprintf(`{"amount":%d}`, 100*(variant+1))),
		Timeout:   to.timeout,
	}
	r, created, err := m.b.svc.CreateRequest(m.ctx, c, inst.id, key, in)
	m.logf("%s create on %s (deleted %v) key %s timeout %q variant %d → created=%v %s %v", who, inst.id, inst.deleted, key, to.timeout, variant, created, r.ID, err)

	prev := m.keys[key]
	switch {
	case who == "reviewer" || who == "admin":
		return expect(err, airlock.CodeForbidden, "")
	case to.window == 0:
		return expect(err, airlock.CodeInvalidRequest, "")
	case who == "other-agent":
		return expect(err, airlock.CodeNotFound, "")
	case prev != nil && prev.sig != sig:
		return expect(err, airlock.CodeIdempotencyConflict, "")
	case prev != nil:
		if err != nil || created {
			return fmt.Errorf("replay of %s: created=%v err=%v", prev.id, created, err)
		}
		// A replay answers like a read: a due request is expired first.
		if prev.state == airlock.StatePending && !m.now.Before(prev.deadline) {
			m.expire(prev)
		}
		return m.checkReq(prev, r)
	case inst.deleted:
		return expect(err, airlock.CodeNotFound, "")
	}
	if err != nil || !created {
		return fmt.Errorf("create: created=%v err=%v, model says a new request", created, err)
	}
	nr := &mRequest{
		id: r.ID, key: key, sig: sig, variant: variant, timeout: to, inst: inst, state: airlock.StatePending,
		created: m.now, deadline: m.now.Add(to.window),
	}
	m.reqs = append(m.reqs, nr)
	m.keys[key] = nr
	if err := m.checkReq(nr, r); err != nil {
		return err
	}
	return m.checkStored(nr)
}

func (m *modelRun) decide() error {
	c, who := m.pickCaller(2, 2, 80, 7, 5)
	r := m.pickRequest()
	in := airlock.DecisionInput{Status: airlock.StateApproved, Note: fmt.Sprintf("n%d", m.rng.IntN(100))}
	validity := m.limits.ApprovalValidity
	validForBad := false
	if m.rng.IntN(2) == 0 {
		in.Status = airlock.StateDenied
		if m.rng.IntN(20) == 0 {
			in.ValidFor = "10m"
		}
	} else {
		switch m.rng.IntN(20) {
		case 0, 1, 2, 3, 4:
			in.ValidFor, validity = "10m", 10*time.Minute
		case 5, 6:
			in.ValidFor, validity = "90s", 90*time.Second
		case 7:
			in.ValidFor, validForBad = "2h", true
		}
	}
	got, err := m.b.svc.Decide(m.ctx, c, idOf(r), in)
	m.logf("%s %s %s valid_for %q at %s → %s %v", who, in.Status, idOf(r), in.ValidFor, m.now.Format(time.RFC3339Nano), got.State, err)

	switch {
	case who != "reviewer" && who != "self-reviewer":
		return expect(err, airlock.CodeForbidden, "")
	case in.Status == airlock.StateDenied && in.ValidFor != "":
		return expect(err, airlock.CodeInvalidRequest, "")
	case r == nil:
		return expect(err, airlock.CodeNotFound, "")
	case who == "self-reviewer" && validForBad:
		return expect(err, airlock.CodeForbidden, "")
	case who == "self-reviewer":
		// The store judged the decision (DecideParams.Check): a request
		// past its deadline was expired on the way, as any decision
		// reaching it would; one before it is left pending.
		if r.state == airlock.StatePending && !m.now.Before(r.deadline) {
			m.expire(r)
		}
		return expect(err, airlock.CodeForbidden, "")
	case validForBad:
		return expect(err, airlock.CodeInvalidRequest, "")
	}
	if e := m.settle(r, err); e != nil || err != nil {
		return e
	}
	r.state, r.decidedAt, r.decidedBy, r.note = in.Status, m.now, c.ID, in.Note
	if in.Status == airlock.StateApproved {
		r.expiresAt = m.now.Add(validity)
	}
	if err := m.checkReq(r, got); err != nil {
		return err
	}
	return m.checkStored(r)
}

// settle is the model of a pending-only change (decide, cancel) reaching
// the store: it returns nil when the change must succeed (err must be nil),
// and otherwise checks the refusal, expiring the request first when its
// deadline has come.
func (m *modelRun) settle(r *mRequest, err error) error {
	switch {
	case r.state == airlock.StatePending && m.now.Before(r.deadline):
		if err != nil {
			return fmt.Errorf("%s is pending before its deadline, yet: %v", r.id, err)
		}
		return nil
	case r.state == airlock.StatePending:
		m.expire(r)
		fallthrough
	case r.state == airlock.StateExpired:
		if e := expect(err, airlock.CodeDeadlinePassed, airlock.StateExpired); e != nil {
			return e
		}
	default:
		if e := expect(err, airlock.CodeNotPending, r.state); e != nil {
			return e
		}
	}
	if e := m.checkStored(r); e != nil {
		return e
	}
	if err == nil {
		return fmt.Errorf("%s: the call succeeded, model says refused", r.id)
	}
	return nil
}

func (m *modelRun) cancel() error {
	c, who := m.pickCaller(85, 5, 5, 0, 5)
	r := m.pickRequest()
	got, err := m.b.svc.Cancel(m.ctx, c, idOf(r))
	m.logf("%s cancel %s at %s → %s %v", who, idOf(r), m.now.Format(time.RFC3339Nano), got.State, err)
	switch {
	case who != "agent" && who != "other-agent":
		return expect(err, airlock.CodeForbidden, "")
	case r == nil:
		return expect(err, airlock.CodeNotFound, "")
	case who == "other-agent":
		return m.notOwner(r, err)
	}
	if e := m.settle(r, err); e != nil || err != nil {
		return e
	}
	r.state, r.decidedAt, r.decidedBy = airlock.StateCancelled, m.now, c.ID
	if err := m.checkReq(r, got); err != nil {
		return err
	}
	return m.checkStored(r)
}

// notOwner checks another agent's cancel or claim of r: not_found, as if r
// did not exist. The store judges ownership in the change's own write, and
// a write that changed nothing settles the request like any refused one: a
// pending request past its deadline is expired.
func (m *modelRun) notOwner(r *mRequest, err error) error {
	if r.state == airlock.StatePending && !m.now.Before(r.deadline) {
		m.expire(r)
	}
	if e := expect(err, airlock.CodeNotFound, ""); e != nil {
		return e
	}
	return m.checkStored(r)
}

func (m *modelRun) claim() error {
	c, who := m.pickCaller(90, 4, 3, 0, 3)
	r := m.pickRequest()
	got, err := m.b.svc.Claim(m.ctx, c, idOf(r))
	m.logf("%s claim %s at %s → %v", who, idOf(r), m.now.Format(time.RFC3339Nano), err)
	switch {
	case who != "agent" && who != "other-agent":
		return expect(err, airlock.CodeForbidden, "")
	case r == nil:
		return expect(err, airlock.CodeNotFound, "")
	case who == "other-agent":
		return m.notOwner(r, err)
	case r.state != airlock.StateApproved:
		// A refused claim settles the request first, like a refused
		// decision: a pending request past its deadline is expired.
		if r.state == airlock.StatePending && !m.now.Before(r.deadline) {
			m.expire(r)
		}
		if e := expect(err, airlock.CodeNotApproved, r.state); e != nil {
			return e
		}
		return m.checkStored(r)
	case r.execStatus != "":
		return expect(err, airlock.CodeAlreadyExecuted, airlock.StateApproved)
	case !m.now.Before(r.expiresAt):
		return expect(err, airlock.CodeApprovalExpired, airlock.StateApproved)
	}
	if err != nil {
		return fmt.Errorf("claim of an approval before expires_at: %v", err)
	}
	r.execStatus, r.claimedAt = airlock.ExecClaimed, m.now
	if err := m.checkReq(r, got); err != nil {
		return err
	}
	return m.checkStored(r)
}

func (m *modelRun) report() error {
	c, who := m.pickCaller(92, 4, 2, 0, 2)
	r := m.pickRequest()
	statuses := []airlock.ExecutionStatus{airlock.ExecSucceeded, airlock.ExecFailed, airlock.ExecUnknown, "done"}
	in := airlock.ReportInput{Status: statuses[m.rng.IntN(len(statuses))], Detail: "d"}
	got, err := m.b.svc.Report(m.ctx, c, idOf(r), in)
	m.logf("%s report %s %s → %v", who, idOf(r), in.Status, err)
	switch {
	case !in.Status.Valid():
		return expect(err, airlock.CodeInvalidRequest, "")
	case who != "agent" && who != "other-agent":
		return expect(err, airlock.CodeForbidden, "")
	case r == nil || who == "other-agent":
		return expect(err, airlock.CodeNotFound, "")
	case r.execStatus == airlock.ExecClaimed:
		if err != nil {
			return fmt.Errorf("report of a claimed execution: %v", err)
		}
		r.execStatus, r.finishedAt = in.Status, m.now
	case r.state != airlock.StateApproved:
		return expect(err, airlock.CodeNotApproved, r.state)
	case r.execStatus == "":
		return expect(err, airlock.CodeInvalidRequest, "")
	case r.execStatus == in.Status:
		if err != nil {
			return fmt.Errorf("repeated report: %v", err)
		}
	default:
		return expect(err, airlock.CodeAlreadyExecuted, "")
	}
	if err := m.checkReq(r, got); err != nil {
		return err
	}
	return m.checkStored(r)
}

func (m *modelRun) read() error {
	c, who := m.pickCaller(65, 5, 20, 5, 5)
	r := m.pickRequest()
	got, err := m.b.svc.Request(m.ctx, c, idOf(r), 0)
	m.logf("%s read %s at %s → %s %v", who, idOf(r), m.now.Format(time.RFC3339Nano), got.State, err)
	switch {
	case r == nil || who == "other-agent":
		return expect(err, airlock.CodeNotFound, "")
	case err != nil:
		return fmt.Errorf("read: %v", err)
	}
	// A read of a request whose deadline has come expires that request, as
	// the scheduler would, so reads agree with it; other due requests wait
	// for the scheduler.
	if r.state == airlock.StatePending && !m.now.Before(r.deadline) {
		m.expire(r)
	}
	return m.checkReq(r, got)
}

func (m *modelRun) readInstance() error {
	inst := m.insts[m.rng.IntN(len(m.insts))]
	got, err := m.b.svc.Instance(m.ctx, m.b.agent, inst.id)
	m.logf("agent reads instance %s → %d pending %v", inst.id, got.PendingCount, err)
	if inst.deleted {
		return expect(err, airlock.CodeNotFound, "")
	}
	want := 0
	for _, r := range m.reqs {
		if r.inst == inst && r.state == airlock.StatePending {
			want++
		}
	}
	if err != nil || got.PendingCount != want {
		return fmt.Errorf("instance %s: %d pending (%v), model says %d", inst.id, got.PendingCount, err, want)
	}
	return nil
}

func (m *modelRun) deleteInstance() error {
	c, who := m.pickCaller(70, 10, 10, 0, 10)
	inst := m.insts[m.rng.IntN(len(m.insts))]
	n, err := m.b.svc.DeleteInstance(m.ctx, c, inst.id)
	m.logf("%s deletes instance %s (deleted %v) at %s → %d %v", who, inst.id, inst.deleted, m.now.Format(time.RFC3339Nano), n, err)
	switch {
	case who == "reviewer":
		return expect(err, airlock.CodeForbidden, "")
	case inst.deleted || who == "other-agent":
		return expect(err, airlock.CodeNotFound, "")
	case err != nil:
		return fmt.Errorf("delete: %v", err)
	}
	inst.deleted = true
	cancelled := 0
	for _, r := range m.reqs {
		if r.inst != inst || r.state != airlock.StatePending {
			continue
		}
		if !m.now.Before(r.deadline) {
			m.expire(r) // the deadline won
		} else {
			r.state, r.decidedAt, r.decidedBy = airlock.StateCancelled, m.now, c.ID
			cancelled++
		}
		if err := m.checkStored(r); err != nil {
			return err
		}
	}
	if n != cancelled {
		return fmt.Errorf("delete cancelled %d, model says %d", n, cancelled)
	}
	return nil
}

func (m *modelRun) expireDue() error {
	n, err := m.b.svc.ExpireDue(m.ctx)
	m.logf("expire due at %s → %d %v", m.now.Format(time.RFC3339Nano), n, err)
	if err != nil {
		return err
	}
	if want := m.expireAllDue(); n != want {
		return fmt.Errorf("ExpireDue expired %d, model says %d", n, want)
	}
	return nil
}

// advance moves the clock: by a step of some size, or to one microsecond
// either side of (or exactly at) a pending deadline or an approval's
// expires_at, where the boundaries are.
func (m *modelRun) advance() error {
	to := m.now
	switch m.rng.IntN(3) {
	case 0:
		steps := []time.Duration{time.Microsecond, time.Millisecond, time.Second, 30 * time.Second,
			4 * time.Minute, 10 * time.Minute, time.Hour, 3 * time.Hour}
		to = m.now.Add(steps[m.rng.IntN(len(steps))])
	default:
		var targets []time.Time
		for _, r := range m.reqs {
			if r.state == airlock.StatePending {
				targets = append(targets, r.deadline)
			}
			if !r.expiresAt.IsZero() && r.execStatus == "" {
				targets = append(targets, r.expiresAt)
			}
		}
		if len(targets) > 0 {
			to = targets[m.rng.IntN(len(targets))].Add(time.Duration(m.rng.IntN(3)-1) * time.Microsecond)
		}
	}
	if !to.After(m.now) {
		to = m.now.Add(time.Microsecond)
	}
	m.b.clock.Set(to)
	m.now = to
	m.logf("clock → %s", to.Format(time.RFC3339Nano))
	return nil
}
