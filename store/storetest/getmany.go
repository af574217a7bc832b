package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testGetRequests checks GetRequests, the read that answers the
// long-polls one change wakes: it reads what GetRequest reads, of every
// ID it is given, however many statements that takes.
func (s *suite) testGetRequests(t *testing.T) {
	b := s.setup(t)
	pending := b.create(t)
	denied := b.create(t)
	_, err := b.deny(denied.ID)
	wantOK(t, err)
	voted := b.create(t, quorum(2))
	_, err = b.vote(voted.ID, "ada", airlock.StateApproved)
	wantOK(t, err)
	want := []airlock.Request{b.get(t, pending.ID), b.get(t, denied.ID), b.get(t, voted.ID)}

	// More IDs than a statement reads, most of them missing, the real
	// ones among them twice and at both ends.
	ids := []string{pending.ID, denied.ID}
	for i := range store.MaxGetRequests + 10 {
		ids = append(ids, fmt.Sprintf("%s%06d", airlock.PrefixRequest, i))
	}
	ids = append(ids, voted.ID, pending.ID)
	got, err := b.store.GetRequests(b.ctx, ids)
	wantOK(t, err)
	if len(got) != len(want) {
		t.Fatalf("GetRequests of %d IDs, 3 of them real = %s; want the 3, each once", len(ids), show(got))
	}
	for _, w := range want {
		i := slices.IndexFunc(got, func(r airlock.Request) bool { return r.ID == w.ID })
		if i < 0 {
			t.Fatalf("GetRequests left out %s (%s)", w.ID, w.State)
		}
		sameRequest(t, "read by GetRequests, then by GetRequest", got[i], w)
	}
	if len(got[slices.IndexFunc(got, func(r airlock.Request) bool { return r.ID == voted.ID })].Votes) != 1 {
		t.Fatalf("GetRequests read %s without its vote", voted.ID)
	}

	none, err := b.store.GetRequests(b.ctx, []string{"req_missing"})
	wantOK(t, err)
	if len(none) != 0 {
		t.Fatalf("GetRequests of a missing ID = %s; want none, and no error", show(none))
	}
	none, err = b.store.GetRequests(b.ctx, nil)
	if err != nil || len(none) != 0 {
		t.Fatalf("GetRequests of no IDs = %s, %v; want none", show(none), err)
	}
}
