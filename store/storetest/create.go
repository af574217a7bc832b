package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testCreate checks what a new request looks like.
func (s *suite) testCreate(t *testing.T) {
	runAll(t, []test{
		{"times come from the store clock, in UTC, to the microsecond", s.createTimes},
		{"seq orders creation", s.createSeq},
		{"unknown instance", s.createUnknownInstance},
		{"another owner's instance", s.createOthersInstance},
		{"policy approval at creation", s.policyApproval},
		{"policy rule's decision at creation", s.policyRule},
		{"policy denial at creation", s.policyDenial},
		{"invalid parameters", s.createInvalid},
	})
}

func (s *suite) createTimes(t *testing.T) {
	b := s.setup(t)
	now := epoch.Truncate(time.Microsecond)
	r := b.create(t)
	if !r.CreatedAt.Equal(now) || r.CreatedAt.Location() != time.UTC {
		t.Fatalf("CreatedAt = %v, want %v in UTC", r.CreatedAt, now)
	}
	if !r.DeadlineAt.Equal(now.Add(window)) || r.DeadlineAt.Location() != time.UTC {
		t.Fatalf("DeadlineAt = %v, want %v in UTC", r.DeadlineAt, now.Add(window))
	}
	if r.State != airlock.StatePending || r.Decision != nil || r.Execution != nil || r.Seq <= 0 {
		t.Fatalf("new request = %s, want pending with a Seq, no decision, no execution", show(r))
	}
	sameRequest(t, "read back", b.get(t, r.ID), r)
}

func (s *suite) createSeq(t *testing.T) {
	b := s.setup(t)
	r1, r2 := b.create(t), b.create(t)
	if r2.Seq <= r1.Seq {
		t.Fatalf("Seq %d then %d, want increasing", r1.Seq, r2.Seq)
	}
}

func (s *suite) createUnknownInstance(t *testing.T) {
	b := s.setup(t)
	_, _, err := b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) { p.Request.InstanceID = "ins_missing" }))
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) createOthersInstance(t *testing.T) {
	b := s.setup(t)
	_, _, err := b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) { p.Request.OwnerID = ownerB }))
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) policyApproval(t *testing.T) {
	b := s.setup(t)
	now := epoch.Truncate(time.Microsecond)
	r := b.create(t, func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Note: "read-only tool", Validity: validity}
	})
	exp := now.Add(validity)
	if d := r.Decision; r.State != airlock.StateApproved || d == nil || d.Status != airlock.StateApproved ||
		d.DecidedBy != airlock.ActorPolicy || !d.DecidedAt.Equal(now) || d.Note != "read-only tool" ||
		d.ExpiresAt == nil || !d.ExpiresAt.Equal(exp) {
		t.Fatalf("policy-approved request = %s, want approved by %s at %v until %v", show(r), airlock.ActorPolicy, now, exp)
	}
	evs := b.events(t)
	last := evs[len(evs)-2:]
	if last[0].Type != airlock.EventRequestCreated || last[1].Type != airlock.EventRequestApproved ||
		last[1].Actor != airlock.ActorPolicy || last[1].RequestID != r.ID {
		t.Fatalf("events = %+v, want request.created then request.approved by %s", last, airlock.ActorPolicy)
	}
	// It is an ordinary approval from then on: one claim.
	_, err := b.claim(r.ID)
	wantOK(t, err)
}

func (s *suite) policyRule(t *testing.T) {
	b := s.setup(t)
	const hash = "06deb4601c6a1b7b364056d46fafefc6c9876aef0d2cae73092c92a01f8ddd1f"
	r := b.create(t, func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Validity: validity,
			DecidedBy: airlock.PolicyActor("read-only tools"), PolicyHash: hash}
	})
	if d := r.Decision; d == nil || d.DecidedBy != "policy:read-only tools" {
		t.Fatalf("request = %s, want decided by policy:read-only tools", show(r))
	}
	got, err := b.store.GetRequest(b.ctx, r.ID)
	wantOK(t, err)
	if got.Decision == nil || got.Decision.DecidedBy != "policy:read-only tools" {
		t.Fatalf("read back = %s, want decided by policy:read-only tools", show(got))
	}
	evs := b.events(t)
	last := evs[len(evs)-2:]
	if last[0].PolicyHash != "" || last[1].Type != airlock.EventRequestApproved ||
		last[1].Actor != "policy:read-only tools" || last[1].PolicyHash != hash {
		t.Fatalf("events = %+v, want the approval by the rule carrying the policy's hash", last)
	}
}

func (s *suite) policyDenial(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateDenied, Note: "never rm -rf"}
	})
	if d := r.Decision; r.State != airlock.StateDenied || d == nil || d.DecidedBy != airlock.ActorPolicy || d.ExpiresAt != nil || d.Note != "never rm -rf" {
		t.Fatalf("policy-denied request = %s, want denied by %s, no expires_at", show(r), airlock.ActorPolicy)
	}
	_, err := b.approve(r.ID)
	wantErr(t, err, airlock.CodeNotPending, airlock.StateDenied)
}

// The store refuses what would break the lifecycle's rules, the
// domain's NewRequestParams.Validate, with the same error in every
// driver: the provider validates a caller's input first, so only a
// caller's bug gets here, and what it gets must not depend on the store.
func (s *suite) createInvalid(t *testing.T) {
	b := s.setup(t)
	const (
		window   = "a request needs a decision window of at least 1µs, so that deadline_at is after created_at"
		validity = "an approval needs a validity of at least 1µs, so that expires_at is after decided_at"
	)
	command := &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{
		Method: airlock.MethodWorkMove, Input: json.RawMessage(`{"itemId":"wi_1","columnKey":"done"}`)}}
	for _, tc := range []struct {
		name           string
		mod            func(*store.NewRequestParams)
		field, message string
	}{
		{"a zero window", func(p *store.NewRequestParams) { p.Window = 0 }, "timeout", window},
		{"a window under a microsecond", func(p *store.NewRequestParams) { p.Window = 500 * time.Nanosecond }, "timeout", window},
		{"a negative window", func(p *store.NewRequestParams) { p.Window = -time.Minute }, "timeout", window},
		{"an unknown kind", func(p *store.NewRequestParams) { p.Request.Kind = "rm_rf" }, "kind", `unknown kind "rm_rf"`},
		{"a key without a fingerprint", func(p *store.NewRequestParams) { p.Request.Fingerprint = "" },
			"fingerprint", "an idempotent request needs a fingerprint to compare replays by"},
		{"a command decided at creation", func(p *store.NewRequestParams) {
			p.Request.Kind, p.Request.Proposal = airlock.KindWorkChange, command
			p.Initial = &airlock.InitialDecision{Status: airlock.StateDenied}
		}, "proposal", "a command proposal cannot be decided at creation; a person must approve it"},
		{"a question approved at creation", func(p *store.NewRequestParams) {
			p.Request.Kind, p.Request.Question = airlock.KindAgentRequest, &airlock.Question{}
			p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Validity: time.Minute}
		}, "question", "a question cannot be approved at creation; a person must answer it"},
		{"an initial pending", func(p *store.NewRequestParams) { p.Initial = &airlock.InitialDecision{Status: airlock.StatePending} },
			"status", `a decision at creation must be approved or denied, not "pending"`},
		{"an approval with no validity", func(p *store.NewRequestParams) { p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved} },
			"valid_for", validity},
		{"an approval valid under a microsecond", func(p *store.NewRequestParams) {
			p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Validity: 999 * time.Nanosecond}
		}, "valid_for", validity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := b.store.CreateRequest(b.ctx, b.params(tc.mod))
			wantInvalid(t, err, tc.field, tc.message)
		})
	}
	if rs, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{}); err != nil || len(rs) != 0 {
		t.Fatalf("ListRequests = %d requests, %v; want none stored", len(rs), err)
	}
}

// testIdempotency is T09 at the store: one owner and key name one request.
func (s *suite) testIdempotency(t *testing.T) {
	tests := []test{{"replay returns the original", s.replayOriginal}}
	for _, state := range []airlock.State{airlock.StateApproved, airlock.StateDenied, airlock.StateExpired, airlock.StateCancelled} {
		tests = append(tests, test{"replay of a " + string(state) + " request", func(t *testing.T) { s.replayDecided(t, state) }})
	}
	runAll(t, append(tests, []test{
		{"same key, different body", s.keyConflict},
		{"same key from another owner", s.keyOtherOwner},
		{"50 concurrent identical creates make one request", s.identicalCreates},
		{"replay after the instance is deleted", s.replayDeletedInstance},
	}...))
}

// replayDecided replays a request once it is in state: the replay returns
// it as it is.
func (s *suite) replayDecided(t *testing.T, state airlock.State) {
	b, p, orig := s.replayable(t)
	b.clock.Set(orig.DeadlineAt.Add(-time.Second))
	wantOK(t, b.moveTo(orig, state))
	decided := b.get(t, orig.ID)
	// Replaying later never extends deadline_at or expires_at.
	b.clock.Advance(time.Hour)
	got, created, err := b.store.CreateRequest(b.ctx, p)
	wantOK(t, err)
	if created {
		t.Fatal("replay created a request")
	}
	sameRequest(t, "replay", got, decided)
}

func (s *suite) replayOriginal(t *testing.T) {
	b, p, orig := s.replayable(t)
	b.clock.Advance(time.Minute)
	p.Request.ID = airlock.NewID(airlock.PrefixRequest) // a retry mints a new ID
	got, created, err := b.store.CreateRequest(b.ctx, p)
	wantOK(t, err)
	if created {
		t.Fatal("replay created a request")
	}
	sameRequest(t, "replay", got, orig)
}

func (s *suite) keyConflict(t *testing.T) {
	b, p, orig := s.replayable(t)
	p.Request.ID = airlock.NewID(airlock.PrefixRequest)
	p.Request.Arguments = json.RawMessage(`{"cmd":"rm -rf /"}`)
	p.Request.Fingerprint = "fp_other"
	_, _, err := b.store.CreateRequest(b.ctx, p)
	wantMessage(t, err, airlock.CodeIdempotencyConflict, "", fmt.Sprintf(
		"idempotency key %q was already used for a different request (%s); use a new key for a new call", p.Request.IdempotencyKey, orig.ID))
	sameRequest(t, "original after a conflicting replay", b.get(t, orig.ID), orig)
	if _, err := b.store.GetRequest(b.ctx, p.Request.ID); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("conflicting request was stored: %v", err)
	}
}

func (s *suite) keyOtherOwner(t *testing.T) {
	b, p, a := s.replayable(t)
	other := b.instance(t, ownerB)
	p.Request.ID = airlock.NewID(airlock.PrefixRequest)
	p.Request.InstanceID, p.Request.OwnerID, p.Actor = other.ID, other.OwnerID, other.OwnerID
	got, created, err := b.store.CreateRequest(b.ctx, p)
	wantOK(t, err)
	if !created || got.ID == a.ID || got.OwnerID != ownerB {
		t.Fatalf("B's request = created %v, %s; want a new request of B's", created, show(got))
	}
	sameRequest(t, "A's request", b.get(t, a.ID), a)
}

func (s *suite) identicalCreates(t *testing.T) {
	b := s.setup(t)
	p := b.params()
	const n = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		seen    = map[string]int{}
	)
	for range n {
		wg.Go(func() {
			q := p
			q.Request.ID = airlock.NewID(airlock.PrefixRequest)
			r, c, err := b.store.CreateRequest(b.ctx, q)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("CreateRequest: %v", err)
				return
			}
			if c {
				created++
			}
			seen[r.ID]++
		})
	}
	wg.Wait()
	if created != 1 || len(seen) != 1 {
		t.Fatalf("%d creates reported created, %d distinct IDs returned; want 1 and 1", created, len(seen))
	}
	rs, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	if len(rs) != 1 {
		t.Fatalf("%d requests stored, want 1", len(rs))
	}
	n2 := 0
	for _, e := range b.events(t) {
		if e.Type == airlock.EventRequestCreated {
			n2++
		}
	}
	if n2 != 1 {
		t.Fatalf("%d request.created events, want 1", n2)
	}
}

func (s *suite) replayDeletedInstance(t *testing.T) {
	b, p, orig := s.replayable(t)
	_, err := b.store.DeleteInstance(b.ctx, b.inst.ID, ownerA)
	wantOK(t, err)
	got, created, err := b.store.CreateRequest(b.ctx, p)
	wantOK(t, err)
	if created || got.ID != orig.ID || got.State != airlock.StateCancelled {
		t.Fatalf("replay = created %v, %s; want the original, cancelled", created, show(got))
	}
}

// testData checks that what is stored is exactly what was submitted
// (docs/protocol.md L11): bytes, not a re-encoding.
func (s *suite) testData(t *testing.T) {
	runAll(t, []test{
		{"arguments and context bytes", s.dataBytes},
		{"every field round-trips", s.dataRoundTrip},
	})
}

func (s *suite) dataBytes(t *testing.T) {
	b := s.setup(t)
	for _, tc := range []struct{ args, ctx string }{
		{`{"b": 1,  "a":"é\u00e9"}`, `{"cwd" :"/home/ünï"}`},
		{`{"big":123456789012345678901234567890,"exp":1.5E+308,"tiny":-0.000000000000000000001,"z":-0}`, ``},
		{"{\n\t\"emoji\": \"🛫\\ud83d\\ude80\",\n\t\"rtl\": \"\u202eevil\",\n\t\"zw\": \"a\u200bb\"\n}", `{"nested":{"deep":[1,[2,[3]]]}}`},
		{`{}`, `{}`},
	} {
		r := b.create(t, func(p *store.NewRequestParams) {
			p.Request.Arguments = json.RawMessage(tc.args)
			if tc.ctx != "" {
				p.Request.Context = json.RawMessage(tc.ctx)
			}
		})
		got := b.get(t, r.ID)
		for _, g := range []airlock.Request{r, got} {
			if string(g.Arguments) != tc.args {
				t.Fatalf("arguments = %q, want %q", g.Arguments, tc.args)
			}
			if string(g.Context) != tc.ctx || (tc.ctx == "" && g.Context != nil) {
				t.Fatalf("context = %q, want %q", g.Context, tc.ctx)
			}
		}
		list, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{Limit: 1})
		wantOK(t, err)
		if string(list[0].Arguments) != tc.args {
			t.Fatalf("listed arguments = %q, want %q", list[0].Arguments, tc.args)
		}
	}
}

func (s *suite) dataRoundTrip(t *testing.T) {
	b := s.setup(t)
	p := b.params(func(p *store.NewRequestParams) {
		r := &p.Request
		r.Kind = airlock.KindWorkChange
		r.Tool = "work_move"
		r.Arguments = json.RawMessage(`{"itemId":"wi_1", "columnKey":"done"}`)
		r.Timeout = "PT30M"
		r.AgentReasoning = "The card is finished — 完成 ✅\nsecond line"
		r.Context = json.RawMessage(`{"observed":true}`)
		r.Title = "Move «Ship it» to Done"
		r.Description = "What changes: the column.\nWhy: it shipped."
		r.TargetType = "work_item"
		r.TargetID = "wi_1"
		r.SessionID = "ses_abc"
		r.Proposal = &airlock.Proposal{Mode: "command", Command: &airlock.Command{
			Method: "work_move", Input: json.RawMessage(`{"itemId":"wi_1", "columnKey":"done"}`)}}
	})
	r := b.create(t, func(q *store.NewRequestParams) { *q = p })
	want := p.Request
	want.State, want.Seq, want.CreatedAt, want.DeadlineAt = airlock.StatePending, r.Seq, r.CreatedAt, r.DeadlineAt
	want.InstanceName = b.inst.Name // read with the request (testNames)
	sameRequest(t, "created", r, want)
	sameRequest(t, "read back", b.get(t, r.ID), want)

	q := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Kind = airlock.KindAgentRequest
		p.Request.Tool, p.Request.Arguments = "", nil
		p.Request.Proposal = &airlock.Proposal{Mode: "advisory"}
		p.Request.Question = &airlock.Question{Choices: []string{"blue 🔵", "green"}}
	})
	got := b.get(t, q.ID)
	if got.Tool != "" || got.Arguments != nil || show(got.Proposal) != `{"mode":"advisory"}` ||
		got.Question == nil || show(got.Question.Choices) != `["blue 🔵","green"]` {
		t.Fatalf("advisory question = %s", show(got))
	}
	free := b.create(t, func(p *store.NewRequestParams) { p.Request.Question = &airlock.Question{} })
	if got := b.get(t, free.ID); got.Question == nil || len(got.Question.Choices) != 0 {
		t.Fatalf("free-text question = %s, want an empty question", show(got.Question))
	}
}
