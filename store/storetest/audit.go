package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/sequencer"
	"github.com/airlockhq/airlock/store"
)

// testAuditLog checks the verifiable audit log's tree, checkpoints, key
// and sequencer lease (store.AuditLog).
func (s *suite) testAuditLog(t *testing.T) {
	runAll(t, []test{
		{"the first audit key stays the one", s.auditKeyFirstWins},
		{"one sequencer holds the lease at a time, another takes it once it expires", s.auditLease},
		{"unsequenced events are those without a leaf, with their request's payloads", s.auditUnsequenced},
		{"a page below the largest event, which has a leaf, settles up to it", s.auditUnsequencedBelowLast},
		{"a sequencer's kept edge gone stale is refused, forgotten and read again", s.auditStaleEdge},
		{"an append from a wrong size, by a non-holder or of a sequenced event is refused", s.auditAppendRefused},
		{"the stored tree is the tree of its leaves, and its checkpoint verifies them", s.auditTree},
		{"a request's leaves are its events' leaves, in index order", s.auditRequestLeaves},
		{"a checkpoint stored queues its deliveries once, to endpoints that exist", s.auditCheckpointDeliveries},
	})
}

// sequencerTTL is the lease the suite's sequencers take.
const sequencerTTL = 30 * time.Second

// auditKey returns a new note key named origin.
func auditKey(t *testing.T, origin string) store.AuditKey {
	t.Helper()
	skey, vkey, err := auditlog.GenerateKey(origin)
	wantOK(t, err)
	return store.AuditKey{Origin: origin, SKey: skey, VKey: vkey}
}

func (s *suite) auditKeyFirstWins(t *testing.T) {
	b := s.setup(t)
	if k, err := b.store.AuditKey(b.ctx); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("AuditKey of a new store = %s, %v; want not_found", k, err)
	}
	first, second := auditKey(t, "airlock.example/audit"), auditKey(t, "other.example/audit")
	got, err := b.store.EnsureAuditKey(b.ctx, first)
	wantOK(t, err)
	if got.Origin != first.Origin || got.SKey != first.SKey || got.VKey != first.VKey || !got.CreatedAt.Equal(b.clock.Now().Truncate(time.Microsecond)) {
		t.Fatalf("EnsureAuditKey = %#v created %s; want the candidate, created now", got, got.CreatedAt)
	}
	again, err := b.store.EnsureAuditKey(b.ctx, second)
	wantOK(t, err)
	if again.VKey != first.VKey || again.SKey != first.SKey {
		t.Fatalf("a second EnsureAuditKey = %s; want the first key %s", again, first)
	}
	if read, err := b.store.AuditKey(b.ctx); err != nil || read.VKey != first.VKey || read.SKey != first.SKey {
		t.Fatalf("AuditKey = %s, %v; want %s", read, err, first)
	}
	if fmt.Sprintf("%v %#v %s", got, got, got) != strings3(got.String()) {
		t.Fatalf("an audit key prints its signer key")
	}
	if _, err := b.store.EnsureAuditKey(b.ctx, store.AuditKey{Origin: "x"}); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("EnsureAuditKey without keys = %v; want invalid_request", err)
	}
}

// strings3 is s three times, spaced, as fmt prints a key by %v, %#v and %s.
func strings3(s string) string { return s + " " + s + " " + s }

func (s *suite) auditLease(t *testing.T) {
	b := s.setup(t)
	acquire := func(holder string, want bool) {
		t.Helper()
		got, err := b.store.AcquireSequencer(b.ctx, holder, time.Minute)
		wantOK(t, err)
		if got != want {
			t.Fatalf("AcquireSequencer(%s) at %s = %v; want %v", holder, b.clock.Now(), got, want)
		}
	}
	acquire("seq_a", true)
	acquire("seq_b", false)
	b.clock.Advance(59 * time.Second)
	acquire("seq_a", true) // renewed: a minute from now
	b.clock.Advance(59 * time.Second)
	acquire("seq_b", false)
	b.clock.Advance(time.Second)
	acquire("seq_b", true) // expired exactly now
	acquire("seq_a", false)
	acquire("seq_b", true)
	if _, err := b.store.AcquireSequencer(b.ctx, "", time.Minute); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("AcquireSequencer without a holder = %v; want invalid_request", err)
	}
}

func (s *suite) auditUnsequenced(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, func(p *store.NewRequestParams) {
		p.Request.Context = []byte(`{"repo":"airlock"}`)
	})
	evs := b.events(t) // instance.created, request.created
	page, err := b.store.UnsequencedEvents(b.ctx, 0, 100)
	wantOK(t, err)
	if got := unsequencedIDs(page); !slices.Equal(got, eventIDs(evs)) {
		t.Fatalf("UnsequencedEvents of a new log = %v; want every event %v", got, eventIDs(evs))
	}
	last := evs[len(evs)-1].ID
	if page.Next != last {
		t.Fatalf("Next = %d; want the last event %d", page.Next, last)
	}
	for _, u := range page.Events {
		if u.Event.RequestID == "" {
			if u.Request != nil {
				t.Fatalf("event %d without a request has request %v", u.Event.ID, u.Request)
			}
			continue
		}
		q := u.Request
		if q == nil || q.ID != r.ID || q.Tool != r.Tool || string(q.Arguments) != string(r.Arguments) ||
			q.AgentReasoning != r.AgentReasoning || string(q.Context) != `{"repo":"airlock"}` {
			t.Fatalf("event %d's request = %+v; want %s's tool, arguments, reasoning and context", u.Event.ID, q, r.ID)
		}
		if u.Event.UID == "" || u.Event.Type != airlock.EventRequestCreated || u.Event.At.IsZero() {
			t.Fatalf("event %d = %+v; want request.created with its uid and time", u.Event.ID, u.Event)
		}
	}
	// A full page says how far it went.
	one, err := b.store.UnsequencedEvents(b.ctx, 0, 1)
	wantOK(t, err)
	if len(one.Events) != 1 || one.Next != evs[0].ID {
		t.Fatalf("a page of 1 = %v, next %d; want event %d, next %d", unsequencedIDs(one), one.Next, evs[0].ID, evs[0].ID)
	}
	// Sequence the first event only: it is no longer unsequenced.
	holder := sequence(t, b, 0, 1)
	page, err = b.store.UnsequencedEvents(b.ctx, 0, 100)
	wantOK(t, err)
	if got := unsequencedIDs(page); !slices.Equal(got, eventIDs(evs[1:])) {
		t.Fatalf("after sequencing event %d, unsequenced = %v; want %v", evs[0].ID, got, eventIDs(evs[1:]))
	}
	next, n, err := sequencer.Step(b.ctx, b.store, holder, 0, 100)
	wantOK(t, err)
	if n != len(evs)-1 || next != last {
		t.Fatalf("Step = next %d, appended %d; want %d, %d", next, n, last, len(evs)-1)
	}
	if page, err = b.store.UnsequencedEvents(b.ctx, 0, 100); err != nil || len(page.Events) != 0 || page.Next != last {
		t.Fatalf("once all are sequenced, UnsequencedEvents = %v next %d, %v; want none, next %d", unsequencedIDs(page), page.Next, err, last)
	}
	if _, err := b.approve(r.ID); err != nil {
		t.Fatalf("approve: %v", err)
	}
	page, err = b.store.UnsequencedEvents(b.ctx, last, 100)
	wantOK(t, err)
	if len(page.Events) != 1 || page.Events[0].Event.Type != airlock.EventRequestApproved || page.Events[0].Request == nil {
		t.Fatalf("after an approval, unsequenced = %v; want its request.approved with the request", unsequencedIDs(page))
	}
}

// auditUnsequencedBelowLast: with the largest event in the tree and an
// earlier one not, a page holds the earlier one and settles up to the
// largest (SQLite reads that from the page's own statement, with no read
// of the largest event ID of its own: sqlcore.AuditSQL.LastEvent).
func (s *suite) auditUnsequencedBelowLast(t *testing.T) {
	b := s.setup(t)
	b.create(t)
	evs := b.events(t) // instance.created, request.created
	first, last := evs[0].ID, evs[len(evs)-1].ID
	sequence(t, b, first, 100)
	page, err := b.store.UnsequencedEvents(b.ctx, 0, 100)
	wantOK(t, err)
	if got := unsequencedIDs(page); !slices.Equal(got, []int64{first}) || page.Next != last {
		t.Fatalf("UnsequencedEvents = %v, next %d; want [%d], next %d", got, page.Next, first, last)
	}
	one, err := b.store.UnsequencedEvents(b.ctx, 0, 1)
	wantOK(t, err)
	if got := unsequencedIDs(one); !slices.Equal(got, []int64{first}) || one.Next != first {
		t.Fatalf("a page of 1 = %v, next %d; want [%d], next %d", got, one.Next, first, first)
	}
	above, err := b.store.UnsequencedEvents(b.ctx, first, 100)
	wantOK(t, err)
	if len(above.Events) != 0 || above.Next != last {
		t.Fatalf("above the first, UnsequencedEvents = %v, next %d; want none, next %d", unsequencedIDs(above), above.Next, last)
	}
}

// auditStaleEdge: a sequencer that keeps the tree's edge (sequencer.Edge)
// while another appends is refused by the append's compare-and-set, not
// let to append from the size it remembers; its next step reads the tree
// again and appends, and the stored tree is the tree of its leaves.
func (s *suite) auditStaleEdge(t *testing.T) {
	b := s.setup(t)
	b.create(t)
	holder := sequence(t, b, 0, 1) // the lease, and a tree of one leaf
	var edge sequencer.Edge
	first, err := edge.Step(b.ctx, b.store, holder, 0, 100)
	wantOK(t, err)
	b.create(t)
	if _, _, err := sequencer.Step(b.ctx, b.store, holder, first.Next, 100); err != nil {
		t.Fatalf("the other sequencer's Step: %v", err)
	}
	b.create(t)
	if _, err := edge.Step(b.ctx, b.store, holder, first.Next, 100); !sequencer.Refused(err) {
		t.Fatalf("a step from a stale edge = %v; want refused", err)
	}
	again, err := edge.Step(b.ctx, b.store, holder, first.Next, 100)
	if err != nil || len(again.At) == 0 {
		t.Fatalf("the step after the refusal appended %d, %v; want the new events", len(again.At), err)
	}
	evs := b.events(t)
	tree := memoryTree(t, b.store)
	if tree.Size() != int64(len(evs)) {
		t.Fatalf("%d leaves for %d events", tree.Size(), len(evs))
	}
	want, err := tree.Root(tree.Size())
	wantOK(t, err)
	root, err := auditlog.TreeHash(tree.Size(), store.HashReader(b.ctx, b.store))
	wantOK(t, err)
	if root != want {
		t.Fatalf("the stored tree's root %s is not the root of its %d leaves %s", root, tree.Size(), want)
	}
}

// sequence takes the lease and appends up to limit unsequenced events
// above after, and returns the holder.
func sequence(t *testing.T, b *bundle, after int64, limit int) string {
	t.Helper()
	const holder = "seq_suite"
	got, err := b.store.AcquireSequencer(b.ctx, holder, sequencerTTL)
	if err != nil || !got {
		t.Fatalf("AcquireSequencer = %v, %v; want the lease", got, err)
	}
	if _, _, err := sequencer.Step(b.ctx, b.store, holder, after, limit); err != nil {
		t.Fatalf("Step: %v", err)
	}
	return holder
}

func unsequencedIDs(p store.Unsequenced) []int64 {
	out := []int64{}
	for _, u := range p.Events {
		out = append(out, u.Event.ID)
	}
	return out
}

func eventIDs(evs []airlock.Event) []int64 {
	out := []int64{}
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// appendOf builds the append of the unsequenced events after after, up to
// limit, at the tree's size from, over the tree's leaves so far.
func appendOf(t *testing.T, b *bundle, holder string, from int64) store.AppendLeavesParams {
	t.Helper()
	page, err := b.store.UnsequencedEvents(b.ctx, 0, 100)
	wantOK(t, err)
	if len(page.Events) == 0 {
		t.Fatal("no unsequenced event to append")
	}
	tree := memoryTree(t, b.store)
	p := store.AppendLeavesParams{Holder: holder, From: from}
	for _, u := range page.Events {
		leaf, err := sequencer.Leaf(u)
		wantOK(t, err)
		hs, err := auditlog.StoredHashes(tree.Size(), leaf, tree)
		wantOK(t, err)
		wantOK(t, tree.Append(leaf))
		p.Leaves = append(p.Leaves, store.NewAuditLeaf{EventID: u.Event.ID, Leaf: leaf})
		p.Hashes = append(p.Hashes, hs...)
	}
	return p
}

// memoryTree builds the tree of s's leaves, in index order, checking that
// the indexes are 0, 1, 2, … without a gap.
func memoryTree(t testing.TB, s store.AuditLog) *auditlog.MemoryTree {
	t.Helper()
	tree := &auditlog.MemoryTree{}
	for _, l := range allLeaves(t, s) {
		if err := tree.Append(l.Leaf); err != nil {
			t.Fatal(err)
		}
	}
	return tree
}

// allLeaves reads every leaf of s, checking the indexes are gapless.
func allLeaves(t testing.TB, s store.AuditLog) []store.AuditLeaf {
	t.Helper()
	var out []store.AuditLeaf
	for {
		page, err := s.AuditLeaves(t.Context(), int64(len(out)), 500)
		if err != nil {
			t.Fatalf("AuditLeaves(%d): %v", len(out), err)
		}
		for _, l := range page {
			if l.Index != int64(len(out)) {
				t.Fatalf("leaf %d where leaf %d belongs: the indexes have a gap", l.Index, len(out))
			}
			out = append(out, l)
		}
		if len(page) == 0 {
			return out
		}
	}
}

func (s *suite) auditAppendRefused(t *testing.T) {
	b := s.setup(t)
	b.create(t)
	const holder, other = "seq_a", "seq_b"
	got, err := b.store.AcquireSequencer(b.ctx, holder, time.Minute)
	if err != nil || !got {
		t.Fatalf("AcquireSequencer = %v, %v", got, err)
	}
	refused := func(what string, p store.AppendLeavesParams) {
		t.Helper()
		if err := b.store.AppendLeaves(b.ctx, p); !errors.Is(err, store.ErrAppendRefused) {
			t.Fatalf("AppendLeaves %s = %v; want ErrAppendRefused", what, err)
		}
		if n, err := b.store.TreeSize(b.ctx); err != nil || n != 0 {
			t.Fatalf("after a refused append, TreeSize = %d, %v; want 0", n, err)
		}
	}
	p := appendOf(t, b, holder, 0)
	wrongSize := p
	wrongSize.From = 1
	wrongSize.Hashes = appendOfAt(t, p, 1)
	refused("from a size the tree does not have", wrongSize)
	byOther := p
	byOther.Holder = other
	refused("by a sequencer without the lease", byOther)
	b.clock.Advance(time.Minute)
	refused("once the holder's lease expired", p)
	if got, err := b.store.AcquireSequencer(b.ctx, other, time.Minute); err != nil || !got {
		t.Fatalf("AcquireSequencer(%s) after expiry = %v, %v", other, got, err)
	}
	refused("by the holder whose lease another took", p)
	p.Holder = other
	wantOK(t, b.store.AppendLeaves(b.ctx, p))
	if n, err := b.store.TreeSize(b.ctx); err != nil || n != int64(len(p.Leaves)) {
		t.Fatalf("TreeSize = %d, %v; want %d", n, err, len(p.Leaves))
	}
	// The same events again, at the new size: each event is in the tree once.
	again := p
	again.From = int64(len(p.Leaves))
	again.Hashes = appendOfAt(t, p, again.From)
	if err := b.store.AppendLeaves(b.ctx, again); !errors.Is(err, store.ErrAppendRefused) {
		t.Fatalf("appending sequenced events again = %v; want ErrAppendRefused", err)
	}
	if n, err := b.store.TreeSize(b.ctx); err != nil || n != int64(len(p.Leaves)) {
		t.Fatalf("after a refused append, TreeSize = %d, %v; want %d", n, err, len(p.Leaves))
	}
	bad := p
	bad.Hashes = bad.Hashes[1:]
	if err := b.store.AppendLeaves(b.ctx, bad); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("an append short of a hash = %v; want invalid_request", err)
	}
}

// appendOfAt returns the stored hashes p's leaves would add at from, to a
// tree of from leaves of p's first (what is in them does not matter: the
// append is refused before they are read).
func appendOfAt(t *testing.T, p store.AppendLeavesParams, from int64) []auditlog.Hash {
	t.Helper()
	n := auditlog.StoredHashIndex(from+int64(len(p.Leaves))) - auditlog.StoredHashIndex(from)
	return make([]auditlog.Hash, n)
}

func (s *suite) auditTree(t *testing.T) {
	b := s.setup(t)
	for i := range 5 {
		r := b.create(t)
		if i%2 == 0 {
			if _, err := b.approve(r.ID); err != nil {
				t.Fatalf("approve: %v", err)
			}
		}
	}
	const holder = "seq_suite"
	if got, err := b.store.AcquireSequencer(b.ctx, holder, sequencerTTL); err != nil || !got {
		t.Fatalf("AcquireSequencer = %v, %v", got, err)
	}
	// Batches of 3, so that appends build on the tree's stored hashes.
	var after int64
	for {
		next, n, err := sequencer.Step(b.ctx, b.store, holder, after, 3)
		wantOK(t, err)
		after = next
		if n == 0 {
			break
		}
	}
	evs := b.events(t)
	leaves := allLeaves(t, b.store)
	if len(leaves) != len(evs) {
		t.Fatalf("%d leaves for %d events", len(leaves), len(evs))
	}
	for i, l := range leaves {
		parsed, err := auditlog.ParseLeaf(l.Leaf)
		if err != nil || l.EventID != evs[i].ID || parsed.UID != evs[i].UID || parsed.Type != evs[i].Type {
			t.Fatalf("leaf %d = event %d %q, %v; want event %d's (%s, %s)", i, l.EventID, l.Leaf, err, evs[i].ID, evs[i].Type, evs[i].UID)
		}
	}
	tree := memoryTree(t, b.store)
	size, err := b.store.TreeSize(b.ctx)
	wantOK(t, err)
	if size != tree.Size() {
		t.Fatalf("TreeSize = %d; the leaves are %d", size, tree.Size())
	}
	want, err := tree.Root(size)
	wantOK(t, err)
	root, err := auditlog.TreeHash(size, store.HashReader(b.ctx, b.store))
	wantOK(t, err)
	if root != want {
		t.Fatalf("the stored tree's root %s is not the root of its leaves %s", root, want)
	}
	all := make([]int64, auditlog.StoredHashIndex(size))
	for i := range all {
		all[i] = int64(len(all) - 1 - i) // in any order
	}
	stored, err := b.store.ReadAuditHashes(b.ctx, all)
	wantOK(t, err)
	mem, err := tree.ReadHashes(all)
	wantOK(t, err)
	if !slices.Equal(stored, mem) {
		t.Fatal("the stored hashes are not the memory tree's")
	}
	if _, err := b.store.ReadAuditHashes(b.ctx, []int64{int64(len(all))}); err == nil {
		t.Fatal("ReadAuditHashes of a hash the tree does not hold yet succeeded")
	}
	if page, err := b.store.AuditLeaves(b.ctx, 2, 3); err != nil || len(page) != 3 || page[0].Index != 2 || !bytes.Equal(page[2].Leaf, leaves[4].Leaf) {
		t.Fatalf("AuditLeaves(2, 3) = %v, %v; want leaves 2 to 4", page, err)
	}

	// The checkpoint.
	if _, err := b.store.LatestCheckpoint(b.ctx); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("LatestCheckpoint before the first = %v; want not_found", err)
	}
	key, err := b.store.EnsureAuditKey(b.ctx, auditKey(t, "airlock.example/audit"))
	wantOK(t, err)
	cp, made, err := sequencer.Checkpoint(b.ctx, b.store, key, nil)
	wantOK(t, err)
	if !made || cp.Size != size || !cp.CreatedAt.Equal(b.clock.Now().Truncate(time.Microsecond)) {
		t.Fatalf("Checkpoint = size %d made %v at %s; want size %d made now", cp.Size, made, cp.CreatedAt, size)
	}
	opened, err := auditlog.OpenCheckpoint(cp.Note, key.VKey)
	wantOK(t, err)
	if opened.Size != size || opened.Root != want || opened.Origin != "airlock.example/audit" {
		t.Fatalf("the checkpoint says %+v; want size %d, root %s", opened, size, want)
	}
	entries := make([]auditlog.Entry, len(leaves))
	for i, l := range leaves {
		entries[i] = auditlog.Entry{Index: l.Index, Leaf: l.Leaf}
	}
	if err := auditlog.VerifyEntries(auditlog.Entries(entries), opened, nil); err != nil {
		t.Fatalf("VerifyEntries over the stored leaves: %v", err)
	}
	if again, made, err := sequencer.Checkpoint(b.ctx, b.store, key, nil); err != nil || made || again.Size != size {
		t.Fatalf("a checkpoint of an unchanged tree = size %d made %v, %v; want none made", again.Size, made, err)
	}
	latest, err := b.store.LatestCheckpoint(b.ctx)
	wantOK(t, err)
	if latest.Size != size || !bytes.Equal(latest.Note, cp.Note) {
		t.Fatalf("LatestCheckpoint = size %d; want %d with the note saved", latest.Size, size)
	}
	if saved, err := b.store.SaveCheckpoint(b.ctx, store.SaveCheckpointParams{Size: size, Note: []byte("another note")}); err != nil || !bytes.Equal(saved.Note, cp.Note) {
		t.Fatalf("saving a second checkpoint of one size = %q, %v; want the first kept", saved.Note, err)
	}
	// No checkpoint made an event: the log does not grow by itself.
	if after := b.events(t); len(after) != len(evs) {
		t.Fatalf("the checkpoint appended %d events", len(after)-len(evs))
	}
}

// auditSequencersRace appends events through every store while a
// sequencer on each takes the lease in turn and appends, and checks that
// in the end every event is in the tree exactly once, at gapless indexes,
// and the stored tree is the tree of its leaves (T35).
func auditSequencersRace(t *testing.T, stores []store.Store, writes int) {
	b := &bundle{ctx: t.Context(), store: stores[0]}
	b.inst = b.instance(t, ownerA)
	const ttl = 200 * time.Millisecond
	var (
		stop = make(chan struct{})
		tr   = &turns{changed: make(chan struct{}), last: -1}
		wg   sync.WaitGroup
	)
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for i, st := range stores {
		// A sequencer takes the lease, appends a few batches, and then
		// lets it go (lets it expire) until another has appended, so the
		// lease changes hands while events are written; a sequencer that
		// appends after its lease expired is refused. Each keeps its
		// tree's edge (sequencer.Edge) across lease changes on purpose,
		// which the provider does not: a stale edge must be refused by
		// the store's compare-and-set, and is then forgotten.
		wg.Go(func() {
			holder := fmt.Sprintf("seq_%d", i)
			var after int64
			var edge sequencer.Edge
			rounds := 0
			for !stopped() {
				if rounds >= 3 {
					tr.wait(i, stop)
					rounds = 0
				}
				got, err := st.AcquireSequencer(b.ctx, holder, ttl)
				if err != nil {
					t.Errorf("AcquireSequencer(%s): %v", holder, err)
					return
				}
				if !got {
					continue
				}
				batch, err := edge.Step(b.ctx, st, holder, after, 50)
				switch {
				case sequencer.Refused(err):
					continue
				case err != nil:
					t.Errorf("Step(%s): %v", holder, err)
					return
				}
				after = batch.Next
				n := len(batch.At)
				if n > 0 {
					tr.appended(i)
					rounds++
				}
			}
		})
	}
	var writers sync.WaitGroup
	var next atomic.Int64
	for w := range 6 {
		st := stores[w%len(stores)]
		writers.Go(func() {
			for int(next.Add(1)) <= writes {
				r, created, err := st.CreateRequest(b.ctx, b.params())
				if err != nil || !created {
					t.Errorf("CreateRequest = %v, %v", created, err)
					return
				}
				if _, err := st.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: reviewer}); err != nil {
					t.Errorf("Decide: %v", err)
					return
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Catch up: whoever can take the lease appends what is left.
	var after int64
	refusals := 0
	for caughtUp := false; !caughtUp; {
		got, err := stores[0].AcquireSequencer(b.ctx, "seq_final", time.Minute)
		wantOK(t, err)
		if !got {
			continue // until the last holder's lease expires
		}
		next, n, err := sequencer.Step(b.ctx, stores[0], "seq_final", after, 500)
		if sequencer.Refused(err) {
			// Alone, a sequencer holding the lease is refused only by a
			// store that offers it events that have a leaf already.
			if refusals++; refusals > 10 {
				t.Fatalf("the one sequencer left is refused again and again: %v", err)
			}
			continue
		}
		wantOK(t, err)
		after, caughtUp = next, n == 0
	}
	evs := AllEvents(t, stores[0])
	leaves := allLeaves(t, stores[len(stores)-1])
	if len(leaves) != len(evs) {
		t.Fatalf("%d leaves for %d events", len(leaves), len(evs))
	}
	seen := map[int64]int64{}
	for _, l := range leaves {
		if at, ok := seen[l.EventID]; ok {
			t.Fatalf("event %d is in the tree twice: at %d and %d", l.EventID, at, l.Index)
		}
		seen[l.EventID] = l.Index
	}
	for _, e := range evs {
		if _, ok := seen[e.ID]; !ok {
			t.Fatalf("event %d (%s) is not in the tree", e.ID, e.Type)
		}
	}
	tree := memoryTree(t, stores[1])
	want, err := tree.Root(tree.Size())
	wantOK(t, err)
	root, err := auditlog.TreeHash(tree.Size(), store.HashReader(b.ctx, stores[1]))
	wantOK(t, err)
	if root != want {
		t.Fatalf("the stored tree's root %s is not the root of its %d leaves %s", root, tree.Size(), want)
	}
	t.Logf("%d events in the tree, the lease changed hands %d times", len(evs), tr.handovers())
}

// turns records which sequencer appended last, so that one that let its
// lease go waits until another has appended.
type turns struct {
	mu      sync.Mutex
	last    int
	changed chan struct{} // closed when last changes
	n       int
}

// appended records that sequencer i appended.
func (tr *turns) appended(i int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.last != i {
		tr.last, tr.n = i, tr.n+1
		close(tr.changed)
		tr.changed = make(chan struct{})
	}
}

// wait returns once a sequencer other than i has appended, or stop closes.
func (tr *turns) wait(i int, stop <-chan struct{}) {
	tr.mu.Lock()
	if tr.last != i {
		tr.mu.Unlock()
		return
	}
	ch := tr.changed
	tr.mu.Unlock()
	select {
	case <-ch:
	case <-stop:
	}
}

func (tr *turns) handovers() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.n
}

// sequenceAll appends every committed event to b's tree.
func sequenceAll(t *testing.T, b *bundle) {
	t.Helper()
	const holder = "seq_suite"
	if got, err := b.store.AcquireSequencer(b.ctx, holder, sequencerTTL); err != nil || !got {
		t.Fatalf("AcquireSequencer = %v, %v", got, err)
	}
	var after int64
	for {
		next, n, err := sequencer.Step(b.ctx, b.store, holder, after, 100)
		wantOK(t, err)
		after = next
		if n == 0 {
			return
		}
	}
}

func (s *suite) auditRequestLeaves(t *testing.T) {
	b := s.setup(t)
	one, other := b.create(t), b.create(t)
	_, err := b.approve(one.ID)
	wantOK(t, err)
	if got, err := b.store.RequestLeaves(b.ctx, one.ID, 10); err != nil || len(got) != 0 {
		t.Fatalf("RequestLeaves before sequencing = %v, %v; want none", got, err)
	}
	sequenceAll(t, b)
	b.create(t)
	sequenceAll(t, b)
	var want []store.AuditLeaf
	for _, l := range allLeaves(t, b.store) {
		parsed, err := auditlog.ParseLeaf(l.Leaf)
		wantOK(t, err)
		if parsed.RequestID == one.ID {
			want = append(want, l)
		}
	}
	got, err := b.store.RequestLeaves(b.ctx, one.ID, 10)
	wantOK(t, err)
	if len(want) < 2 || len(got) != len(want) {
		t.Fatalf("RequestLeaves(%s) = %d leaves; want its %d (created, approved)", one.ID, len(got), len(want))
	}
	for i := range got {
		if got[i].Index != want[i].Index || got[i].EventID != want[i].EventID || !bytes.Equal(got[i].Leaf, want[i].Leaf) {
			t.Fatalf("RequestLeaves(%s)[%d] = %d; want leaf %d", one.ID, i, got[i].Index, want[i].Index)
		}
	}
	if first, err := b.store.RequestLeaves(b.ctx, one.ID, 1); err != nil || len(first) != 1 || first[0].Index != want[0].Index {
		t.Fatalf("RequestLeaves limit 1 = %v, %v; want the first", first, err)
	}
	if got, err := b.store.RequestLeaves(b.ctx, other.ID, 10); err != nil || len(got) != 1 {
		t.Fatalf("RequestLeaves(%s) = %d leaves, %v; want its one", other.ID, len(got), err)
	}
	if got, err := b.store.RequestLeaves(b.ctx, "apr_unknown", 10); err != nil || len(got) != 0 {
		t.Fatalf("RequestLeaves of an unknown request = %v, %v; want none", got, err)
	}
}

func (s *suite) auditCheckpointDeliveries(t *testing.T) {
	b := s.setup(t)
	e := b.endpoint(t, airlock.NotifyCheckpoint)
	b.create(t)
	sequenceAll(t, b)
	size, err := b.store.TreeSize(b.ctx)
	wantOK(t, err)
	d := func(endpoint string) airlock.Delivery {
		return airlock.Delivery{ID: airlock.NewID(airlock.PrefixDelivery), EndpointID: endpoint, MessageID: airlock.CheckpointMessageID(size),
			Type: airlock.NotifyCheckpoint, Payload: []byte(`{"type":"audit.checkpoint"}`)}
	}
	if _, err := b.store.SaveCheckpoint(b.ctx, store.SaveCheckpointParams{Size: size, Note: []byte("note"),
		Deliveries: []airlock.Delivery{{EndpointID: e.ID, EventID: 1, Payload: []byte("{}")}}}); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("SaveCheckpoint with a delivery of an event = %v; want invalid_request", err)
	}
	cp, err := b.store.SaveCheckpoint(b.ctx, store.SaveCheckpointParams{Size: size, Note: []byte("note"),
		Deliveries: []airlock.Delivery{d(e.ID), d("whk_gone")}})
	wantOK(t, err)
	if cp.Size != size || string(cp.Note) != "note" {
		t.Fatalf("SaveCheckpoint = %d %q", cp.Size, cp.Note)
	}
	// Stored again, by another replica: the checkpoint is kept and nothing
	// more is queued.
	_, err = b.store.SaveCheckpoint(b.ctx, store.SaveCheckpointParams{Size: size, Note: []byte("note"), Deliveries: []airlock.Delivery{d(e.ID)}})
	wantOK(t, err)
	ds, _, err := b.store.ListDeliveries(b.ctx, e.ID, 0, 10)
	wantOK(t, err)
	if len(ds) != 1 || ds[0].Type != airlock.NotifyCheckpoint || ds[0].EventID != 0 || ds[0].MessageID != airlock.CheckpointMessageID(size) ||
		ds[0].State != airlock.DeliveryPending {
		t.Fatalf("deliveries of the checkpoint = %+v; want one pending audit.checkpoint without an event", ds)
	}
	leased, err := b.store.LeaseDeliveries(b.ctx, store.LeaseParams{EndpointID: e.ID, Holder: "rep_suite", For: time.Minute, Limit: 10})
	wantOK(t, err)
	if len(leased) != 1 || string(leased[0].Payload) != `{"type":"audit.checkpoint"}` {
		t.Fatalf("leased %+v; want the checkpoint's delivery with its payload", leased)
	}
}
