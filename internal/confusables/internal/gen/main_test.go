package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// dataSHA256 is the digest of the committed confusables.txt: Unicode's
// 13.0.0 file as ICU 67.1's sources carry it (docs/dependencies.md says
// where it came from).
const dataSHA256 = "96f2500ec78fd96f11561d4b40237435dfece70303b1db3c0974138a333aa206"

// TestTablesAreGenerated: tables.go is, byte for byte, what this command
// makes of the committed confusables.txt, and that file is still the
// copy whose provenance the docs give.
func TestTablesAreGenerated(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../confusables.txt")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != dataSHA256 {
		t.Errorf("confusables.txt has SHA-256 %x, want %s: it was changed (a new Unicode release changes this digest too)", sum, dataSHA256)
	}
	want, err := os.ReadFile("../../tables.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := generate(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("tables.go is not what confusables.txt makes (run go generate ./internal/confusables): line %d is %q, generated %q", i+1, wl[i], gl[i])
			}
		}
		t.Fatalf("tables.go is not what confusables.txt makes (run go generate ./internal/confusables): %d lines, generated %d", len(wl), len(gl))
	}
}

// TestGenerate: what the generator keeps of a confusables.txt and what it
// refuses.
func TestGenerate(t *testing.T) {
	t.Parallel()
	const header = "\uFEFF# confusables.txt\n# Version: 99.0.0\n#\n"
	for _, tc := range []struct {
		name, data string
		want       []string // lines the output holds
		err        string   // what the error says, when it must fail
	}{
		{"a prototype of one character", header + "05AD ;\t0596 ;\tMA\t# ( ֭ → ֖ ) HEBREW ACCENT DEHI → HEBREW ACCENT TIPEHA\t# \n",
			[]string{"// confusables.txt", "// Version: 99.0.0", "0x000005AD: \"\\u0596\","}, ""},
		{"a prototype of several characters", header + "2474 ;\t0028 0031 0029 ;\tMA\t# ( ⑴ → (1) )\t# \n",
			[]string{"0x00002474: \"(1)\","}, ""},
		{"lines of other types are left out", header + "0430 ;\t0061 ;\tSL\t#\n0435 ;\t0065 ;\tMA\t#\n",
			[]string{"0x00000435: \"e\","}, ""},
		{"a line with two fields", header + "05AD ;\t0596\n", nil, "line 4: 2 fields"},
		{"a code point past U+10FFFF", header + "110000 ;\t0061 ;\tMA\t#\n", nil, `"110000" is no code point`},
		{"a surrogate", header + "0061 ;\tD800 ;\tMA\t#\n", nil, `"D800" is no code point`},
		{"a character listed twice", header + "0430 ;\t0061 ;\tMA\t#\n\n0430 ;\t0062 ;\tMA\t#\n", nil, "line 6: U+0430 again (first on line 4)"},
		{"no table at all", header, nil, "no character of type MA"},
	} {
		got, err := generate([]byte(tc.data))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		default:
			for _, w := range tc.want {
				if !strings.Contains(string(got), w) {
					t.Errorf("%s: no line %q in\n%s", tc.name, w, got)
				}
			}
			if strings.Contains(string(got), "0x00000430") {
				t.Errorf("%s: an SL line made it into the table", tc.name)
			}
		}
	}
}
