package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// testReviewers checks reviewer links and Slack messages.
func (s *suite) testReviewers(t *testing.T) {
	runAll(t, []test{
		{"links", s.reviewerLinks},
		{"one Slack user, principals racing", s.slackUserRace},
		{"slack messages", s.slackMessages},
	})
}

func (s *suite) reviewerLinks(t *testing.T) {
	b := s.setup(t)
	at := b.clock.Now().Truncate(time.Microsecond)
	l, err := b.store.PutReviewerLink(b.ctx, airlock.ReviewerLink{Principal: "alice", SlackUserID: "U0ALICE", Email: "alice@example.com", UpdatedBy: admin})
	wantOK(t, err)
	if l.Principal != "alice" || l.SlackUserID != "U0ALICE" || l.Email != "alice@example.com" || !l.UpdatedAt.Equal(at) || l.UpdatedBy != admin {
		t.Fatalf("PutReviewerLink = %+v", l)
	}
	_, err = b.store.PutReviewerLink(b.ctx, airlock.ReviewerLink{Principal: "bob", Email: "bob@example.com", UpdatedBy: admin})
	wantOK(t, err)
	got, err := b.store.ReviewerLinkBySlackUser(b.ctx, "U0ALICE")
	wantOK(t, err)
	if got != l {
		t.Fatalf("ReviewerLinkBySlackUser = %+v, want %+v", got, l)
	}
	_, err = b.store.ReviewerLinkBySlackUser(b.ctx, "U0NOBODY")
	wantErr(t, err, airlock.CodeNotFound, "")

	// One Slack user decides as one principal.
	_, err = b.store.PutReviewerLink(b.ctx, airlock.ReviewerLink{Principal: "bob", SlackUserID: "U0ALICE", UpdatedBy: admin})
	wantErr(t, err, airlock.CodeInvalidRequest, "")
	// A put replaces the link: the email left out is cleared.
	b.clock.Advance(time.Second)
	l, err = b.store.PutReviewerLink(b.ctx, airlock.ReviewerLink{Principal: "alice", SlackUserID: "U0ALICE2", UpdatedBy: "tok_admin2"})
	wantOK(t, err)
	if l.Email != "" || l.SlackUserID != "U0ALICE2" || l.UpdatedBy != "tok_admin2" || !l.UpdatedAt.Equal(at.Add(time.Second)) {
		t.Fatalf("replaced link = %+v", l)
	}
	_, err = b.store.ReviewerLinkBySlackUser(b.ctx, "U0ALICE")
	wantErr(t, err, airlock.CodeNotFound, "")
	// Now the old Slack user is free for bob.
	_, err = b.store.PutReviewerLink(b.ctx, airlock.ReviewerLink{Principal: "bob", SlackUserID: "U0ALICE", Email: "bob@example.com", UpdatedBy: admin})
	wantOK(t, err)

	list, err := b.store.ListReviewerLinks(b.ctx)
	wantOK(t, err)
	if len(list) != 2 || list[0].Principal != "alice" || list[1].Principal != "bob" || list[1].SlackUserID != "U0ALICE" {
		t.Fatalf("ListReviewerLinks = %+v", list)
	}
	// Clearing both removes the link; removing it again is not_found.
	_, err = b.store.PutReviewerLink(b.ctx, airlock.ReviewerLink{Principal: "alice", UpdatedBy: admin})
	wantOK(t, err)
	_, err = b.store.PutReviewerLink(b.ctx, airlock.ReviewerLink{Principal: "alice", UpdatedBy: admin})
	wantErr(t, err, airlock.CodeNotFound, "")
	list, err = b.store.ListReviewerLinks(b.ctx)
	wantOK(t, err)
	if len(list) != 1 || list[0].Principal != "bob" {
		t.Fatalf("after removal ListReviewerLinks = %+v", list)
	}
	evs, err := b.store.ListEvents(b.ctx, 0, 1000)
	wantOK(t, err)
	n := 0
	for _, ev := range evs {
		if ev.Type == airlock.EventReviewerLinked {
			n++
		}
	}
	if n != 5 { // alice, bob, alice, bob, alice removed; refusals append nothing
		t.Fatalf("%d reviewer.linked events, want 5", n)
	}
}

func (s *suite) slackUserRace(t *testing.T) {
	b := s.setup(t)
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		oks  int
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			_, err := b.store.PutReviewerLink(b.ctx, airlock.ReviewerLink{Principal: "p" + string(rune('a'+i)), SlackUserID: "U0SHARED", UpdatedBy: admin})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				oks++
			} else if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if oks != 1 || len(errs) > 0 {
		t.Fatalf("%d principals linked one Slack user, want 1; other errors: %v", oks, errs)
	}
}

func (s *suite) slackMessages(t *testing.T) {
	b := s.setup(t)
	_, err := b.store.GetSlackMessage(b.ctx, "apr_x")
	wantErr(t, err, airlock.CodeNotFound, "")
	_, _, err = b.store.PutSlackMessage(b.ctx, airlock.SlackMessage{RequestID: "apr_x"})
	wantErr(t, err, airlock.CodeInvalidRequest, "")

	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		seen    = map[string]bool{}
	)
	for i := range n {
		wg.Go(func() {
			m, ok, err := b.store.PutSlackMessage(b.ctx, airlock.SlackMessage{RequestID: "apr_x", Channel: "C1", TS: "1700000000.00000" + string(rune('0'+i))})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			seen[m.TS] = true
			if ok {
				created++
			}
		})
	}
	wg.Wait()
	if created != 1 || len(seen) != 1 {
		t.Fatalf("%d puts recorded a message and they saw %d different ones; want 1 and 1", created, len(seen))
	}
	m, err := b.store.GetSlackMessage(b.ctx, "apr_x")
	wantOK(t, err)
	if !seen[m.TS] || m.Channel != "C1" || !m.PostedAt.Equal(b.clock.Now().Truncate(time.Microsecond)) {
		t.Fatalf("GetSlackMessage = %+v", m)
	}
}
