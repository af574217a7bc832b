package auditlog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// testLog is a signed log of n events, every third one a request event.
type testLog struct {
	entries []Entry
	tree    *MemoryTree
	cp      Checkpoint
}

func newTestLog(tb testing.TB, n int) testLog {
	tb.Helper()
	p, err := RequestPayloads(toolCall())
	if err != nil {
		tb.Fatal(err)
	}
	l := testLog{tree: &MemoryTree{}}
	for i := range n {
		e := airlock.Event{Type: airlock.EventTokenCreated, At: leafTime.Add(time.Duration(i) * time.Millisecond), Actor: "user:ada", UID: fmt.Sprintf("u%07d", i)}
		var payloads *Payloads
		if i%3 == 0 {
			e.Type, e.RequestID, e.InstanceID, payloads = airlock.EventRequestCreated, fmt.Sprintf("apr_%d", i), "ins_1", &p
		}
		leaf, err := NewLeaf(e, payloads)
		if err != nil {
			tb.Fatal(err)
		}
		l.entries = append(l.entries, Entry{Index: int64(i), Leaf: leaf})
		if err := l.tree.Append(leaf); err != nil {
			tb.Fatal(err)
		}
	}
	skey, vkey, err := GenerateKey("airlock.test/audit")
	if err != nil {
		tb.Fatal(err)
	}
	root, err := l.tree.Root(l.tree.Size())
	if err != nil {
		tb.Fatal(err)
	}
	msg, err := SignCheckpoint(skey, Checkpoint{Origin: "airlock.test/audit", Size: l.tree.Size(), Root: root})
	if err != nil {
		tb.Fatal(err)
	}
	if l.cp, err = OpenCheckpoint(msg, vkey); err != nil {
		tb.Fatal(err)
	}
	return l
}

// edited returns the leaf of entry i with its actor changed.
func (l testLog) edited(t *testing.T, i int) Entry {
	t.Helper()
	leaf, err := ParseLeaf(l.entries[i].Leaf)
	if err != nil {
		t.Fatal(err)
	}
	leaf.Actor = "user:mallory"
	b, err := leaf.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return Entry{Index: int64(i), Leaf: b}
}

// renumber gives es the indexes 0, 1, 2, …, as a tamperer covering a
// deletion or a move would.
func renumber(es []Entry) []Entry {
	out := slices.Clone(es)
	for i := range out {
		out[i].Index = int64(i)
	}
	return out
}

// Each tampering of T35 fails, naming the first bad index and why; with a
// prover (the genuine tree, as the server or an earlier export would give)
// the index is named even where the indexes were kept intact.
func TestVerifyEntriesNamesTheFirstBadIndex(t *testing.T) {
	t.Parallel()
	l := newTestLog(t, 20)
	es := l.entries
	tamper := func(f func([]Entry) []Entry) []Entry { return f(slices.Clone(es)) }
	extra, err := NewLeaf(airlock.Event{Type: airlock.EventTokenRevoked, At: leafTime, Actor: "user:mallory", UID: "forged"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		index  int64
		reason Reason
	}
	for _, tc := range []struct {
		name             string
		entries          []Entry
		alone, withProof want // without a prover, and with one
	}{
		{"an event edited", tamper(func(s []Entry) []Entry { s[7] = l.edited(t, 7); return s }),
			want{-1, ReasonRoot}, want{7, ReasonLeafHash}},
		{"the first event edited", tamper(func(s []Entry) []Entry { s[0] = l.edited(t, 0); return s }),
			want{-1, ReasonRoot}, want{0, ReasonLeafHash}},
		{"the last event edited", tamper(func(s []Entry) []Entry { s[19] = l.edited(t, 19); return s }),
			want{-1, ReasonRoot}, want{19, ReasonLeafHash}},
		{"an event deleted, indexes kept", tamper(func(s []Entry) []Entry { return slices.Delete(s, 7, 8) }),
			want{7, ReasonOrder}, want{7, ReasonOrder}},
		{"an event deleted and the rest renumbered", renumber(slices.Delete(slices.Clone(es), 7, 8)),
			want{19, ReasonMissing}, want{7, ReasonLeafHash}},
		{"two events reordered, indexes kept", tamper(func(s []Entry) []Entry { s[7], s[8] = s[8], s[7]; return s }),
			want{7, ReasonOrder}, want{7, ReasonOrder}},
		{"two events reordered and renumbered", renumber(tamper(func(s []Entry) []Entry { s[7], s[8] = s[8], s[7]; return s })),
			want{-1, ReasonRoot}, want{7, ReasonLeafHash}},
		{"an event appended at the end", append(slices.Clone(es), Entry{Index: 20, Leaf: extra}),
			want{20, ReasonExtra}, want{20, ReasonExtra}},
		{"an event inserted and the rest renumbered", renumber(slices.Insert(slices.Clone(es), 7, Entry{Leaf: extra})),
			want{-1, ReasonRoot}, want{7, ReasonLeafHash}},
		{"an event repeated", tamper(func(s []Entry) []Entry { return slices.Insert(s, 8, s[7]) }),
			want{8, ReasonOrder}, want{8, ReasonOrder}},
		{"the last events cut off", es[:17],
			want{17, ReasonMissing}, want{17, ReasonMissing}},
		{"an edit before an appended event", tamper(func(s []Entry) []Entry { s[3] = l.edited(t, 3); return append(s, Entry{Index: 20, Leaf: extra}) }),
			want{-1, ReasonRoot}, want{3, ReasonLeafHash}},
		{"an edit before a deletion, indexes kept", tamper(func(s []Entry) []Entry { s[3] = l.edited(t, 3); return slices.Delete(s, 9, 10) }),
			want{9, ReasonOrder}, want{3, ReasonLeafHash}},
		{"a leaf not in canonical form", tamper(func(s []Entry) []Entry {
			s[5].Leaf = bytes.Replace(s[5].Leaf, []byte(`{`), []byte(`{ `), 1)
			return s
		}), want{5, ReasonMalformed}, want{5, ReasonMalformed}},
	} {
		for _, run := range []struct {
			prover Prover
			want   want
		}{{nil, tc.alone}, {TreeProver(l.tree), tc.withProof}} {
			err := VerifyEntries(Entries(tc.entries), l.cp, run.prover)
			var ve *VerifyError
			if !errors.As(err, &ve) {
				t.Errorf("%s (prover %v): %v; want a VerifyError", tc.name, run.prover != nil, err)
				continue
			}
			if ve.Index != run.want.index || ve.Reason != run.want.reason {
				t.Errorf("%s (prover %v): %v; want index %d, %s", tc.name, run.prover != nil, err, run.want.index, run.want.reason)
			}
		}
	}
	for _, p := range []Prover{nil, TreeProver(l.tree)} {
		if err := VerifyEntries(Entries(es), l.cp, p); err != nil {
			t.Errorf("the untouched log (prover %v): %v", p != nil, err)
		}
	}
}

// Bisection names every index: a leaf edited at each position of logs of
// several sizes is found where it is.
func TestVerifyEntriesFindsAnEditAnywhere(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 8, 37} {
		l := newTestLog(t, n)
		for i := range n {
			es := slices.Clone(l.entries)
			es[i] = l.edited(t, i)
			err := VerifyEntries(Entries(es), l.cp, TreeProver(l.tree))
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Index != int64(i) || ve.Reason != ReasonLeafHash {
				t.Errorf("size %d, edit at %d: %v", n, i, err)
			}
		}
	}
}

// A prover that lies cannot make a tampered log pass, nor a good one fail
// (a good log needs no proof).
func TestVerifyEntriesWithALyingProver(t *testing.T) {
	t.Parallel()
	l := newTestLog(t, 20)
	other := newTestLog(t, 30)
	liars := map[string]Prover{
		"another tree's proofs": TreeProver(other.tree),
		"empty proofs":          func(int64, int64) (ConsistencyProof, error) { return nil, nil },
		"an error":              func(int64, int64) (ConsistencyProof, error) { return nil, errors.New("unreachable") },
	}
	es := slices.Clone(l.entries)
	es[7] = l.edited(t, 7)
	for name, liar := range liars {
		if err := VerifyEntries(Entries(es), l.cp, liar); err == nil {
			t.Errorf("%s: the edited log passed", name)
		}
		if err := VerifyEntries(Entries(l.entries), l.cp, liar); err != nil {
			t.Errorf("%s: the good log failed: %v", name, err)
		}
	}
}

// A gap the entries show is named at its index when no proof can be had
// (a store that lost a leaf has lost its hash too), as without a prover.
func TestVerifyEntriesGapWithoutProof(t *testing.T) {
	t.Parallel()
	l := newTestLog(t, 20)
	es := slices.Delete(slices.Clone(l.entries), 7, 8)
	failing := func(int64, int64) (ConsistencyProof, error) { return nil, errors.New("audit hash 7: not stored") }
	var ve *VerifyError
	err := VerifyEntries(Entries(es), l.cp, failing)
	if !errors.As(err, &ve) || ve.Index != 7 || ve.Reason != ReasonOrder {
		t.Errorf("a deleted entry with a failing prover: %v; want order at 7", err)
	}
}

// A log of another checkpoint (another log, or forged leaves with a root
// that is not signed) fails.
func TestVerifyEntriesAgainstAnotherCheckpoint(t *testing.T) {
	t.Parallel()
	l := newTestLog(t, 10)
	cp := l.cp
	cp.Root[0] ^= 1
	if err := VerifyEntries(Entries(l.entries), cp, nil); err == nil {
		t.Error("passed against another root")
	}
	var ve *VerifyError
	if err := VerifyEntries(Entries(l.entries), cp, TreeProver(l.tree)); !errors.As(err, &ve) || ve.Reason != ReasonLeafHash {
		t.Errorf("another root with a prover: %v", err)
	}
}

// An export written with AppendEntry and read back verifies; the same
// export with one byte of a value changed names that entry, and a line that
// is not an entry is named by its index.
func TestVerifyEntriesFromJSONLines(t *testing.T) {
	t.Parallel()
	l := newTestLog(t, 12)
	var export []byte
	for _, e := range l.entries {
		export = AppendEntry(export, e)
	}
	if err := VerifyEntries(NewEntryReader(bytes.NewReader(export)).All(), l.cp, nil); err != nil {
		t.Fatalf("the export: %v", err)
	}
	lines := strings.SplitAfter(string(export), "\n")
	edited := slices.Clone(lines)
	edited[4] = strings.Replace(edited[4], "user:ada", "user:adb", 1)
	var ve *VerifyError
	err := VerifyEntries(NewEntryReader(strings.NewReader(strings.Join(edited, ""))).All(), l.cp, TreeProver(l.tree))
	if !errors.As(err, &ve) || ve.Index != 4 || ve.Reason != ReasonLeafHash {
		t.Errorf("one byte changed in line 5: %v", err)
	}
	broken := slices.Clone(lines)
	broken[6] = `{"index":6,"index":6,"leaf":{}}` + "\n"
	err = VerifyEntries(NewEntryReader(strings.NewReader(strings.Join(broken, ""))).All(), l.cp, TreeProver(l.tree))
	if !errors.As(err, &ve) || ve.Index != 6 || ve.Reason != ReasonMalformed {
		t.Errorf("a repeated member in line 7: %v", err)
	}
}

// BenchmarkVerifyEntries verifies an export of 100,000 leaves from its JSON
// lines, as `airlock audit verify --entries` does; the CLI's target is
// 100,000 entries a second.
func BenchmarkVerifyEntries(b *testing.B) {
	const n = 100_000
	l := newTestLog(b, n)
	var export []byte
	for _, e := range l.entries {
		export = AppendEntry(export, e)
	}
	b.SetBytes(int64(len(export)))
	b.ResetTimer()
	for b.Loop() {
		if err := VerifyEntries(NewEntryReader(bytes.NewReader(export)).All(), l.cp, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// A checkpoint kept earlier must be of a prefix of the verified tree: the
// same log's, no larger, with the prefix's root. Each way a log can be
// rewritten between the two checkpoints fails as consistency.
func TestVerifyEntriesSince(t *testing.T) {
	t.Parallel()
	l := newTestLog(t, 50)
	root20, err := l.tree.Root(20)
	if err != nil {
		t.Fatal(err)
	}
	previous := Checkpoint{Origin: l.cp.Origin, Size: 20, Root: root20}
	if err := VerifyEntriesSince(previous, Entries(l.entries), l.cp, nil); err != nil {
		t.Fatalf("a true previous checkpoint: %v", err)
	}
	if err := VerifyEntriesSince(l.cp, Entries(l.entries), l.cp, nil); err != nil {
		t.Fatalf("the same checkpoint as previous: %v", err)
	}
	// The log as it was when previous was signed, with leaf 5 other than
	// what the tree holds now: the log was rewritten since.
	other := &MemoryTree{}
	for i, e := range l.entries[:20] {
		leaf := e.Leaf
		if i == 5 {
			leaf = l.edited(t, 5).Leaf
		}
		if err := other.Append(leaf); err != nil {
			t.Fatal(err)
		}
	}
	rewrittenRoot, err := other.Root(20)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		previous Checkpoint
	}{
		{"the log rewritten since", Checkpoint{Origin: l.cp.Origin, Size: 20, Root: rewrittenRoot}},
		{"the log cut short since", Checkpoint{Origin: l.cp.Origin, Size: 51, Root: root20}},
		{"another log's checkpoint", Checkpoint{Origin: "elsewhere.test/audit", Size: 20, Root: root20}},
	} {
		err := VerifyEntriesSince(tc.previous, Entries(l.entries), l.cp, nil)
		var ve *VerifyError
		if !errors.As(err, &ve) || ve.Reason != ReasonConsistency || ve.Index != -1 {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Entries that do not match the newer checkpoint fail as they would
	// without a previous one.
	tampered := slices.Clone(l.entries)
	tampered[7] = l.edited(t, 7)
	err = VerifyEntriesSince(previous, Entries(tampered), l.cp, TreeProver(l.tree))
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Reason != ReasonLeafHash || ve.Index != 7 {
		t.Errorf("a leaf changed: %v", err)
	}
}
