package storetest

import (
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testReviewClaims checks what a reviewer's client claims it showed them
// (Decision.Review, Vote.Review): stored by the write that decides, with
// the decision, read back as written on every path that decides, kept on
// each vote of a quorum, and absent when none was sent.
func (s *suite) testReviewClaims(t *testing.T) {
	claim := &airlock.ReviewClaim{SeenFraction: 0.375, SecondsOpen: 42}
	same := func(t *testing.T, what string, got *airlock.ReviewClaim, want *airlock.ReviewClaim) {
		t.Helper()
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Fatalf("%s: review %+v, want %+v", what, got, want)
		}
	}
	runAll(t, []test{
		{"an approval and a denial keep their claim; none stays none", func(t *testing.T) {
			b := s.setup(t)
			for _, tc := range []struct {
				status airlock.State
				review *airlock.ReviewClaim
			}{{airlock.StateApproved, claim}, {airlock.StateDenied, claim}, {airlock.StateApproved, nil}} {
				r := b.create(t)
				p := store.DecideParams{ID: r.ID, Status: tc.status, Actor: reviewer, Review: tc.review}
				if tc.status == airlock.StateApproved {
					p.Validity = validity
				}
				got, err := b.store.Decide(b.ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				same(t, "as decided", got.Decision.Review, tc.review)
				same(t, "read back", b.get(t, r.ID).Decision.Review, tc.review)
			}
		}},
		{"each vote keeps its claim; the deciding vote's is the decision's", func(t *testing.T) {
			b := s.setup(t)
			r := b.create(t, quorum(2))
			first := &airlock.ReviewClaim{SeenFraction: 1, SecondsOpen: 9}
			for i, v := range []struct {
				principal string
				review    *airlock.ReviewClaim
			}{{"erin", first}, {"carol", claim}} {
				p := store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: validity, Actor: "tok_" + v.principal,
					Principal: v.principal, Groups: []string{"payments"}, Review: v.review}
				got, err := b.store.Decide(b.ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 && (got.State != airlock.StatePending || got.Decision != nil) {
					t.Fatalf("after one vote: %s", show(got))
				}
			}
			got := b.get(t, r.ID)
			if got.State != airlock.StateApproved || len(got.Votes) != 2 {
				t.Fatalf("after two votes: %s", show(got))
			}
			same(t, "first vote", got.Votes[0].Review, first)
			same(t, "second vote", got.Votes[1].Review, claim)
			same(t, "decision", got.Decision.Review, claim)
		}},
		{"an edit's denial and approval keep the editor's claim", func(t *testing.T) {
			b := s.setup(t)
			r := b.create(t)
			orig, edited, err := b.edit(r.ID, func(p *store.EditParams) { p.Review = claim })
			if err != nil {
				t.Fatal(err)
			}
			same(t, "original", b.get(t, orig.ID).Decision.Review, claim)
			same(t, "edited", b.get(t, edited.ID).Decision.Review, claim)
		}},
	})
}
