package provider

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestHeavyReadBounds checks the slots of heavy reads: a token has at most
// MaxHeavyReadsPerToken, the process at most MaxHeavyReads; beyond, the
// read is refused with rate_limited, and a slot given back (once, however
// often release is called) can be taken again.
func TestHeavyReadBounds(t *testing.T) {
	t.Parallel()
	b := setup(t, options{heavyReads: 3, heavyPerToken: 2})
	take := func(c airlock.Caller) func() {
		t.Helper()
		release, err := b.svc.HeavyRead(c)
		if err != nil {
			t.Fatalf("HeavyRead(%s) with slots free: %v", c.Name, err)
		}
		return release
	}
	refused := func(c airlock.Caller, says string) {
		t.Helper()
		release, err := b.svc.HeavyRead(c)
		wantCode(t, err, airlock.CodeRateLimited, "")
		if release != nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "retry after 1 s") {
			t.Fatalf("HeavyRead(%s) refused with %q; want it to say %q and when to retry", c.Name, err, says)
		}
	}
	first, second := take(b.agent), take(b.agent)
	refused(b.agent, "this token already has 2")
	third := take(b.reviewer)
	refused(b.selfReviewer, "the server is serving 3")
	if n := b.svc.HeavyReads(); n != 3 {
		t.Fatalf("HeavyReads() = %d, want 3", n)
	}
	first()
	first() // a second release gives back nothing more
	if n := b.svc.HeavyReads(); n != 2 {
		t.Fatalf("after one release, HeavyReads() = %d, want 2", n)
	}
	fourth := take(b.selfReviewer)
	refused(b.reviewer, "the server is serving 3")
	second()
	fifth := take(b.agent)
	for _, release := range []func(){third, fourth, fifth} {
		release()
	}
	if n := b.svc.HeavyReads(); n != 0 {
		t.Fatalf("after every release, HeavyReads() = %d, want 0", n)
	}
}

// TestListPageBytes checks that a page of full requests ends, with a
// cursor, once its requests hold ListPageBytes, and that every request is
// still listed once, while summaries are never cut for their size.
func TestListPageBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, options{pageBytes: 25_000})
	var want []string // newest first
	for range 5 {
		in := call("10m")
		in.AgentReasoning = ""
		in.Arguments = json.RawMessage(`{"blob":"` + strings.Repeat("b", 10_000-11) + `"}`)
		r, _, err := b.svc.CreateRequest(t.Context(), b.agent, b.inst.ID, newKey(), in)
		if err != nil {
			t.Fatal(err)
		}
		want = slices.Insert(want, 0, r.ID)
	}
	var (
		got   []string
		pages []int
	)
	q := ListQuery{Limit: 50}
	for range 5 {
		p, err := b.svc.ListRequests(t.Context(), b.reviewer, q)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, len(p.Requests))
		for _, r := range p.Requests {
			got = append(got, r.ID)
		}
		if q.Cursor = p.NextCursor; q.Cursor == "" {
			break
		}
	}
	if !slices.Equal(pages, []int{3, 2}) || !slices.Equal(got, want) {
		t.Fatalf("pages of %v listing %v; want pages of [3 2] listing %v", pages, got, want)
	}
	sp, err := b.svc.ListSummaries(t.Context(), b.reviewer, ListQuery{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, r := range sp.Summaries {
		sums = append(sums, r.ID)
	}
	if sp.NextCursor != "" || !slices.Equal(sums, want) {
		t.Fatalf("summaries %v (cursor %q); want all of %v on one page", sums, sp.NextCursor, want)
	}
	if sp, err := b.svc.ListSummaries(t.Context(), b.otherAgent, ListQuery{}); err != nil || len(sp.Summaries) != 0 {
		t.Fatalf("another agent lists %d summaries (%v), want none", len(sp.Summaries), err)
	}
	if _, err := b.svc.ListSummaries(t.Context(), b.reviewer, ListQuery{Limit: MaxPageSize + 1}); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("summaries beyond MaxPageSize: %v, want invalid_request", err)
	}
}

// TestHeavyReadsOver checks that HeavyReadsOver is told each time the last
// heavy read in progress ends, and only then: the server hands memory back
// to the system at those moments.
func TestHeavyReadsOver(t *testing.T) {
	t.Parallel()
	over := 0
	h := newHeavyReads(3, 2, nil, func() { over++ })
	take := func(token string) func() {
		t.Helper()
		release, err := h.acquire(token)
		if err != nil {
			t.Fatal(err)
		}
		return release
	}
	first, second := take("a"), take("b")
	first()
	first() // a second release gives back nothing, and ends nothing
	if over != 0 {
		t.Fatalf("told %d times while a read was still in progress; want 0", over)
	}
	second()
	if over != 1 {
		t.Fatalf("told %d times after the last read ended; want 1", over)
	}
	take("a")()
	if over != 2 {
		t.Fatalf("told %d times after the next read ended; want 2", over)
	}
}
