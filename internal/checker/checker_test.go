package checker

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// t0 anchors the seeded histories; ms(n) is n milliseconds after it.
var t0 = time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)

func ms(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }

// hist builds one request's history with a deadline 50 ms after t0.
type hist struct {
	id  string
	ops []Op
}

func newHist(id string) *hist {
	h := &hist{id: id}
	h.ops = append(h.ops, Op{Client: 0, Kind: Create, RequestID: id, Call: ms(0), Return: ms(1),
		State: airlock.StatePending, DeadlineAt: ms(50)})
	return h
}

// ok records a successful op over [from, to] ms; transitions are decided
// at their midpoint.
func (h *hist) ok(client int, k Kind, from, to float64) *hist {
	o := Op{Client: client, Kind: k, RequestID: h.id, Call: ms(from), Return: ms(to), DeadlineAt: ms(50)}
	switch k {
	case Claim:
		o.State, o.Claimed = airlock.StateApproved, true
	case Expire:
		o.State = airlock.StateExpired
	default:
		o.State = k.target()
		o.DecidedAt = ms((from + to) / 2)
	}
	h.ops = append(h.ops, o)
	return h
}

// fail records a refused op over [from, to] ms naming state.
func (h *hist) fail(client int, k Kind, from, to float64, code airlock.Code, state airlock.State) *hist {
	h.ops = append(h.ops, Op{Client: client, Kind: k, RequestID: h.id, Call: ms(from), Return: ms(to), Code: code, State: state})
	return h
}

// expire records the store's expiry as ExpiryOps would: from its audit
// time to the end of the history.
func (h *hist) expire(at float64) *hist {
	h.ops = append(h.ops, Op{Client: -1, Kind: Expire, RequestID: h.id, Call: ms(at), Return: ms(1000), State: airlock.StateExpired})
	return h
}

func (h *hist) read(client int, from, to float64, state airlock.State, claimed bool) *hist {
	h.ops = append(h.ops, Op{Client: client, Kind: Read, RequestID: h.id, Call: ms(from), Return: ms(to), State: state, Claimed: claimed})
	return h
}

func TestCheckerAcceptsGoodHistories(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    *hist
	}{
		{"approve wins, deny and cancel are told approved, one claim runs", newHist("apr_a").
			ok(1, Approve, 2, 3).
			fail(2, Deny, 2, 4, airlock.CodeNotPending, airlock.StateApproved).
			fail(3, Cancel, 3, 5, airlock.CodeNotPending, airlock.StateApproved).
			ok(1, Claim, 6, 7).
			fail(2, Claim, 6, 8, airlock.CodeAlreadyExecuted, airlock.StateApproved).
			read(0, 9, 10, airlock.StateApproved, true)},
		{"the deadline wins: late decisions are told expired", newHist("apr_b").
			expire(50.1).
			fail(1, Approve, 60, 61, airlock.CodeDeadlinePassed, airlock.StateExpired).
			fail(2, Cancel, 49, 62, airlock.CodeDeadlinePassed, airlock.StateExpired).
			fail(3, Claim, 63, 64, airlock.CodeNotApproved, airlock.StateExpired).
			read(0, 70, 71, airlock.StateExpired, false)},
		{"overlapping cancel may see the approval that returned later", newHist("apr_c").
			fail(1, Cancel, 1.5, 5, airlock.CodeNotPending, airlock.StateApproved).
			ok(2, Approve, 2, 10)},
		{"a claim before the decision is told pending", newHist("apr_d").
			fail(1, Claim, 2, 3, airlock.CodeNotApproved, airlock.StatePending).
			ok(2, Deny, 4, 5).
			fail(1, Claim, 6, 7, airlock.CodeNotApproved, airlock.StateDenied)},
	} {
		rep := Check(tc.h.ops, Options{Complete: true})
		if err := rep.Err(); err != nil {
			t.Errorf("%s: a correct history was refused: %v", tc.name, err)
		}
	}
}

// TestCheckerCatchesSeededBadHistories is T23: the checker can fail. Each
// row seeds one broken history and names the rules that must catch it.
func TestCheckerCatchesSeededBadHistories(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		t23  bool // one of the three histories T23 names (docs/reliability.md)
		h    *hist
		opts Options
		want []Rule
	}{
		{name: "double terminal: approved, then expired by the scheduler", t23: true,
			h:    newHist("apr_1").ok(1, Approve, 2, 3).expire(50.5),
			want: []Rule{RuleOneOutcome, RuleLinearizable}},
		{name: "approve after expiry: an approval recorded after the deadline", t23: true,
			h:    newHist("apr_2").ok(1, Approve, 60, 61),
			want: []Rule{RuleNoLateApproval}},
		{name: "double claim: two claimers both told they may run", t23: true,
			h:    newHist("apr_3").ok(1, Approve, 2, 3).ok(1, Claim, 6, 7).ok(2, Claim, 6, 8),
			want: []Rule{RuleOneClaim, RuleLinearizable}},
		{name: "approve after expiry, both recorded",
			h:    newHist("apr_4").expire(50).ok(1, Approve, 55, 56),
			want: []Rule{RuleOneOutcome, RuleNoLateApproval, RuleLinearizable}},
		{name: "a loser names a state that did not win",
			h:    newHist("apr_5").ok(1, Approve, 2, 3).fail(2, Cancel, 4, 5, airlock.CodeNotPending, airlock.StateDenied),
			want: []Rule{RuleLoserNamesWinner, RuleLinearizable}},
		{name: "a cancel sees an approval that had not started when it returned",
			h:    newHist("apr_6").fail(2, Cancel, 2, 3, airlock.CodeNotPending, airlock.StateApproved).ok(1, Approve, 5, 6),
			want: []Rule{RuleLinearizable}},
		{name: "a busy database surfaced to a caller",
			h:    newHist("apr_7").fail(1, Approve, 2, 3, airlock.CodeInternal, "").ok(2, Deny, 4, 5),
			want: []Rule{RuleExpectedErrors}},
		{name: "a settled history with no outcome", opts: Options{Complete: true},
			h:    newHist("apr_8").read(1, 70, 71, airlock.StatePending, false),
			want: []Rule{RuleOneOutcome}},
		{name: "a denied request's execution claimed",
			h:    newHist("apr_9").ok(1, Deny, 2, 3).ok(1, Claim, 4, 5),
			want: []Rule{RuleOneClaim, RuleLinearizable}},
		{name: "already_executed with no claim",
			h:    newHist("apr_10").ok(1, Approve, 2, 3).fail(1, Claim, 4, 5, airlock.CodeAlreadyExecuted, airlock.StateApproved),
			want: []Rule{RuleLoserNamesWinner, RuleLinearizable}},
		{name: "a read sees pending after the expiry returned",
			h:    newHist("apr_11").fail(1, Approve, 51, 52, airlock.CodeDeadlinePassed, airlock.StateExpired).read(2, 53, 54, airlock.StatePending, false).expire(50),
			want: []Rule{RuleLinearizable}},
	} {
		rep := Check(tc.h.ops, tc.opts)
		for _, rule := range tc.want {
			if !rep.Broke(rule) {
				t.Errorf("%s: rule %q did not catch it; report: %v", tc.name, rule, rep.Err())
			}
		}
		for _, v := range rep.Violations {
			if !slices.Contains(tc.want, v.Rule) {
				t.Errorf("%s: unexpected rule %q fired: %s", tc.name, v.Rule, v)
			}
		}
	}
}

// TestT23ThreeOfThree counts the three seeded bad histories of T23 in one
// mixed history with good requests around them: all three are caught, and
// only they are.
func TestT23ThreeOfThree(t *testing.T) {
	t.Parallel()
	var ops []Op
	for i := range 20 {
		ops = append(ops, newHist(fmt.Sprintf("apr_good%d", i)).ok(1, Deny, 2, 3).
			fail(2, Approve, 2, 4, airlock.CodeNotPending, airlock.StateDenied).ops...)
	}
	bad := map[string]*hist{
		"apr_double_terminal": newHist("apr_double_terminal").ok(1, Cancel, 2, 3).expire(50),
		"apr_late_approval":   newHist("apr_late_approval").expire(50).ok(1, Approve, 50, 52),
		"apr_double_claim":    newHist("apr_double_claim").ok(1, Approve, 2, 3).ok(1, Claim, 4, 5).ok(2, Claim, 4, 6),
	}
	for _, h := range bad {
		ops = append(ops, h.ops...)
	}
	rep := Check(ops, Options{Complete: true})
	caught := map[string]bool{}
	for _, v := range rep.Violations {
		if _, ok := bad[v.RequestID]; !ok {
			t.Errorf("a good request was flagged: %s", v)
		}
		caught[v.RequestID] = true
	}
	t.Logf("T23: %d/%d seeded bad histories caught (%d violations)", len(caught), len(bad), len(rep.Violations))
	if len(caught) != len(bad) {
		t.Fatalf("caught %d/%d: %v", len(caught), len(bad), rep.Err())
	}
	if rep.Requests != 23 || rep.Outcomes[airlock.StateDenied] != 20 {
		t.Errorf("report counts: %d requests, outcomes %v; want 23 requests, 20 denied", rep.Requests, rep.Outcomes)
	}
}

func TestRecorderAndExpiryOps(t *testing.T) {
	t.Parallel()
	var rec Recorder
	deadline := time.Now().Add(time.Hour)
	r, _ := rec.Do(1, Create, "", func() (airlock.Request, error) {
		return airlock.Request{ID: "apr_x", State: airlock.StatePending, DeadlineAt: deadline}, nil
	})
	if r.ID != "apr_x" {
		t.Fatalf("Do returned %q", r.ID)
	}
	lost := airlock.Conflict(airlock.CodeDeadlinePassed, airlock.StateExpired, "too late")
	_, err := rec.Do(2, Approve, "apr_x", func() (airlock.Request, error) {
		return airlock.Request{}, fmt.Errorf("decide: %w", lost)
	})
	if !errors.Is(err, lost) {
		t.Fatalf("Do changed the error: %v", err)
	}
	ops := rec.Ops()
	if len(ops) != 2 || ops[0].RequestID != "apr_x" || !ops[0].DeadlineAt.Equal(deadline) ||
		ops[1].Code != airlock.CodeDeadlinePassed || ops[1].State != airlock.StateExpired {
		t.Fatalf("recorded %+v", ops)
	}
	if ops[0].Return.Before(ops[0].Call) {
		t.Errorf("return before call: %+v", ops[0])
	}
	events := []airlock.Event{
		{ID: 1, Type: airlock.EventRequestCreated, RequestID: "apr_x", At: ops[0].Call},
		{ID: 2, Type: airlock.EventRequestExpired, RequestID: "apr_x", At: ops[1].Call, State: airlock.StateExpired},
	}
	end := time.Now()
	exp := ExpiryOps(events, end)
	if len(exp) != 1 || exp[0].Kind != Expire || !exp[0].Call.Equal(ops[1].Call) || !exp[0].Return.Equal(end) {
		t.Fatalf("ExpiryOps = %+v", exp)
	}
	if err := Check(append(ops, exp...), Options{Complete: true}).Err(); err != nil {
		t.Fatalf("recorded history refused: %v", err)
	}
}

// quorumHist is a request needing need approvals, created by alice.
func quorumHist(id string, need int) *hist {
	h := newHist(id)
	h.ops[0].Approvals, h.ops[0].Principal = need, "alice"
	return h
}

// vote records principal's successful vote of kind k over [from, to] ms,
// returning the request's state and approving votes after it.
func (h *hist) vote(client int, principal string, k Kind, from, to float64, state airlock.State, votes int) *hist {
	o := Op{Client: client, Kind: k, RequestID: h.id, Call: ms(from), Return: ms(to), DeadlineAt: ms(50),
		Principal: principal, State: state, Approvals: h.ops[0].Approvals, ApprovedVotes: votes}
	if state.Terminal() {
		o.DecidedAt = ms((from + to) / 2)
	}
	h.ops = append(h.ops, o)
	return h
}

// TestCheckerQuorum: a 2-of-3 history with concurrent votes, a refused
// second vote and a refused creator's vote passes; the checker catches a
// principal counted twice, the creator's vote counted, an approval that
// decided short of the quorum, and a vote that ended a request it should
// have left pending.
func TestCheckerQuorum(t *testing.T) {
	t.Parallel()
	good := quorumHist("apr_q", 2).
		vote(1, "ada", Approve, 2, 6, airlock.StatePending, 1).
		vote(2, "grace", Approve, 3, 7, airlock.StateApproved, 2).
		fail(3, Approve, 4, 8, airlock.CodeNotPending, airlock.StateApproved).
		fail(1, Approve, 5, 6, airlock.CodeForbidden, "").
		fail(4, Approve, 2, 3, airlock.CodeForbidden, "")
	if err := Check(good.ops, Options{Complete: true}).Err(); err != nil {
		t.Fatalf("a good quorum history was refused: %v", err)
	}
	denied := quorumHist("apr_d", 2).
		vote(1, "ada", Approve, 2, 4, airlock.StatePending, 1).
		vote(2, "linus", Deny, 3, 5, airlock.StateDenied, 1).
		fail(3, Approve, 3, 6, airlock.CodeNotPending, airlock.StateDenied)
	if err := Check(denied.ops, Options{Complete: true}).Err(); err != nil {
		t.Fatalf("a denial racing the last approval was refused: %v", err)
	}

	for _, tc := range []struct {
		name string
		h    *hist
		rule Rule
	}{
		{"a double-counted vote: ada's two approvals both counted", quorumHist("apr_1", 2).
			vote(1, "ada", Approve, 2, 3, airlock.StatePending, 1).
			vote(2, "ada", Approve, 4, 5, airlock.StateApproved, 2), RuleQuorum},
		{"the creator's vote counted", quorumHist("apr_2", 2).
			vote(1, "alice", Approve, 2, 3, airlock.StatePending, 1).
			vote(2, "ada", Approve, 4, 5, airlock.StateApproved, 2), RuleQuorum},
		{"decided short of the quorum", quorumHist("apr_3", 3).
			vote(1, "ada", Approve, 2, 3, airlock.StatePending, 1).
			vote(2, "grace", Approve, 4, 5, airlock.StateApproved, 2), RuleQuorum},
		{"two votes both told they were the first", quorumHist("apr_4", 3).
			vote(1, "ada", Approve, 2, 3, airlock.StatePending, 1).
			vote(2, "grace", Approve, 4, 5, airlock.StatePending, 1), RuleLinearizable},
	} {
		rep := Check(tc.h.ops, Options{})
		if !rep.Broke(tc.rule) {
			t.Errorf("%s: not caught as %q; violations: %v", tc.name, tc.rule, rep.Violations)
		}
	}
}
