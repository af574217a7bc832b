package storetest

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// testList checks filters, order and cursor pagination.
func (s *suite) testList(t *testing.T) {
	runAll(t, []test{
		{"filters, newest first", s.listFilters},
		{"a summary has everything a list shows", s.listSummaries},
		{"more follow exactly when more match", s.listMore},
		{"a page ends once its requests reach MaxBytes", s.listMaxBytes},
		{"cursor pagination", s.listCursor},
		{"default limit", s.listDefaultLimit},
	})
}

// listFixture sets up a bundle holding requests of two owners on three
// instances, of every kind and in every state. It returns the bundle, the
// requests newest first, and the second instance of the bundle's owner.
func (s *suite) listFixture(t *testing.T) (*bundle, []airlock.Request, airlock.Instance) {
	t.Helper()
	b := s.setup(t)
	a2 := b.instance(t, ownerA)
	bi := b.instance(t, ownerB)
	type row struct {
		inst  airlock.Instance
		tool  string
		kind  airlock.Kind
		state airlock.State
	}
	rows := []row{
		{b.inst, "shell.exec", airlock.KindToolCall, airlock.StatePending},
		{b.inst, "fs.write", airlock.KindToolCall, airlock.StateApproved},
		{a2, "shell.exec", airlock.KindToolCall, airlock.StateDenied},
		{bi, "shell.exec", airlock.KindToolCall, airlock.StatePending},
		{bi, "work_move", airlock.KindWorkChange, airlock.StateCancelled},
		{a2, "", airlock.KindAgentRequest, airlock.StatePending},
	}
	var all []airlock.Request
	for _, rw := range rows {
		r := b.create(t, func(p *store.NewRequestParams) {
			p.Request.InstanceID, p.Request.OwnerID = rw.inst.ID, rw.inst.OwnerID
			p.Request.Tool, p.Request.Kind = rw.tool, rw.kind
		})
		var err error
		switch rw.state {
		case airlock.StateApproved:
			_, err = b.approve(r.ID)
		case airlock.StateDenied:
			_, err = b.deny(r.ID)
		case airlock.StateCancelled:
			_, err = b.store.Cancel(b.ctx, r.ID, r.OwnerID)
		}
		wantOK(t, err)
		all = slices.Insert(all, 0, b.get(t, r.ID))
	}
	return b, all, a2
}

func (s *suite) listFilters(t *testing.T) {
	b, all, a2 := s.listFixture(t)
	pick := func(keep func(airlock.Request) bool) []string {
		var out []string
		for _, r := range all {
			if keep(r) {
				out = append(out, r.ID)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.RequestFilter
		want []string
	}{
		{"everything", store.RequestFilter{}, ids(all)},
		{"an owner's", store.RequestFilter{OwnerID: ownerA}, pick(func(r airlock.Request) bool { return r.OwnerID == ownerA })},
		{"pending", store.RequestFilter{State: airlock.StatePending}, pick(func(r airlock.Request) bool { return r.State == airlock.StatePending })},
		{"an instance's", store.RequestFilter{InstanceID: a2.ID}, pick(func(r airlock.Request) bool { return r.InstanceID == a2.ID })},
		{"a tool", store.RequestFilter{Tool: "shell.exec"}, pick(func(r airlock.Request) bool { return r.Tool == "shell.exec" })},
		{"a kind", store.RequestFilter{Kind: airlock.KindWorkChange}, pick(func(r airlock.Request) bool { return r.Kind == airlock.KindWorkChange })},
		{"combined", store.RequestFilter{OwnerID: ownerB, State: airlock.StatePending, Tool: "shell.exec"},
			pick(func(r airlock.Request) bool {
				return r.OwnerID == ownerB && r.State == airlock.StatePending && r.Tool == "shell.exec"
			})},
		{"nothing matches", store.RequestFilter{OwnerID: ownerB, State: airlock.StateDenied}, nil},
	} {
		got, _, err := b.store.ListRequests(b.ctx, tc.f)
		wantOK(t, err)
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("%s: ListRequests(%+v) = %v, want %v", tc.name, tc.f, ids(got), tc.want)
		}
		for _, r := range got {
			sameRequest(t, tc.name+": listed request", r, all[slices.Index(ids(all), r.ID)])
		}
		sums, more, err := b.store.ListRequestSummaries(b.ctx, tc.f)
		wantOK(t, err)
		if more || !slices.Equal(summaryIDs(sums), tc.want) {
			t.Errorf("%s: ListRequestSummaries(%+v) = %v, more %v; want %v, no more", tc.name, tc.f, summaryIDs(sums), more, tc.want)
		}
		for _, r := range sums {
			sameSummary(t, tc.name+": listed summary", r, all[slices.Index(ids(all), r.ID)].Summary())
		}
	}
	for _, f := range []store.RequestFilter{{State: "done"}, {Kind: "nope"}} {
		_, _, err := b.store.ListRequests(b.ctx, f)
		wantErr(t, err, airlock.CodeInvalidRequest, "")
		_, _, err = b.store.ListRequestSummaries(b.ctx, f)
		wantErr(t, err, airlock.CodeInvalidRequest, "")
	}
}

func (s *suite) listSummaries(t *testing.T) {
	b := s.setup(t)
	plain := b.create(t)
	asked := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Kind, p.Request.Tool, p.Request.Arguments = airlock.KindAgentRequest, "", nil
		p.Request.Title, p.Request.Description = "Which colour? «blue» 🔵", "a long description the list does not show"
		p.Request.SessionID = "ses_abc"
		p.Request.Question = &airlock.Question{Choices: []string{"blue 🔵", "green"}}
	})
	command := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Kind, p.Request.Tool = airlock.KindWorkChange, "work_move"
		p.Request.Context = json.RawMessage(`{"observed":true}`)
		p.Request.Proposal = &airlock.Proposal{Mode: "command", Command: &airlock.Command{
			Method: "work_move", Input: json.RawMessage(`{"itemId":"wi_1","columnKey":"done"}`), Observed: json.RawMessage(`{"from":"doing"}`)}}
	})
	_, err := b.store.Decide(b.ctx, store.DecideParams{ID: asked.ID, Status: airlock.StateApproved, Note: "fine — ✅",
		Answer: "blue 🔵", Validity: validity, Actor: reviewer})
	wantOK(t, err)
	_, err = b.deny(plain.ID)
	wantOK(t, err)
	sums, more, err := b.store.ListRequestSummaries(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	want := []airlock.Request{b.get(t, command.ID), b.get(t, asked.ID), b.get(t, plain.ID)}
	if more || len(sums) != len(want) {
		t.Fatalf("summaries = %v, more %v; want %v, no more", summaryIDs(sums), more, ids(want))
	}
	for i, r := range want {
		sameSummary(t, "summary of "+r.ID, sums[i], r.Summary())
	}
	if sums[0].CommandMethod != "work_move" || sums[1].Question == nil || sums[1].Decision == nil || sums[1].Decision.Answer != "blue 🔵" ||
		sums[2].Decision == nil || sums[2].Decision.Note != "not today" {
		t.Fatalf("summaries lost what a list shows: %s", show(sums))
	}
}

func (s *suite) listMore(t *testing.T) {
	b := s.setup(t)
	for range 7 {
		b.create(t)
	}
	for _, tc := range []struct {
		limit int
		sizes []int
	}{
		{3, []int{3, 3, 1}},
		{7, []int{7}},
		{8, []int{7}},
		{1, []int{1, 1, 1, 1, 1, 1, 1}},
	} {
		f := store.RequestFilter{Limit: tc.limit}
		full := pageLens(t, b, f, b.store.ListRequests, func(r airlock.Request) int64 { return r.Seq })
		sums := pageLens(t, b, f, b.store.ListRequestSummaries, func(r airlock.RequestSummary) int64 { return r.Seq })
		if !slices.Equal(full, tc.sizes) || !slices.Equal(sums, tc.sizes) {
			t.Errorf("limit %d: pages of %v (summaries %v), want %v, the last one saying no more follow", tc.limit, full, sums, tc.sizes)
		}
	}
}

func (s *suite) listMaxBytes(t *testing.T) {
	b := s.setup(t)
	// Six requests of 10,000 stored bytes each, in a different field
	// each time; the newest in two-byte characters, so that bytes,
	// not characters, are counted.
	const size = 10_000
	pad := func(n int) string { return strings.Repeat("x", n) }
	doc := func(n int) json.RawMessage { return json.RawMessage(`"` + pad(n-2) + `"`) }
	var want []string // newest first
	for _, mod := range []func(*store.NewRequestParams){
		func(p *store.NewRequestParams) { p.Request.Arguments = doc(size - len(p.Request.AgentReasoning)) },
		func(p *store.NewRequestParams) {
			p.Request.Arguments, p.Request.AgentReasoning, p.Request.Context = nil, "", doc(size)
		},
		func(p *store.NewRequestParams) { p.Request.Arguments, p.Request.AgentReasoning = nil, pad(size) },
		func(p *store.NewRequestParams) {
			p.Request.Arguments, p.Request.AgentReasoning, p.Request.Description = nil, "", pad(size)
		},
		func(p *store.NewRequestParams) {
			p.Request.Arguments, p.Request.AgentReasoning = nil, ""
			p.Request.Proposal = &airlock.Proposal{Mode: "command", Command: &airlock.Command{
				Method: "work_move", Input: doc(size - 2), Observed: json.RawMessage(`{}`)}}
		},
		func(p *store.NewRequestParams) {
			p.Request.AgentReasoning = ""
			p.Request.Arguments = json.RawMessage(`"` + strings.Repeat("é", (size-2)/2) + `"`)
		},
	} {
		r := b.create(t, mod)
		if n := r.StoredBytes(); n != size {
			t.Fatalf("test request holds %d bytes, want %d", n, size)
		}
		want = slices.Insert(want, 0, r.ID)
	}
	for _, tc := range []struct {
		maxBytes, limit int
		pages           []int
	}{
		{0, 50, []int{6}},
		{2 * size, 50, []int{2, 2, 2}},          // the third would start at the budget
		{2*size + 1, 50, []int{3, 3}},           // it starts just under it
		{size / 2, 50, []int{1, 1, 1, 1, 1, 1}}, // larger than the budget: each alone
		{100 * size, 4, []int{4, 2}},            // the limit first
		{3*size + 1, 3, []int{3, 3}},            // both at once
	} {
		var got []string
		var pages []int
		f := store.RequestFilter{Limit: tc.limit, MaxBytes: tc.maxBytes}
		for range 10 {
			rs, more, err := b.store.ListRequests(b.ctx, f)
			wantOK(t, err)
			pages = append(pages, len(rs))
			for _, r := range rs {
				sameRequest(t, "listed on a cut page", r, b.get(t, r.ID))
			}
			got = append(got, ids(rs)...)
			if !more {
				break
			}
			f.BeforeSeq = rs[len(rs)-1].Seq
		}
		if !slices.Equal(pages, tc.pages) || !slices.Equal(got, want) {
			t.Errorf("MaxBytes %d, Limit %d: pages of %v listing %v; want %v listing %v", tc.maxBytes, tc.limit, pages, got, tc.pages, want)
		}
	}
	sums, more, err := b.store.ListRequestSummaries(b.ctx, store.RequestFilter{MaxBytes: 1})
	wantOK(t, err)
	if more || !slices.Equal(summaryIDs(sums), want) {
		t.Errorf("summaries with MaxBytes 1 = %v, more %v; want all of %v: summaries ignore it", summaryIDs(sums), more, want)
	}
}

func (s *suite) listCursor(t *testing.T) {
	b := s.setup(t)
	var created []string
	for range 7 {
		created = slices.Insert(created, 0, b.create(t).ID)
	}
	var paged []string
	f := store.RequestFilter{Limit: 3}
	for page := 0; ; page++ {
		rs, _, err := b.store.ListRequests(b.ctx, f)
		wantOK(t, err)
		if len(rs) > 3 {
			t.Fatalf("page %d has %d requests, want at most 3", page, len(rs))
		}
		if len(rs) == 0 {
			break
		}
		paged = append(paged, ids(rs)...)
		f.BeforeSeq = rs[len(rs)-1].Seq
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if !slices.Equal(paged, created) {
		t.Fatalf("pages = %v, want %v", paged, created)
	}
}

func (s *suite) listDefaultLimit(t *testing.T) {
	b := s.setup(t)
	for range 55 {
		b.create(t)
	}
	for _, limit := range []int{0, -1} {
		rs, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{Limit: limit})
		wantOK(t, err)
		if len(rs) != 50 {
			t.Fatalf("Limit %d listed %d, want the default of 50", limit, len(rs))
		}
	}
	rs, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{Limit: 100000})
	wantOK(t, err)
	if len(rs) != 55 {
		t.Fatalf("a large limit listed %d, want all 55", len(rs))
	}
}

// summaryIDs returns the IDs of rs, in order.
func summaryIDs(rs []airlock.RequestSummary) []string {
	return mapped(rs, func(r airlock.RequestSummary) string { return r.ID })
}

// sameSummary fails t unless got and want are identical.
func sameSummary(t *testing.T, what string, got, want airlock.RequestSummary) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, show(got), show(want))
	}
}

// pageLens follows a list from f page by page until a page says no more
// follow, and returns the pages' lengths.
func pageLens[T any](t *testing.T, b *bundle, f store.RequestFilter,
	list func(context.Context, store.RequestFilter) ([]T, bool, error), seq func(T) int64,
) []int {
	t.Helper()
	var lens []int
	for range 20 {
		rs, more, err := list(b.ctx, f)
		wantOK(t, err)
		lens = append(lens, len(rs))
		if !more {
			return lens
		}
		f.BeforeSeq = seq(rs[len(rs)-1])
	}
	t.Fatalf("pages of %v and still more: the list does not end", lens)
	return nil
}
