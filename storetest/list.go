package storetest

import (
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
)

// testList checks filters, order and cursor pagination.
func (s *suite) testList(t *testing.T) {
	t.Run("filters, newest first", func(t *testing.T) {
		t.Parallel()
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
		var all []airlock.Request // newest first
		for _, rw := range rows {
			r := b.create(t, func(p *airlock.NewRequestParams) {
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
				_, err = b.cancel(r.ID)
			}
			wantOK(t, err)
			all = slices.Insert(all, 0, b.get(t, r.ID))
		}
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
			f    airlock.RequestFilter
			want []string
		}{
			{"everything", airlock.RequestFilter{}, ids(all)},
			{"an owner's", airlock.RequestFilter{OwnerID: ownerA}, pick(func(r airlock.Request) bool { return r.OwnerID == ownerA })},
			{"pending", airlock.RequestFilter{State: airlock.StatePending}, pick(func(r airlock.Request) bool { return r.State == airlock.StatePending })},
			{"an instance's", airlock.RequestFilter{InstanceID: a2.ID}, pick(func(r airlock.Request) bool { return r.InstanceID == a2.ID })},
			{"a tool", airlock.RequestFilter{Tool: "shell.exec"}, pick(func(r airlock.Request) bool { return r.Tool == "shell.exec" })},
			{"a kind", airlock.RequestFilter{Kind: airlock.KindWorkChange}, pick(func(r airlock.Request) bool { return r.Kind == airlock.KindWorkChange })},
			{"combined", airlock.RequestFilter{OwnerID: ownerB, State: airlock.StatePending, Tool: "shell.exec"},
				pick(func(r airlock.Request) bool {
					return r.OwnerID == ownerB && r.State == airlock.StatePending && r.Tool == "shell.exec"
				})},
			{"nothing matches", airlock.RequestFilter{OwnerID: ownerB, State: airlock.StateDenied}, nil},
		} {
			got, err := b.store.ListRequests(b.ctx, tc.f)
			wantOK(t, err)
			if !slices.Equal(ids(got), tc.want) {
				t.Errorf("%s: ListRequests(%+v) = %v, want %v", tc.name, tc.f, ids(got), tc.want)
			}
			for _, r := range got {
				sameRequest(t, tc.name+": listed request", r, all[slices.Index(ids(all), r.ID)])
			}
		}
		for _, f := range []airlock.RequestFilter{{State: "done"}, {Kind: "nope"}} {
			_, err := b.store.ListRequests(b.ctx, f)
			wantErr(t, err, airlock.CodeInvalidRequest, "")
		}
	})

	t.Run("cursor pagination", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t)
		var created []string
		for range 7 {
			created = slices.Insert(created, 0, b.create(t).ID)
		}
		var paged []string
		f := airlock.RequestFilter{Limit: 3}
		for page := 0; ; page++ {
			rs, err := b.store.ListRequests(b.ctx, f)
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
	})

	t.Run("default limit", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t)
		for range 55 {
			b.create(t)
		}
		for _, limit := range []int{0, -1} {
			rs, err := b.store.ListRequests(b.ctx, airlock.RequestFilter{Limit: limit})
			wantOK(t, err)
			if len(rs) != 50 {
				t.Fatalf("Limit %d listed %d, want the default of 50", limit, len(rs))
			}
		}
		rs, err := b.store.ListRequests(b.ctx, airlock.RequestFilter{Limit: 100000})
		wantOK(t, err)
		if len(rs) != 55 {
			t.Fatalf("a large limit listed %d, want all 55", len(rs))
		}
	})
}
