package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// escalating routes a new request to payments, widened to sre and leads
// after a minute.
func escalating(p *store.NewRequestParams) {
	p.Request.Reviewers = []string{"payments"}
	p.Request.EscalateTo = []string{"sre", "leads"}
	p.Request.EscalateAfter = time.Minute
}

// testEscalation checks escalations: a pending request routed to a group
// is widened to more once its delay has passed.
func (s *suite) testEscalation(t *testing.T) {
	runAll(t, []test{
		{"a pending request is widened once, when due, with its event", s.escalateOnce},
		{"Slack and email endpoints made before escalations existed get approval_request.escalated", s.escalatedEndpoints},
		{"sweeps at once escalate each request once", s.escalateRace},
		{"escalation needs routing and both keys", s.escalationInvalid},
	})
}

func (s *suite) escalateOnce(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, escalating)
	decided := b.create(t, escalating)
	_, err := b.store.Decide(b.ctx, store.DecideParams{ID: decided.ID, Status: airlock.StateDenied, Actor: reviewer, Groups: []string{"payments"}})
	wantOK(t, err)
	plain := b.create(t, quorum(2))

	b.clock.Advance(time.Minute - time.Microsecond)
	ids, err := b.store.EscalateDue(b.ctx, 0)
	wantOK(t, err)
	if len(ids) != 0 {
		t.Fatalf("escalated %v before it was due", ids)
	}
	_, err = b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateDenied, Actor: "tok_sre", Groups: []string{"sre"}})
	wantErr(t, err, airlock.CodeForbidden, "")

	b.clock.Advance(time.Microsecond)
	ids, err = b.store.EscalateDue(b.ctx, 0)
	wantOK(t, err)
	if !slices.Equal(ids, []string{r.ID}) {
		t.Fatalf("escalated %v, want only %s (not the decided %s nor the unescalating %s)", ids, r.ID, decided.ID, plain.ID)
	}
	got := b.get(t, r.ID)
	if !slices.Equal(got.Reviewers, []string{"payments", "sre", "leads"}) || got.EscalatedAt == nil || !got.EscalatedAt.Equal(b.clock.Now().Truncate(time.Microsecond)) {
		t.Fatalf("after escalation: reviewers %q, escalated at %v", got.Reviewers, got.EscalatedAt)
	}
	n := 0
	for _, e := range b.events(t) {
		if e.Type == airlock.EventRequestEscalated {
			n++
			if e.RequestID != r.ID || e.Actor != airlock.ActorEscalation || e.State != airlock.StatePending {
				t.Fatalf("escalation event %+v", e)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d escalation events, want 1", n)
	}
	b.clock.Advance(time.Hour)
	ids, err = b.store.EscalateDue(b.ctx, 0)
	wantOK(t, err)
	if len(ids) != 0 {
		t.Fatalf("escalated %v again", ids)
	}
	_, err = b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateDenied, Actor: "tok_sre", Groups: []string{"sre"}})
	if err != nil && airlock.ErrorCode(err) != airlock.CodeDeadlinePassed {
		t.Fatalf("a member of the escalation group deciding: %v", err)
	}
}

func (s *suite) escalatedEndpoints(t *testing.T) {
	b := s.setup(t)
	old := []airlock.NotifyType{airlock.NotifyCreated, airlock.NotifyReminder, airlock.NotifyApproved, airlock.NotifyDenied,
		airlock.NotifyExpired, airlock.NotifyCancelled}
	for _, e := range []airlock.Endpoint{
		{ID: airlock.SlackEndpointID, Kind: airlock.EndpointSlack, URL: "slack:C0X", Events: old},
		{ID: airlock.EmailEndpointID, Kind: airlock.EndpointEmail, URL: "smtp:", Events: old[:2]},
		{ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook, URL: "https://example.com/h", Events: old},
	} {
		e.Secret, e.CreatedBy = airlock.NewWebhookSecret(), admin
		_, err := b.store.CreateEndpoint(b.ctx, e)
		wantOK(t, err)
	}
	// As the fan-out does: the endpoints as the store reads them back.
	eps, err := b.store.ListEndpoints(b.ctx, "")
	wantOK(t, err)
	if len(eps) != 3 {
		t.Fatalf("ListEndpoints = %s", show(eps))
	}
	r := b.create(t, escalating)
	b.clock.Advance(time.Minute)
	ids, err := b.store.EscalateDue(b.ctx, 0)
	wantOK(t, err)
	if !slices.Equal(ids, []string{r.ID}) {
		t.Fatalf("escalated %v, want %s", ids, r.ID)
	}
	got := map[string]bool{}
	for _, d := range b.queueAll(t, eps...) {
		if d.Type == airlock.NotifyEscalated && d.RequestID == r.ID {
			got[d.EndpointID] = true
		}
	}
	if len(got) != 2 || !got[airlock.SlackEndpointID] || !got[airlock.EmailEndpointID] {
		t.Fatalf("approval_request.escalated queued for %v, want the Slack and email endpoints only (the webhook lists its types)", got)
	}
}

func (s *suite) escalateRace(t *testing.T) {
	b := s.setup(t)
	var want []string
	for range 10 {
		want = append(want, b.create(t, escalating).ID)
	}
	b.clock.Advance(time.Minute)
	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			ids, err := b.store.EscalateDue(b.ctx, 3)
			if err != nil {
				t.Errorf("EscalateDue: %v", err)
			}
			mu.Lock()
			got = append(got, ids...)
			mu.Unlock()
		})
	}
	wg.Wait()
	for {
		ids, err := b.store.EscalateDue(b.ctx, 3)
		wantOK(t, err)
		if len(ids) == 0 {
			break
		}
		got = append(got, ids...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("escalated %v, want each of %v once", got, want)
	}
}

func (s *suite) escalationInvalid(t *testing.T) {
	b := s.setup(t)
	for name, mod := range map[string]func(*store.NewRequestParams){
		"no reviewers": func(p *store.NewRequestParams) {
			p.Request.EscalateTo, p.Request.EscalateAfter = []string{"sre"}, time.Minute
		},
		"no delay": func(p *store.NewRequestParams) {
			p.Request.Reviewers, p.Request.EscalateTo = []string{"payments"}, []string{"sre"}
		},
		"a bad group": func(p *store.NewRequestParams) {
			p.Request.Reviewers, p.Request.EscalateTo, p.Request.EscalateAfter = []string{"payments"}, []string{"s\x00re"}, time.Minute
		},
	} {
		_, _, err := b.store.CreateRequest(b.ctx, b.params(mod))
		if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Errorf("%s: err = %v, want invalid_request", name, err)
		}
	}
}
