package rest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// encodingJSON is what writeString must write: encoding/json's text of s
// with HTML escaping off.
func encodingJSON(t testing.TB, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestWriteStringMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		"", "plain", `quote " and backslash \`, "<b>&amp;</b>", "tab\tnew\nline\rcr",
		"\b\f\x00\x01\x1f\x7f", "é 日本 🙂", "\u2028\u2029", "\u202e.exe", "bad \xff utf-8 \xc3",
		"\xed\xa0\x80 surrogate", strings.Repeat("x", 10_000) + "\"",
	}
	for c := rune(0); c < 0x3000; c++ {
		cases = append(cases, "a"+string(c)+"b")
	}
	for _, s := range cases {
		var b bytes.Buffer
		writeString(&b, s)
		if want := encodingJSON(t, s); b.String() != want {
			t.Errorf("writeString(%q) = %s; encoding/json writes %s", s, b.String(), want)
		}
	}
}

func FuzzWriteString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "\u2028", "<>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b bytes.Buffer
		writeString(&b, s)
		if want := encodingJSON(t, s); b.String() != want {
			t.Fatalf("writeString(%q) = %s; encoding/json writes %s", s, b.String(), want)
		}
		var back string
		if err := json.Unmarshal(b.Bytes(), &back); err != nil {
			t.Fatalf("writeString(%q) wrote invalid JSON %s: %v", s, b.String(), err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("writeString(%q) reads back as %q", s, back)
		}
	})
}

func TestWriteValueMatchesEncodingJSON(t *testing.T) {
	for _, v := range []any{"s\"<", 0, -7, int64(1) << 60, true, false, []string{}, []string{"a", "b\n"}, 2.5, uint8(3)} {
		var b bytes.Buffer
		writeValue(&b, v)
		if want := encodingJSON(t, v); b.String() != want {
			t.Errorf("writeValue(%#v) = %s; encoding/json writes %s", v, b.String(), want)
		}
	}
}

func TestObjectTime(t *testing.T) {
	var b bytes.Buffer
	o := beginObject(&b)
	o.time("at", time.Date(2026, 12, 3, 7, 0, 0, 123456789, time.FixedZone("x", 3600)))
	o.time("zero", time.Time{})
	o.end()
	if want := `{"at":"2026-12-03T06:00:00.123456Z"}`; b.String() != want {
		t.Errorf("object = %s; want %s", b.String(), want)
	}
}
