package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// testExecution checks the one execution attempt of an approval
// (docs/protocol.md L8): claimed once, reported once.
func (s *suite) testExecution(t *testing.T) {
	runAll(t, []test{
		{"only the owning agent cancels, claims or reports", s.ownerOnly},
		{"claim then report", s.claimThenReport},
		{"a claim hands the claimed request over before it returns", s.claimPrepare},
		{"report an unknown outcome after a crash", s.reportUnknown},
		{"report without a claim", s.reportUnclaimed},
		{"invalid reports", s.reportInvalid},
	})
}

func (s *suite) ownerOnly(t *testing.T) {
	b := s.setup(t)
	pending := b.into(t, airlock.StatePending)
	_, err := b.store.Cancel(b.ctx, pending.ID, ownerB)
	wantMessage(t, err, airlock.CodeNotFound, "", airlock.NotFound("approval request", pending.ID).Message)
	sameRequest(t, "a pending request another agent tried to cancel", b.get(t, pending.ID), pending)

	approved := b.into(t, airlock.StateApproved)
	_, err = b.store.ClaimExecution(b.ctx, approved.ID, ownerB, nil)
	wantErr(t, err, airlock.CodeNotFound, "")
	sameRequest(t, "an approved request another agent tried to claim", b.get(t, approved.ID), approved)

	claimed, err := b.claim(approved.ID)
	wantOK(t, err)
	_, err = b.store.ReportExecution(b.ctx, approved.ID, airlock.ReportInput{Status: airlock.ExecSucceeded}, ownerB)
	wantErr(t, err, airlock.CodeNotFound, "")
	sameRequest(t, "a claimed request another agent tried to report", b.get(t, approved.ID), claimed)
}

func (s *suite) claimThenReport(t *testing.T) {
	b := s.setup(t)
	r := b.into(t, airlock.StateApproved)
	claimedAt := b.clock.Advance(time.Second).Truncate(time.Microsecond)
	got, err := b.claim(r.ID)
	wantOK(t, err)
	if x := got.Execution; x == nil || x.Status != airlock.ExecClaimed || x.ClaimedBy != ownerA ||
		!x.ClaimedAt.Equal(claimedAt) || x.FinishedAt != nil {
		t.Fatalf("execution = %s, want claimed by %s at %v", show(got.Execution), ownerA, claimedAt)
	}
	_, err = b.claim(r.ID)
	wantErr(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved)

	finishedAt := b.clock.Advance(time.Second).Truncate(time.Microsecond)
	reported, err := b.store.ReportExecution(b.ctx, r.ID, airlock.ReportInput{Status: airlock.ExecSucceeded, Detail: "exit 0 ✓"}, ownerA)
	wantOK(t, err)
	if x := reported.Execution; x.Status != airlock.ExecSucceeded || x.Detail != "exit 0 ✓" ||
		x.FinishedAt == nil || !x.FinishedAt.Equal(finishedAt) || !x.ClaimedAt.Equal(claimedAt) {
		t.Fatalf("execution = %s, want succeeded at %v", show(reported.Execution), finishedAt)
	}
	sameRequest(t, "read after report", b.get(t, r.ID), reported)
	if got.Decision == nil || !got.Decision.DecidedAt.Equal(r.Decision.DecidedAt) || reported.State != airlock.StateApproved {
		t.Fatalf("claim and report touched the decision: %s", show(reported))
	}

	// The same report again (a retry) changes nothing; another outcome
	// is refused.
	b.clock.Advance(time.Second)
	again, err := b.store.ReportExecution(b.ctx, r.ID, airlock.ReportInput{Status: airlock.ExecSucceeded, Detail: "exit 0 ✓"}, ownerA)
	wantOK(t, err)
	sameRequest(t, "repeated report", again, reported)
	_, err = b.store.ReportExecution(b.ctx, r.ID, airlock.ReportInput{Status: airlock.ExecFailed}, ownerA)
	wantErr(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved)
	_, err = b.claim(r.ID)
	wantErr(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved)
	sameRequest(t, "after refused reports", b.get(t, r.ID), reported)
}

// claimPrepare checks ClaimExecution's prepare: handed the claimed
// request, the very one the claim then returns (the provider signs its
// approval token from it while the commit syncs, and uses that token only
// for an equal request), and nothing for a claim that is refused.
func (s *suite) claimPrepare(t *testing.T) {
	b := s.setup(t)
	var handed []airlock.Request
	prepare := func(r airlock.Request) { handed = append(handed, r) }
	r := b.into(t, airlock.StateApproved)
	got, err := b.store.ClaimExecution(b.ctx, r.ID, ownerA, prepare)
	wantOK(t, err)
	if len(handed) == 0 {
		t.Fatal("a claim that won handed nothing to prepare")
	}
	sameRequest(t, "the request prepare was handed last", handed[len(handed)-1], got)
	if got.Execution == nil || got.Execution.Status != airlock.ExecClaimed {
		t.Fatalf("claim returned execution %s, want claimed", show(got.Execution))
	}

	handed = nil
	_, err = b.store.ClaimExecution(b.ctx, r.ID, ownerA, prepare)
	wantErr(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved)
	pending := b.into(t, airlock.StatePending)
	_, err = b.store.ClaimExecution(b.ctx, pending.ID, ownerA, prepare)
	wantErr(t, err, airlock.CodeNotApproved, airlock.StatePending)
	_, err = b.store.ClaimExecution(b.ctx, r.ID, ownerB, prepare)
	wantErr(t, err, airlock.CodeNotFound, "")
	if len(handed) != 0 {
		t.Fatalf("refused claims handed %d requests to prepare, want none", len(handed))
	}
}

func (s *suite) reportUnknown(t *testing.T) {
	b := s.setup(t)
	r := b.into(t, airlock.StateApproved)
	_, err := b.claim(r.ID)
	wantOK(t, err)
	// The report may come after expires_at: the run started in time.
	b.clock.Set(r.Decision.ExpiresAt.Add(time.Hour))
	got, err := b.store.ReportExecution(b.ctx, r.ID, airlock.ReportInput{Status: airlock.ExecUnknown, Detail: "adapter restarted"}, ownerA)
	wantOK(t, err)
	if got.Execution.Status != airlock.ExecUnknown {
		t.Fatalf("status = %s, want unknown", got.Execution.Status)
	}
}

func (s *suite) reportUnclaimed(t *testing.T) {
	b := s.setup(t)
	in := airlock.ReportInput{Status: airlock.ExecSucceeded}
	approved := b.into(t, airlock.StateApproved)
	_, err := b.store.ReportExecution(b.ctx, approved.ID, in, ownerA)
	wantErr(t, err, airlock.CodeInvalidRequest, "")
	sameRequest(t, "unclaimed approval after a report", b.get(t, approved.ID), approved)
	for _, state := range []airlock.State{airlock.StatePending, airlock.StateDenied, airlock.StateExpired, airlock.StateCancelled} {
		r := b.into(t, state)
		_, err := b.store.ReportExecution(b.ctx, r.ID, in, ownerA)
		wantErr(t, err, airlock.CodeNotApproved, state)
	}
	_, err = b.store.ReportExecution(b.ctx, "apr_missing", in, ownerA)
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) reportInvalid(t *testing.T) {
	b := s.setup(t)
	r := b.into(t, airlock.StateApproved)
	claimed, err := b.claim(r.ID)
	wantOK(t, err)
	for _, in := range []airlock.ReportInput{
		{Status: airlock.ExecClaimed},
		{Status: "done"},
		{Status: airlock.ExecFailed, Detail: strings.Repeat("x", airlock.MaxDetailLen+1)},
	} {
		_, err := b.store.ReportExecution(b.ctx, r.ID, in, ownerA)
		wantErr(t, err, airlock.CodeInvalidRequest, "")
	}
	sameRequest(t, "after invalid reports", b.get(t, r.ID), claimed)
}
