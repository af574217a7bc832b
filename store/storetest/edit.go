package storetest

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// editedArgs are the arguments the tests' reviewer approves instead.
const editedArgs = `{"cmd":"ls"}`

// edit approves request id with editedArgs as the tests' reviewer.
func (b *bundle) edit(id string, mods ...func(*store.EditParams)) (orig, edited airlock.Request, err error) {
	p := store.EditParams{
		DecideParams: store.DecideParams{ID: id, Status: airlock.StateApproved, Note: "only the listing", Validity: validity, Actor: reviewer},
		NewID:        airlock.NewID(airlock.PrefixRequest),
		Arguments:    []byte(editedArgs),
	}
	for _, m := range mods {
		m(&p)
	}
	return b.store.Edit(b.ctx, p)
}

// testEditRebind checks an approval with changed arguments (T37): the
// original ends denied naming its replacement, a new request with the
// edited bytes is approved in the same transaction, and an edit races a
// decision, a cancel and the deadline with exactly one outcome.
func (s *suite) testEditRebind(t *testing.T) {
	runAll(t, []test{
		{"the original ends denied, a new request with the edited bytes is approved", s.editRebinds},
		{"a claim on the original fails as denied; the new request runs once, with its own bytes", s.editClaims},
		{"an edit racing a denial, an approval and a cancel: one outcome", s.editRaces},
		{"an edit at the deadline: expired, no new request", s.editAtDeadline},
		{"a question, a command, bad arguments and routing are refused and change nothing", s.editRefused},
		{"an edit of a request needing several approvals is the first vote", s.editQuorum},
	})
}

func (s *suite) editRebinds(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, func(p *store.NewRequestParams) { p.Request.Context = json.RawMessage(`{"cwd":"/srv"}`) })
	b.clock.Advance(window / 2)
	orig, edited, err := b.edit(r.ID)
	if err != nil {
		t.Fatalf("Edit: %v", err)
	}
	sameRequest(t, "original as returned, then read", b.get(t, r.ID), orig)
	sameRequest(t, "edited as returned, then read", b.get(t, edited.ID), edited)
	if orig.State != airlock.StateDenied || orig.ReplacedBy != edited.ID || orig.DerivedFrom != "" ||
		orig.Decision == nil || orig.Decision.Note != "only the listing" || orig.Decision.DecidedBy != reviewer || orig.Decision.ExpiresAt != nil {
		t.Fatalf("original = %s; want denied by the reviewer with the note, replaced by %s", show(orig), edited.ID)
	}
	if string(orig.Arguments) != `{"cmd":"ls -la"}` {
		t.Fatalf("original's arguments = %s; an edit never changes them", orig.Arguments)
	}
	if edited.State != airlock.StateApproved || edited.DerivedFrom != r.ID || edited.ReplacedBy != "" ||
		string(edited.Arguments) != editedArgs || edited.InstanceID != r.InstanceID || edited.OwnerID != r.OwnerID ||
		edited.Tool != r.Tool || edited.AgentReasoning != r.AgentReasoning || string(edited.Context) != `{"cwd":"/srv"}` ||
		edited.IdempotencyKey != "" || edited.Kind != airlock.KindToolCall {
		t.Fatalf("edited = %s; want the original's call with the edited arguments, approved", show(edited))
	}
	d := edited.Decision
	if d == nil || d.DecidedBy != reviewer || !d.DecidedAt.Equal(orig.Decision.DecidedAt) ||
		d.ExpiresAt == nil || !d.ExpiresAt.Equal(d.DecidedAt.Add(validity)) {
		t.Fatalf("edited's decision = %s; want the reviewer's approval at the denial's instant, valid %s", show(d), validity)
	}
	if !edited.DeadlineAt.Equal(r.DeadlineAt) || !edited.CreatedAt.Equal(d.DecidedAt) {
		t.Fatalf("edited: created %s, deadline %s; want created at the edit, due at the original's deadline %s",
			edited.CreatedAt, edited.DeadlineAt, r.DeadlineAt)
	}
	var got []string
	for _, e := range b.events(t) {
		if e.RequestID == r.ID || e.RequestID == edited.ID {
			got = append(got, e.RequestID+" "+string(e.Type)+" "+string(e.State))
		}
	}
	want := []string{r.ID + " request.created pending", r.ID + " request.denied denied",
		edited.ID + " request.created pending", edited.ID + " request.approved approved"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The original is final: a second edit, a decision, a cancel lose.
	if _, _, err := b.edit(r.ID); err == nil {
		t.Fatal("a second edit of the original succeeded")
	} else {
		wantErr(t, err, airlock.CodeNotPending, airlock.StateDenied)
	}
	if _, err := b.approve(r.ID); err == nil {
		t.Fatal("an approval of the edited original succeeded")
	}
}

func (s *suite) editClaims(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	_, edited, err := b.edit(r.ID)
	if err != nil {
		t.Fatalf("Edit: %v", err)
	}
	_, err = b.claim(r.ID)
	wantErr(t, err, airlock.CodeNotApproved, airlock.StateDenied)
	if !strings.Contains(err.Error(), edited.ID) {
		t.Fatalf("claim on the original: %v; want it to name the replacement %s", err, edited.ID)
	}
	c, err := b.claim(edited.ID)
	if err != nil {
		t.Fatalf("claim on the edited request: %v", err)
	}
	if string(c.Arguments) != editedArgs {
		t.Fatalf("the claimed request's arguments = %s; want the edited bytes %s", c.Arguments, editedArgs)
	}
	_, err = b.claim(edited.ID)
	wantErr(t, err, airlock.CodeAlreadyExecuted, airlock.StateApproved)
	if got := b.get(t, r.ID); got.Execution != nil {
		t.Fatalf("the original has an execution: %s", show(got.Execution))
	}
}

func (s *suite) editRaces(t *testing.T) {
	b := s.setup(t)
	wins := map[string]int{}
	for range 20 {
		r := b.create(t)
		newID := airlock.NewID(airlock.PrefixRequest)
		names := []string{"edit", "deny", "approve", "cancel"}
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		wg.Go(func() {
			_, _, errs[0] = b.edit(r.ID, func(p *store.EditParams) { p.NewID = newID })
		})
		wg.Go(func() { _, errs[1] = b.deny(r.ID) })
		wg.Go(func() { _, errs[2] = b.approve(r.ID) })
		wg.Go(func() { _, errs[3] = b.cancel(r.ID) })
		wg.Wait()
		final := b.get(t, r.ID)
		won := ""
		for i, err := range errs {
			if err == nil {
				if won != "" {
					t.Fatalf("both %s and %s won on %s", won, names[i], r.ID)
				}
				won = names[i]
				continue
			}
			wantErr(t, err, airlock.CodeNotPending, final.State)
		}
		wins[won]++
		_, nerr := b.store.GetRequest(b.ctx, newID)
		if won == "edit" {
			if final.State != airlock.StateDenied || final.ReplacedBy != newID || nerr != nil {
				t.Fatalf("edit won, but the original is %s replaced by %q, the new request: %v", final.State, final.ReplacedBy, nerr)
			}
			continue
		}
		if final.ReplacedBy != "" || airlock.ErrorCode(nerr) != airlock.CodeNotFound {
			t.Fatalf("%s won, but the original is replaced by %q and reading the edit's request says %v", won, final.ReplacedBy, nerr)
		}
	}
	if wins[""] != 0 {
		t.Fatalf("rounds without a winner: %d", wins[""])
	}
	t.Logf("winners: %v", wins)
}

func (s *suite) editAtDeadline(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	b.clock.Set(r.DeadlineAt)
	newID := airlock.NewID(airlock.PrefixRequest)
	_, _, err := b.edit(r.ID, func(p *store.EditParams) { p.NewID = newID })
	wantErr(t, err, airlock.CodeDeadlinePassed, airlock.StateExpired)
	if got := b.get(t, r.ID); got.State != airlock.StateExpired || got.ReplacedBy != "" {
		t.Fatalf("original = %s, replaced by %q; want expired, replaced by nothing", got.State, got.ReplacedBy)
	}
	if _, err := b.store.GetRequest(b.ctx, newID); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("the edit's request: %v; want not_found", err)
	}
}

func (s *suite) editRefused(t *testing.T) {
	b := s.setup(t)
	question := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Kind, p.Request.Question, p.Request.Title = airlock.KindAgentRequest, &airlock.Question{}, "which colour?"
	})
	routed := b.create(t, func(p *store.NewRequestParams) { p.Request.Reviewers = []string{"payments"} })
	plain := b.create(t)
	cases := []struct {
		name string
		id   string
		mod  func(*store.EditParams)
		code airlock.Code
	}{
		{"a question", question.ID, nil, airlock.CodeInvalidRequest},
		{"routed to a group the editor is not in", routed.ID, nil, airlock.CodeForbidden},
		{"arguments that are no object", plain.ID, func(p *store.EditParams) { p.Arguments = []byte(`["ls"]`) }, airlock.CodeInvalidRequest},
		{"arguments with a duplicate key", plain.ID, func(p *store.EditParams) { p.Arguments = []byte(`{"a":1,"a":2}`) }, airlock.CodeInvalidRequest},
	}
	before := len(b.events(t))
	for _, tc := range cases {
		newID := airlock.NewID(airlock.PrefixRequest)
		mods := []func(*store.EditParams){func(p *store.EditParams) { p.NewID = newID }}
		if tc.mod != nil {
			mods = append(mods, tc.mod)
		}
		_, _, err := b.edit(tc.id, mods...)
		if airlock.ErrorCode(err) != tc.code {
			t.Fatalf("%s: err = %v; want %s", tc.name, err, tc.code)
		}
		if got := b.get(t, tc.id); got.State != airlock.StatePending || got.ReplacedBy != "" {
			t.Fatalf("%s: the request is %s, replaced by %q; want it pending, unchanged", tc.name, got.State, got.ReplacedBy)
		}
		if _, err := b.store.GetRequest(b.ctx, newID); airlock.ErrorCode(err) != airlock.CodeNotFound {
			t.Fatalf("%s: the edit's request: %v; want not_found", tc.name, err)
		}
	}
	if after := len(b.events(t)); after != before {
		t.Fatalf("refused edits appended %d events", after-before)
	}
}

func (s *suite) editQuorum(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, quorum(2))
	orig, edited, err := b.edit(r.ID, func(p *store.EditParams) {
		p.Principal, p.Groups = "ada", []string{"payments"}
	})
	if err != nil {
		t.Fatalf("Edit: %v", err)
	}
	if orig.State != airlock.StateDenied || orig.ReplacedBy != edited.ID {
		t.Fatalf("original = %s replaced by %q; want denied, replaced by %s", orig.State, orig.ReplacedBy, edited.ID)
	}
	if edited.State != airlock.StatePending || edited.ApprovedVotes() != 1 || principals(edited.Votes)[0] != "ada" ||
		edited.Approvals != 2 || strings.Join(edited.Reviewers, ",") != "payments" {
		t.Fatalf("edited = %s; want pending with ada's vote, needing 2 approvals of payments", show(edited))
	}
	sameRequest(t, "edited as returned, then read", b.get(t, edited.ID), edited)
	if _, err := b.vote(edited.ID, "ada", airlock.StateApproved); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("ada's second vote: %v; want forbidden", err)
	}
	done, err := b.vote(edited.ID, "bob", airlock.StateApproved)
	if err != nil || done.State != airlock.StateApproved {
		t.Fatalf("bob's vote = %s, %v; want approved", done.State, err)
	}
}

// testClaims checks the adapter's claims a tool call may carry (preview,
// reversibility): stored and read back as given, carried over to an
// edit's replacement, and refused when malformed.
func (s *suite) testClaims(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Preview = &airlock.Preview{Type: airlock.PreviewDiff, Content: "--- a/users.sql\n+++ b/users.sql\n-DROP TABLE users;\n"}
		p.Request.Reversibility = airlock.Irreversible
	})
	got := b.get(t, r.ID)
	if got.Preview == nil || got.Preview.Type != "diff" || !strings.Contains(got.Preview.Content, "DROP TABLE") || got.Reversibility != "irreversible" {
		t.Fatalf("read back: preview %+v, reversibility %q", got.Preview, got.Reversibility)
	}
	if plain := b.create(t); plain.Preview != nil || plain.Reversibility != "" {
		t.Fatalf("a request without claims: %+v %q", plain.Preview, plain.Reversibility)
	}
	_, edited, err := b.edit(r.ID)
	if err != nil {
		t.Fatalf("Edit: %v", err)
	}
	if edited.Preview == nil || edited.Preview.Content != got.Preview.Content || edited.Reversibility != "irreversible" {
		t.Fatalf("the edit's replacement: preview %+v, reversibility %q; want the original's", edited.Preview, edited.Reversibility)
	}
	sameRequest(t, "edited, then read", b.get(t, edited.ID), edited)
	for _, bad := range []func(*store.NewRequestParams){
		func(p *store.NewRequestParams) {
			p.Request.Preview = &airlock.Preview{Type: "html", Content: "<b>x</b>"}
		},
		func(p *store.NewRequestParams) { p.Request.Preview = &airlock.Preview{Type: "text"} },
		func(p *store.NewRequestParams) { p.Request.Reversibility = "maybe" },
	} {
		if _, _, err := b.store.CreateRequest(b.ctx, b.params(bad)); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Fatalf("a malformed claim: %v; want invalid_request", err)
		}
	}
}
