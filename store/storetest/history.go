package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testHistory checks the reads of decisions (store.History).
func (s *suite) testHistory(t *testing.T) {
	runAll(t, []test{
		{"decision times are the window's approvals and denials, with their decider, times and size", s.historyTimes},
		{"decided calls are the window's approved and denied tool calls, with their arguments", s.historyCalls},
		{"a history read refuses an age that is not positive or over a year", s.historyAge},
	})
}

// historyTimes reads what DecisionTimes yields for p, by request
// creation time (the suite's creations are a microsecond or more apart).
func (b *bundle) historyTimes(t *testing.T, p store.HistoryParams) []store.DecidedRequest {
	t.Helper()
	var out []store.DecidedRequest
	if err := b.store.DecisionTimes(b.ctx, p, func(d store.DecidedRequest) error {
		out = append(out, d)
		return nil
	}); err != nil {
		t.Fatalf("DecisionTimes(%+v): %v", p, err)
	}
	slices.SortFunc(out, func(a, b store.DecidedRequest) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

func (s *suite) historyTimes(t *testing.T) {
	b := s.setup(t)
	// Out of the window: decided more than an hour before the reads.
	old := b.into(t, airlock.StateApproved)
	b.clock.Advance(2 * time.Hour)

	big := `{"sql":"` + strings.Repeat("x", 3000) + `"}`
	approved := b.create(t, func(p *store.NewRequestParams) { p.Request.Arguments = json.RawMessage(big) })
	b.clock.Advance(1500 * time.Millisecond)
	if _, err := b.approve(approved.ID); err != nil {
		t.Fatal(err)
	}
	denied := b.create(t)
	b.clock.Advance(7 * time.Second)
	if _, err := b.store.Decide(b.ctx, store.DecideParams{ID: denied.ID, Status: airlock.StateDenied, Actor: "oidc:https://idp#ada", Principal: "oidc:https://idp#ada"}); err != nil {
		t.Fatal(err)
	}
	byRule, _, err := b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Validity: validity, DecidedBy: airlock.PolicyActor("read-only")}
	}))
	if err != nil {
		t.Fatal(err)
	}
	// Neither an approval nor a denial: not in the history.
	b.into(t, airlock.StateCancelled)
	b.into(t, airlock.StatePending)

	got := b.historyTimes(t, store.HistoryParams{Age: time.Hour})
	type row struct {
		by    string
		state airlock.State
		took  time.Duration
		size  int
	}
	var rows []row
	for _, d := range got {
		rows = append(rows, row{d.DecidedBy, d.State, d.DecidedAt.Sub(d.CreatedAt), d.ArgumentsBytes})
	}
	want := []row{
		{reviewer, airlock.StateApproved, 1500 * time.Millisecond, len(big)},
		{"oidc:https://idp#ada", airlock.StateDenied, 7 * time.Second, len(`{"cmd":"ls -la"}`)},
		{airlock.PolicyActor("read-only"), airlock.StateApproved, 0, len(`{"cmd":"ls -la"}`)},
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("decision times in the last hour = %+v; want %+v (not %s, decided earlier; no cancellation, no pending)", rows, want, old.ID)
	}
	if !got[0].CreatedAt.Equal(approved.CreatedAt) || !got[2].CreatedAt.Equal(byRule.CreatedAt) {
		t.Fatalf("created_at = %v, %v; want %v, %v", got[0].CreatedAt, got[2].CreatedAt, approved.CreatedAt, byRule.CreatedAt)
	}
	one := b.historyTimes(t, store.HistoryParams{Age: time.Hour, DecidedBy: "oidc:https://idp#ada"})
	if len(one) != 1 || one[0].State != airlock.StateDenied {
		t.Fatalf("decision times of one decider = %+v; want the denial alone", one)
	}
	if all := b.historyTimes(t, store.HistoryParams{Age: 3 * time.Hour}); len(all) != 4 {
		t.Fatalf("decision times in 3 hours = %d; want 4 (the older approval too)", len(all))
	}
	// The window is after now - age: an hour after the first approval,
	// decided at now - 1h exactly, it is out.
	b.clock.Advance(time.Hour - 7*time.Second)
	if got := b.historyTimes(t, store.HistoryParams{Age: time.Hour}); len(got) != 2 {
		t.Fatalf("decision times an hour after the first = %+v; want 2 (decided after now - age)", got)
	}
}

func (s *suite) historyCalls(t *testing.T) {
	b := s.setup(t)
	a := b.into(t, airlock.StateApproved)
	d := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Tool, p.Request.Arguments = "refund", json.RawMessage(`{"amount": 12, "currency":"GBP"}`)
	})
	if _, err := b.deny(d.ID); err != nil {
		t.Fatal(err)
	}
	b.into(t, airlock.StateExpired)
	b.create(t)
	// Approvals no person made are left out; a rule's denial is not.
	for _, by := range []string{airlock.PolicyActor("docs"), airlock.ActorPolicy, airlock.GrantActor("grt_1")} {
		if _, _, err := b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) {
			p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Validity: validity, DecidedBy: by}
		})); err != nil {
			t.Fatal(err)
		}
	}
	ruled, _, err := b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) {
		p.Request.Arguments = json.RawMessage(`{"cmd":"rm -rf /"}`)
		p.Initial = &airlock.InitialDecision{Status: airlock.StateDenied, DecidedBy: airlock.PolicyActor("no rm")}
	}))
	if err != nil {
		t.Fatal(err)
	}
	// An edit: the original's denial is in, the replacement's approval
	// (approved with changes, not unchanged) is not.
	e := b.create(t)
	orig, replacement, err := b.edit(e.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []store.DecidedRequest
	if err := b.store.DecidedCalls(b.ctx, store.HistoryParams{Age: time.Hour}, func(r store.DecidedRequest) error {
		if r.ID == replacement.ID {
			t.Errorf("decided calls hold the edit's replacement %s: an approval with changes is not an unchanged one", r.ID)
		}
		if r.ID == orig.ID {
			if r.State != airlock.StateDenied {
				t.Errorf("the edited original is in the decided calls as %s; want denied", r.State)
			}
			return nil
		}
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	order := []string{a.ID, d.ID, ruled.ID}
	slices.SortFunc(got, func(x, y store.DecidedRequest) int { return slices.Index(order, x.ID) - slices.Index(order, y.ID) })
	if len(got) != 3 || got[2].ID != ruled.ID || got[2].DecidedBy != airlock.PolicyActor("no rm") || got[0].ID != a.ID || got[0].State != airlock.StateApproved || got[0].Tool != "shell.exec" ||
		string(got[0].Arguments) != `{"cmd":"ls -la"}` || got[0].InstanceID != b.inst.ID || got[0].DecidedBy != reviewer ||
		got[1].ID != d.ID || got[1].State != airlock.StateDenied || string(got[1].Arguments) != `{"amount": 12, "currency":"GBP"}` {
		t.Fatalf("decided calls = %+v; want the reviewer's approval and denial and the rule's denial, with their exact arguments", got)
	}
}

func (s *suite) historyAge(t *testing.T) {
	b := s.setup(t)
	for _, age := range []time.Duration{0, -time.Second, store.MaxHistoryAge + time.Second} {
		err := b.store.DecisionTimes(b.ctx, store.HistoryParams{Age: age}, func(store.DecidedRequest) error { return nil })
		if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Fatalf("DecisionTimes with age %s = %v; want invalid_request", age, err)
		}
		err = b.store.DecidedCalls(b.ctx, store.HistoryParams{Age: age}, func(store.DecidedRequest) error { return nil })
		if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Fatalf("DecidedCalls with age %s = %v; want invalid_request", age, err)
		}
	}
}
