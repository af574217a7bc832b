package approvaltoken

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/gowebpki/jcs"
)

// The examples of RFC 8785 itself: section 3.2.2 (values), section 3.2.3
// (sorting by UTF-16 code units) and Appendix B (numbers).
func TestCanonicalRFC8785Examples(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{
			name: "3.2.2 values",
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			name: "3.2.3 sorting",
			in: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("canonical form\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestCanonicalRFC8785Numbers(t *testing.T) {
	// Appendix B: IEEE 754 double (hex) → its canonical JSON number.
	samples := []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	for _, s := range samples {
		raw, err := hex.DecodeString(s.bits)
		if err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(binary.BigEndian.Uint64(raw))
		// Go's shortest round-trip form reads back as the same double,
		// so the input is exact; only the output spelling is tested.
		in := strconv.FormatFloat(f, 'g', -1, 64)
		got, err := Canonical([]byte(in))
		if err != nil {
			t.Fatalf("%s (%s): %v", s.bits, in, err)
		}
		if string(got) != s.want {
			t.Errorf("%s: canonical %s, want %s", s.bits, got, s.want)
		}
	}
}

// Arguments that are one JSON value have one digest; a changed byte of a
// value gives another.
func TestArgsDigest(t *testing.T) {
	base := `{"path":"/tmp/x","mode":1,"tags":["a","é"]}`
	equal := []string{
		`{"tags":["a","é"],"mode":1,"path":"/tmp/x"}`,        // keys reordered
		`{"path":"/tmp/x","mode":1.0,"tags":["a","é"]}`,      // 1.0 for 1
		`{"path":"\/tmp\/x","mode":1,"tags":["a","\u00e9"]}`, // escapes
		"{ \"path\" : \"/tmp/x\",\n \"mode\" : 1e0, \"tags\" : [ \"a\" , \"é\" ] }",
	}
	different := []string{
		`{"path":"/tmp/y","mode":1,"tags":["a","é"]}`,
		`{"path":"/tmp/x","mode":2,"tags":["a","é"]}`,
		`{"path":"/tmp/x","mode":1,"tags":["é","a"]}`,
		`{"path":"/tmp/x","mode":"1","tags":["a","é"]}`,
		`{"path":"/tmp/x","mode":1,"tags":["a","é"],"x":null}`,
	}
	want, err := ArgsDigest([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len("sha256:")+43 || want[:7] != "sha256:" {
		t.Fatalf("digest %q: want sha256: and 43 base64url characters", want)
	}
	for _, in := range equal {
		if got, err := ArgsDigest([]byte(in)); err != nil || got != want {
			t.Errorf("ArgsDigest(%s) = %s, %v; want %s (equal under RFC 8785)", in, got, err, want)
		}
	}
	for _, in := range different {
		if got, err := ArgsDigest([]byte(in)); err != nil || got == want {
			t.Errorf("ArgsDigest(%s) = %s, %v; want a digest other than %s", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1,"a":2}`, `{"a":1}x`} {
		if got, err := ArgsDigest([]byte(bad)); err == nil {
			t.Errorf("ArgsDigest(%q) = %s; want an error", bad, got)
		}
	}
}

// canonicalPlain answers only where its form is jcs's: for each document,
// either it leaves the document to jcs or it writes what jcs writes.
func TestCanonicalPlainIsJCS(t *testing.T) {
	for _, doc := range []string{
		`{"payment_id":"pay_12345","amount":4900,"currency":"GBP"}`,
		`{"path":"/srv/db","force":true,"n":1}`,
		` { "b" : [ 1 , -0 , 0 , -12 , null , false , { } , [ ] ] , "a" : { "z" : "" , "y" : "x y" } } `,
		`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`,
		`{"aa":1,"a":2,"a_":3,"A":4,"":5}`,
		`42`, `-0`, `"s"`, `true`, `null`, `[]`, `{}`,
		`999999999999999`, `9999999999999999`, `1.5`, `1e3`, `1E3`, `0.1`, `-1.0`,
		`{"s":"a\"b"}`, `{"s":"\u00e9"}`, `{"s":"é"}`, `{"é":1,"e":2}`, `{"s":"\/"}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	} {
		plainOut, ok := canonicalPlain([]byte(doc))
		want, err := jcs.Transform([]byte(doc))
		switch {
		case ok && err != nil:
			t.Errorf("%s: plain %s, but jcs refuses it: %v", doc, plainOut, err)
		case ok && string(plainOut) != string(want):
			t.Errorf("%s: plain %s, jcs %s", doc, plainOut, want)
		}
		got, gotErr := Canonical([]byte(doc))
		if (gotErr == nil) != (err == nil) || string(got) != string(want) {
			t.Errorf("%s: Canonical %s, %v; jcs %s, %v", doc, got, gotErr, want, err)
		}
	}
	for _, doc := range []string{`{"payment_id":"pay_1","amount":4900}`, `{"b":1,"a":[2,{"d":3,"c":4}]}`, `[1,"x",true]`} {
		if _, ok := canonicalPlain([]byte(doc)); !ok {
			t.Errorf("%s left to jcs: plain arguments should take the one pass", doc)
		}
	}
}

// FuzzCanonicalPlain: on any valid JSON, canonicalPlain writes jcs's form
// or leaves the document to jcs.
func FuzzCanonicalPlain(f *testing.F) {
	for _, doc := range []string{`{"b":[1,-0,{"y":"x","x":null}],"a":true}`, `{"a":1,"a":2}`, `[1.5,"\u00e9",-12]`, ` 7 `} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		got, ok := canonicalPlain(doc)
		if !ok {
			return
		}
		want, err := jcs.Transform(doc)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: plain %q; jcs %q, %v", doc, got, want, err)
		}
	})
}
