package auditlog

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestEntryReader(t *testing.T) {
	t.Parallel()
	const leaf = `{"actor":"a","time":"2026-12-06T12:07:00.123456Z","type":"t","uid":"u","v":1}`
	// Reformatted in transit: spaces, members reordered, an escape. The
	// canonical bytes come back.
	r := NewEntryReader(strings.NewReader(`{ "leaf": {"v":1, "uid":"u","type":"t","time":"2026-12-06T12:07:00.123456Z","actor":"\u0061"}, "index": 0 }` + "\r\n" + string(AppendEntry(nil, Entry{Index: 1, Leaf: []byte(leaf)}))))
	for i := range int64(2) {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.Index != i || string(e.Leaf) != leaf {
			t.Errorf("entry %d: %d %s", i, e.Index, e.Leaf)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last: %v", err)
	}
	for _, tc := range []struct{ name, input string }{
		{"a line too long", `{"index":0,"leaf":{"actor":"` + strings.Repeat("a", MaxLineBytes) + `"}}`},
		{"a repeated index", `{"index":0,"index":1,"leaf":` + leaf + `}`},
		{"an unknown member", `{"index":0,"hash":"x","leaf":` + leaf + `}`},
		{"no index", `{"leaf":` + leaf + `}`},
		{"a leaf that is a string", `{"index":0,"leaf":"` + strings.ReplaceAll(leaf, `"`, `\"`) + `"}`},
		{"an empty line", "\n"},
		{"not JSON", `index 0`},
		// Lines that look like AppendEntry's but are not JSON: the fast
		// path must not take them.
		{"an index with a leading zero", `{"index":01,"leaf":` + leaf + `}`},
		{"a brace too many", `{"index":0,"leaf":` + leaf + `}}`},
		{"a leaf cut short", `{"index":0,"leaf":` + leaf[:len(leaf)-1] + `}`},
	} {
		_, err := NewEntryReader(strings.NewReader(tc.input)).Next()
		if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// The fast path reads AppendEntry's own lines and marks their leaves parsed;
// a line of the same shape whose leaf is not canonical takes the strict path
// and comes back canonical, not marked.
func TestEntryReaderFastPath(t *testing.T) {
	t.Parallel()
	const leaf = `{"actor":"a","time":"2026-12-06T12:07:00.123456Z","type":"t","uid":"u","v":1}`
	spaced := strings.Replace(leaf, `,"uid"`, `, "uid"`, 1)
	input := string(AppendEntry(nil, Entry{Index: 12, Leaf: []byte(leaf)})) + `{"index":13,"leaf":` + spaced + "}\n"
	r := NewEntryReader(strings.NewReader(input))
	for _, want := range []struct {
		index  int64
		parsed bool
	}{{12, true}, {13, false}} {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.Index != want.index || string(e.Leaf) != leaf || e.parsed != want.parsed {
			t.Errorf("entry %d: index %d, leaf %s, parsed %v", want.index, e.Index, e.Leaf, e.parsed)
		}
	}
}
