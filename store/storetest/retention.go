package storetest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/sequencer"
	"github.com/airlockhq/airlock/store"
)

// testRetention checks the purge of old payloads (store.Retention).
func (s *suite) testRetention(t *testing.T) {
	runAll(t, []test{
		{"a purge takes the payloads of requests decided long enough ago, and only those", s.purgeWhich},
		{"a purged request keeps its state, tool and decision, and says it was purged", s.purgeKeeps},
		{"a purge is bounded, and a request is purged once", s.purgeBounded},
		{"a purge never changes a leaf: events sequenced after it get the leaves they would have had", s.purgeLeaves},
	})
}

// retainFor is the age the suite's purges take.
const retainFor = time.Hour

// purge purges with age retainFor and limit limit.
func (b *bundle) purge(t *testing.T, limit int) []string {
	t.Helper()
	ids, err := b.store.PurgePayloads(b.ctx, store.PurgeParams{Age: retainFor, Limit: limit})
	wantOK(t, err)
	return ids
}

func (s *suite) purgeWhich(t *testing.T) {
	b := s.setup(t)
	expired := b.into(t, airlock.StateExpired) // leaves the clock at its deadline
	denied := b.into(t, airlock.StateDenied)
	cancelled := b.into(t, airlock.StateCancelled)
	claimed := b.into(t, airlock.StateApproved)
	if _, err := b.claim(claimed.ID); err != nil {
		t.Fatalf("claim: %v", err)
	}
	lapsed := b.into(t, airlock.StateApproved) // unclaimed; its approval lapses after validity
	// Unclaimed, and still claimable for longer than the retention.
	claimable := b.create(t)
	if _, err := b.store.Decide(b.ctx, store.DecideParams{ID: claimable.ID, Status: airlock.StateApproved, Validity: 3 * retainFor, Actor: reviewer}); err != nil {
		t.Fatalf("approve for 3h: %v", err)
	}
	pending := b.create(t, func(p *store.NewRequestParams) { p.Window = 10 * retainFor })

	b.clock.Advance(retainFor - time.Microsecond)
	if got := b.purge(t, 0); len(got) != 0 {
		t.Fatalf("a microsecond before the age, purge = %v; want none", got)
	}
	b.clock.Advance(time.Microsecond)
	got := b.purge(t, 0)
	// Oldest decision first: the expired request was decided at its
	// deadline, the others a moment later in the order made.
	want := []string{expired.ID, denied.ID, cancelled.ID, claimed.ID, lapsed.ID}
	if !slices.Equal(got, want) {
		t.Fatalf("purge at the age = %v; want %v (expired, denied, cancelled, claimed, lapsed), not the pending nor the claimable approval", got, want)
	}
	for _, id := range []string{pending.ID, claimable.ID} {
		if r := b.get(t, id); r.PurgedAt != nil || string(r.Arguments) != `{"cmd":"ls -la"}` {
			t.Fatalf("%s (%s) after a purge = purged %v, arguments %s; want kept", id, r.State, r.PurgedAt, r.Arguments)
		}
	}
	// The claimable approval goes once its approval has lapsed, and a
	// pending request never, however old.
	b.clock.Advance(2 * retainFor)
	if got := b.purge(t, 0); !slices.Equal(got, []string{claimable.ID}) {
		t.Fatalf("once its approval lapsed, purge = %v; want %s", got, claimable.ID)
	}
	b.clock.Advance(20 * retainFor) // the pending request expires on a read, not here
	if got := b.purge(t, 0); len(got) != 0 {
		t.Fatalf("purge with only a pending request left = %v; want none", got)
	}
	if r := b.get(t, pending.ID); r.PurgedAt != nil {
		t.Fatalf("a request read pending was purged at %s", r.PurgedAt)
	}
}

func (s *suite) purgeKeeps(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Context = json.RawMessage(`{"repo":"airlock"}`)
		p.Request.Preview = &airlock.Preview{Type: airlock.PreviewText, Content: "pushes to main"}
		p.Request.Reversibility = airlock.Partial
	})
	decided, err := b.deny(r.ID)
	wantOK(t, err)
	b.clock.Advance(retainFor)
	if got := b.purge(t, 0); !slices.Equal(got, []string{r.ID}) {
		t.Fatalf("purge = %v; want %s", got, r.ID)
	}
	got := b.get(t, r.ID)
	want := decided
	// The adapter's preview is a payload too; its reversibility stays.
	want.Arguments, want.AgentReasoning, want.Context, want.Preview = nil, "", nil, nil
	at := b.clock.Now().Truncate(time.Microsecond)
	want.PurgedAt = &at
	sameRequest(t, "a purged request", got, want)
	if got.Tool != r.Tool || got.State != airlock.StateDenied || got.Decision == nil || got.Decision.Note != "not today" {
		t.Fatalf("a purged request lost its tool, state or decision: %s", show(got))
	}
	// Its event says so, by the retention, in the request's state.
	evs := b.eventsOf(t, airlock.EventRequestPurged)
	if len(evs) != 1 || evs[0].RequestID != r.ID || evs[0].Actor != airlock.ActorRetention ||
		evs[0].State != airlock.StateDenied || evs[0].InstanceID != r.InstanceID || !evs[0].At.Equal(at) {
		t.Fatalf("request.purged events = %+v; want one for %s by %s at %s", evs, r.ID, airlock.ActorRetention, at)
	}
	// Lists read it purged too.
	list, _, err := b.store.ListRequests(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	if len(list) != 1 || list[0].PurgedAt == nil || list[0].Arguments != nil {
		t.Fatalf("the list has %s", show(list))
	}
	sums, _, err := b.store.ListRequestSummaries(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	if len(sums) != 1 || !sums[0].Purged || sums[0].ArgumentsHead != "" || !reflect.DeepEqual(sums[0], got.Summary()) {
		t.Fatalf("the summary is %s; want %s, purged", show(sums), show(got.Summary()))
	}
	// A replay of its creation returns it as it is: purged.
	again, created, err := b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) {
		p.Request.IdempotencyKey, p.Request.Fingerprint = r.IdempotencyKey, r.Fingerprint
		p.Request.Context = json.RawMessage(`{"repo":"airlock"}`)
		p.Request.Preview, p.Request.Reversibility = r.Preview, r.Reversibility
	}))
	if err != nil || created || again.ID != r.ID || again.PurgedAt == nil {
		t.Fatalf("a replay = %s created %v, %v; want the purged request", show(again), created, err)
	}
	if _, err := b.store.PurgePayloads(b.ctx, store.PurgeParams{}); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("a purge without an age = %v; want invalid_request", err)
	}
	if _, err := b.store.PurgePayloads(b.ctx, store.PurgeParams{Age: time.Hour, Limit: store.MaxPurgeBatch + 1}); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("a purge of %d = %v; want invalid_request", store.MaxPurgeBatch+1, err)
	}
}

func (s *suite) purgeBounded(t *testing.T) {
	b := s.setup(t)
	var made []string
	for range 5 {
		made = append(made, b.into(t, airlock.StateDenied).ID)
	}
	b.clock.Advance(retainFor)
	first := b.purge(t, 2)
	second := b.purge(t, 2)
	third := b.purge(t, 2)
	if all := slices.Concat(first, second, third); len(first) != 2 || len(second) != 2 || !slices.Equal(all, made) {
		t.Fatalf("purges of 2 = %v, %v, %v; want %v in that order", first, second, third, made)
	}
	if again := b.purge(t, 0); len(again) != 0 {
		t.Fatalf("a purge after all were purged = %v; want none", again)
	}
	if n := len(b.eventsOf(t, airlock.EventRequestPurged)); n != len(made) {
		t.Fatalf("%d request.purged events for %d purges", n, len(made))
	}
	// Payloads of a mebibyte each end a purge early (store.MaxPurgeBytes).
	big := `{"blob":"` + string(bytes.Repeat([]byte("x"), 1<<20)) + `"}`
	for range store.MaxPurgeBytes>>20 + 2 {
		r := b.create(t, func(p *store.NewRequestParams) { p.Request.Arguments = json.RawMessage(big) })
		if _, err := b.deny(r.ID); err != nil {
			t.Fatalf("deny: %v", err)
		}
	}
	b.clock.Advance(retainFor)
	if got := b.purge(t, 0); len(got) != store.MaxPurgeBytes>>20 {
		t.Fatalf("a purge of mebibyte arguments took %d; want %d (MaxPurgeBytes)", len(got), store.MaxPurgeBytes>>20)
	}
}

// payloadsOf are the digests of r's payloads, as its leaves carry them.
func payloadsOf(t *testing.T, r airlock.Request) *auditlog.Payloads {
	t.Helper()
	p, err := auditlog.RequestPayloads(r)
	wantOK(t, err)
	return &p
}

func (s *suite) purgeLeaves(t *testing.T) {
	b := s.setup(t)
	withContext := func(p *store.NewRequestParams) { p.Request.Context = json.RawMessage(`{"repo":"airlock"}`) }
	// early's events are in the tree before the purge; late's are not.
	early := b.into(t, airlock.StateApproved)
	early = b.get(t, early.ID)
	if _, err := b.claim(early.ID); err != nil {
		t.Fatalf("claim: %v", err)
	}
	sequenceAll(t, b)
	before := allLeaves(t, b.store)
	late := b.create(t, withContext)
	if _, err := b.deny(late.ID); err != nil {
		t.Fatalf("deny: %v", err)
	}
	b.clock.Advance(retainFor)
	if got := b.purge(t, 0); !slices.Equal(got, []string{early.ID, late.ID}) {
		t.Fatalf("purge = %v; want %s and %s", got, early.ID, late.ID)
	}
	// An event of a purged request after its purge.
	if _, err := b.store.ReportExecution(b.ctx, early.ID, airlock.ReportInput{Status: airlock.ExecSucceeded}, ownerA); err != nil {
		t.Fatalf("report: %v", err)
	}
	sequenceAll(t, b)
	after := allLeaves(t, b.store)
	for i, l := range before {
		if !bytes.Equal(after[i].Leaf, l.Leaf) {
			t.Fatalf("leaf %d changed with the purge:\n before %s\n after  %s", i, l.Leaf, after[i].Leaf)
		}
	}
	// Every leaf is the leaf of its event with its request's payloads as
	// they were before the purge.
	requests := map[string]airlock.Request{early.ID: early, late.ID: late}
	evs := b.events(t)
	if len(after) != len(evs) {
		t.Fatalf("%d leaves for %d events", len(after), len(evs))
	}
	for i, e := range evs {
		var p *auditlog.Payloads
		if e.RequestID != "" {
			p = payloadsOf(t, requests[e.RequestID])
		}
		want, err := auditlog.NewLeaf(e, p)
		wantOK(t, err)
		if after[i].EventID != e.ID || !bytes.Equal(after[i].Leaf, want) {
			t.Fatalf("leaf %d (event %d, %s of %s) = %s; want %s", i, e.ID, e.Type, e.RequestID, after[i].Leaf, want)
		}
	}
	if n := len(ofType(evs, airlock.EventRequestPurged)); n != 2 {
		t.Fatalf("%d request.purged events in the tree; want 2", n)
	}
	// The tree still verifies against a checkpoint of it.
	key, err := b.store.EnsureAuditKey(b.ctx, auditKey(t, "airlock.example/audit"))
	wantOK(t, err)
	cp, _, err := sequencer.Checkpoint(b.ctx, b.store, key, nil)
	wantOK(t, err)
	opened, err := auditlog.OpenCheckpoint(cp.Note, key.VKey)
	wantOK(t, err)
	entries := make([]auditlog.Entry, len(after))
	for i, l := range after {
		entries[i] = auditlog.Entry{Index: l.Index, Leaf: l.Leaf}
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(entries), opened, nil); err != nil {
		t.Fatalf("VerifyEntries after a purge: %v", err)
	}
	// The log itself says which leaves are of purged requests: every leaf
	// of early and late, and no other.
	var want []int64
	for i, e := range evs {
		if e.RequestID == early.ID || e.RequestID == late.ID {
			want = append(want, int64(i))
		}
	}
	if got, err := auditlog.PurgedLeaves(auditlog.Entries(entries)); err != nil || !slices.Equal(got, want) {
		t.Fatalf("PurgedLeaves = %v, %v; want %v", got, err, want)
	}
}
