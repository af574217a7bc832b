package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/strictjson"
)

// checkOutcome fails t unless err matches want: nil want means the input
// must be accepted; otherwise err must be a *strictjson.Error whose text
// contains every string in want.
func checkOutcome(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("refused, want accepted: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted, want refused with %q", want)
	}
	var e *strictjson.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *strictjson.Error", err, err)
	}
	for _, w := range want {
		if !strings.Contains(e.Error(), w) {
			t.Fatalf("error %q does not contain %q", e.Error(), w)
		}
	}
}

// refusedWith says what an error must contain; accepted is nil.
func refusedWith(parts ...string) []string {
	if parts == nil {
		return []string{}
	}
	return parts
}

var accepted []string

// nestObjects returns an object nested depth levels deep: depth 1 is {}.
func nestObjects(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// nestArrays returns an object holding arrays, depth levels in all.
func nestArrays(depth int) string {
	return `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + "}"
}

// Before anything is stored or hashed, refuse duplicate keys,
// case variants, invalid UTF-8, NUL, over-deep nesting; everything else that
// is JSON is accepted.
func TestParseObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want []string
	}{
		// Duplicate keys, at any depth.
		{"a key given twice at the top is refused", `{"tool":"ls","tool":"rm"}`, refusedWith(`duplicate key "tool"`)},
		{"a key given twice inside arguments is refused and the path is named", `{"arguments":{"a":1,"a":2}}`, refusedWith(`arguments: duplicate key "a"`)},
		{"a key given twice deep inside an array is refused and the path is named", `{"a":[{"b":{"c":1,"c":2}}]}`, refusedWith(`a[0].b: duplicate key "c"`)},
		{"a key given twice, once escaped, is refused", `{"a":1,"\u0061":2}`, refusedWith(`duplicate key "a"`)},
		{"a long duplicate key is clipped in the message", `{"a":{"` + strings.Repeat("k", 100) + `":1,"` + strings.Repeat("k", 100) + `":2}}`, refusedWith(`a: duplicate key "` + strings.Repeat("k", 61) + `..."`)},
		{"a long key is clipped in the path", `{"` + strings.Repeat("é", 40) + `":"\u0000"}`, refusedWith(strings.Repeat("é", 30) + `...: NUL`)},
		{"the same key in sibling objects is fine", `{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]}`, accepted},
		// Case variants, as encoding/json would fold them.
		{"tool and TOOL are refused: encoding/json would read rm -rf /", `{"tool":"ls","TOOL":"rm -rf /"}`, refusedWith(`keys "tool" and "TOOL" differ only in case`)},
		{"case variants inside arguments are refused and the path is named", `{"arguments":{"cmd":"ls","Cmd":"rm"}}`, refusedWith(`arguments: keys "cmd" and "Cmd" differ only in case`)},
		{"s and long s (U+017F) are refused", `{"s":1,"ſ":2}`, refusedWith("differ only in case")},
		{"long s then S are refused", `{"ſ":1,"S":2}`, refusedWith("differ only in case")},
		{"mask and maſk are refused", `{"mask":1,"maſk":2}`, refusedWith("differ only in case")},
		{"k and the Kelvin sign (U+212A) are refused", "{\"k\":1,\"\u212a\":2}", refusedWith("differ only in case")},
		{"the Kelvin sign then k are refused", "{\"\u212a\":1,\"k\":2}", refusedWith("differ only in case")},
		{"K and an escaped Kelvin sign are refused", `{"K":1,"\u212a":2}`, refusedWith("differ only in case")},
		{"sigma and final sigma are refused", `{"σ":1,"ς":2}`, refusedWith("differ only in case")},
		{"ß and capital ẞ are refused", `{"ß":1,"ẞ":2}`, refusedWith("differ only in case")},
		{"id and dotless ıd are refused", `{"id":1,"ıd":2}`, refusedWith("differ only in case")},
		{"é and e are different keys", `{"é":1,"e":2}`, accepted},
		{"ß and ss are different keys (no full case folding)", `{"ß":1,"ss":2}`, accepted},
		{"tool and tool_ are different keys", `{"tool":1,"tool_":2}`, accepted},
		// UTF-8.
		{"a raw invalid byte in a value is refused and the path is named", "{\"arguments\":{\"cmd\":\"l\xffs\"}}", refusedWith("arguments.cmd: invalid UTF-8 in string at byte 22")},
		{"a raw invalid byte in a key is refused", "{\"\xfe\":1}", refusedWith("invalid UTF-8")},
		{"a truncated sequence is refused", "{\"a\":\"\xe2\x82\"}", refusedWith("a: invalid UTF-8")},
		{"a sequence cut by the end of input is refused", "{\"a\":\"\xe2\x82", refusedWith("a: invalid UTF-8")},
		{"an overlong encoding of / is refused", "{\"a\":\"\xc0\xaf\"}", refusedWith("a: invalid UTF-8")},
		{"an encoded surrogate is refused", "{\"a\":\"\xed\xa0\x80\"}", refusedWith("a: invalid UTF-8")},
		{"a code point above U+10FFFF is refused", "{\"a\":\"\xf4\x90\x80\x80\"}", refusedWith("a: invalid UTF-8")},
		{"an invalid byte after an escape is refused", "{\"a\":\"\\n\xff\"}", refusedWith("a: invalid UTF-8")},
		{"an invalid byte outside strings is refused", "{\"a\":1\xff}", refusedWith("invalid UTF-8 at byte 6")},
		{"a byte order mark is refused", "\xef\xbb\xbf{}", refusedWith("must be a JSON object")},
		{"multi-byte text, emoji and a literal U+FFFD are fine", `{"é":"日本語 😀 �"}`, accepted},
		// NUL and control characters.
		{"a raw NUL in a value is refused", "{\"a\":\"x\x00y\"}", refusedWith("a: NUL character in string")},
		{"a raw NUL in a key is refused", "{\"a\x00\":1}", refusedWith("NUL character in string")},
		{"an escaped NUL is refused", `{"a":"x\u0000y"}`, refusedWith(`a: NUL character (\u0000)`)},
		{"an escaped NUL in a key is refused", `{"\u0000":1}`, refusedWith(`NUL character (\u0000)`)},
		{"a NUL outside strings is refused", "{\"a\":1\x00}", refusedWith("invalid JSON at byte 6")},
		{"a raw tab in a string is refused", "{\"a\":\"x\ty\"}", refusedWith("a: unescaped control character in string at byte 7")},
		{"a raw newline in a string after an escape is refused", "{\"a\":\"\\t\n\"}", refusedWith("a: unescaped control character")},
		{"a raw U+001F in a string is refused", "{\"a\":\"\x1f\"}", refusedWith("unescaped control character")},
		{"DEL (U+007F) in a string is fine", "{\"a\":\"\x7f\"}", accepted},
		{"escaped control characters are fine", `{"a":"\u0001\u001f\t"}`, accepted},
		{"tabs, newlines and CRs between tokens are fine", "\t{\r\n\"a\" :\t1 }\n", accepted},
		// Surrogate escapes.
		{"a lone high surrogate is refused", `{"a":"\ud800"}`, refusedWith("a: unpaired surrogate")},
		{"a lone low surrogate is refused", `{"a":"\udc00"}`, refusedWith("a: unpaired surrogate")},
		{"a high surrogate followed by a letter is refused", `{"a":"\ud800x"}`, refusedWith("unpaired surrogate")},
		{"a high surrogate followed by a non-surrogate escape is refused", `{"a":"\ud800\u0041"}`, refusedWith("unpaired surrogate")},
		{"two high surrogates are refused", `{"a":"\ud800\ud800"}`, refusedWith("unpaired surrogate")},
		{"a reversed pair is refused", `{"a":"\ude00\ud83d"}`, refusedWith("unpaired surrogate")},
		{"a lone surrogate in a key is refused", `{"\udfff":1}`, refusedWith("unpaired surrogate")},
		{"a high surrogate cut by the end of the string is refused", `{"a":"\ud800\"}`, refusedWith("unpaired surrogate")},
		{"a proper pair is fine", `{"a":"\ud83d\ude00","\uD83D\uDE00":1}`, accepted},
		// Depth: 64 levels of objects or arrays are fine, 65 are refused.
		{"64 nested objects are fine", nestObjects(64), accepted},
		{"65 nested objects are refused", nestObjects(65), refusedWith("JSON nesting deeper than 64 levels")},
		{"an object holding 63 nested arrays is fine", nestArrays(64), accepted},
		{"an object holding 64 nested arrays is refused", nestArrays(65), refusedWith("JSON nesting deeper than 64 levels")},
		{"10000 nested arrays are refused", nestArrays(10000), refusedWith("JSON nesting deeper than 64 levels")},
		// Trailing data and other documents.
		{"a second object after the first is refused", `{} {}`, refusedWith("unexpected data after the JSON object at byte 3")},
		{"a stray brace after the object is refused", `{"a":1}}`, refusedWith("unexpected data after the JSON object at byte 7")},
		{"whitespace around the object is fine", " \n{}\n ", accepted},
		{"an array is not an object", `[]`, refusedWith("body must be a JSON object")},
		{"a string is not an object", `"{}"`, refusedWith("body must be a JSON object")},
		{"null is not an object", `null`, refusedWith("body must be a JSON object")},
		{"an empty body is not an object", ``, refusedWith("body must be a JSON object")},
		{"only whitespace is not an object", "  ", refusedWith("body must be a JSON object")},
		// Grammar.
		{"an unclosed object is refused", `{"a":1`, refusedWith("unexpected end of JSON")},
		{"an unclosed string is refused", `{"a":"x`, refusedWith("unexpected end of JSON")},
		{"a key without a value is refused", `{"a"}`, refusedWith("invalid JSON at byte 4")},
		{"a colon without a value is refused", `{"a":}`, refusedWith("a: invalid JSON")},
		{"a trailing comma in an object is refused", `{"a":1,}`, refusedWith("invalid JSON at byte 7")},
		{"a trailing comma in an array is refused", `{"a":[1,]}`, refusedWith("a[1]: invalid JSON")},
		{"a leading comma in an array is refused", `{"a":[,1]}`, refusedWith("a[0]: invalid JSON")},
		{"a missing comma is refused", `{"a":1 "b":2}`, refusedWith("invalid JSON")},
		{"an unquoted key is refused", `{a:1}`, refusedWith("invalid JSON")},
		{"a single-quoted string is refused", `{"a":'x'}`, refusedWith("invalid JSON")},
		{"true, false and null are fine", `{"a":true,"b":false,"c":null,"d":[true,false,null]}`, accepted},
		{"a truncated literal is refused", `{"a":tru}`, refusedWith("a: invalid JSON")},
		{"a capitalised literal is refused", `{"a":True}`, refusedWith("a: invalid JSON")},
		{"a literal with extra letters is refused", `{"a":nulls}`, refusedWith("invalid JSON")},
		{"a comment is refused", `{"a":1 /* x */}`, refusedWith("invalid JSON")},
		// Escapes.
		{"every escape JSON defines is fine", `{"a":"\" \\ \/ \b \f \n \r \t \u00e9 \u00E9"}`, accepted},
		{"an escape JSON does not define is refused", `{"a":"\a"}`, refusedWith(`a: invalid escape \a`)},
		{"a hex escape is refused", `{"a":"\x41"}`, refusedWith(`invalid escape \x`)},
		{"an escaped single quote is refused", `{"a":"\'"}`, refusedWith(`invalid escape \'`)},
		{"a capital U escape is refused", `{"a":"\U0041"}`, refusedWith(`invalid escape \U`)},
		{"a short unicode escape is refused", `{"a":"\u12"}`, refusedWith("a: invalid JSON")},
		{"a unicode escape with a non-hex digit is refused", `{"a":"\u12G4"}`, refusedWith("a: invalid JSON")},
		{"a unicode escape with a sign is refused", `{"a":"\u+123"}`, refusedWith("a: invalid JSON")},
		{"a backslash at the end of input is refused", `{"a":"\`, refusedWith("a: invalid JSON at byte 6")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := strictjson.ParseObject([]byte(tc.body))
			checkOutcome(t, err, tc.want)
			// Whatever ParseObject accepts, encoding/json accepts too.
			if err == nil && !json.Valid([]byte(tc.body)) {
				t.Fatalf("accepted a document json.Valid refuses")
			}
		})
	}
}

// Numbers follow RFC 8259's grammar exactly, a literal is at most 100
// characters long, and its value fits a 64-bit float: JavaScript reads
// 1e400 as Infinity and 1e-400 as 0.
func TestParseObjectNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		number string
		want   []string
	}{
		{"zero is a number", `0`, accepted},
		{"minus zero is a number", `-0`, accepted},
		{"an integer is a number", `4900`, accepted},
		{"a negative integer is a number", `-12`, accepted},
		{"a fraction is a number", `1.50`, accepted},
		{"an exponent is a number", `1e5`, accepted},
		{"a signed capital exponent is a number", `1E+05`, accepted},
		{"a negative exponent with a fraction is a number", `-0.5e-3`, accepted},
		{"thirty digits are a number", `123456789012345678901234567890`, accepted},
		{"a literal of 100 characters is a number", strings.Repeat("9", 100), accepted},
		{"a literal of 101 characters is refused", strings.Repeat("9", 101), refusedWith("n: number literal longer than 100 characters")},
		{"a long fraction counts every character", "0." + strings.Repeat("1", 99), refusedWith("longer than 100 characters")},
		{"a leading zero is refused", `01`, refusedWith("invalid JSON")},
		{"a minus alone is refused", `-`, refusedWith("n: invalid JSON")},
		{"a plus sign is refused", `+1`, refusedWith("invalid JSON")},
		{"a leading dot is refused", `.5`, refusedWith("invalid JSON")},
		{"a trailing dot is refused", `1.`, refusedWith("invalid JSON")},
		{"a dot before the exponent is refused", `1.e5`, refusedWith("invalid JSON")},
		{"an exponent without digits is refused", `1e`, refusedWith("invalid JSON")},
		{"a signed exponent without digits is refused", `1e+`, refusedWith("invalid JSON")},
		{"hexadecimal is refused", `0x10`, refusedWith("invalid JSON")},
		{"NaN is refused", `NaN`, refusedWith("invalid JSON")},
		{"Infinity is refused", `-Infinity`, refusedWith("invalid JSON")},
		{"a digit separator is refused", `1_000`, refusedWith("invalid JSON")},
		{"two minus signs are refused", `--1`, refusedWith("invalid JSON")},
		{"the largest float64 is a number", `1.7976931348623157e308`, accepted},
		{"the smallest float64 is a number", `5e-324`, accepted},
		{"zero with a huge exponent is zero", `0.000e999`, accepted},
		{"beyond the largest float64 is refused", `1.7976931348623159e308`, refusedWith("n: number 1.7976931348623159e308 is beyond the range of a 64-bit float")},
		{"1e400 is refused", `1e400`, refusedWith("n: number 1e400 is beyond the range of a 64-bit float")},
		{"-1e400 is refused", `-1E+400`, refusedWith("beyond the range of a 64-bit float")},
		{"1e-400 is refused", `1e-400`, refusedWith("n: number 1e-400 is too small for a 64-bit float")},
		{"below the smallest float64 is refused", `-2e-324`, refusedWith("too small for a 64-bit float")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := `{"n":` + tc.number + `}`
			_, err := strictjson.ParseObject([]byte(body))
			checkOutcome(t, err, tc.want)
			if err == nil && !json.Valid([]byte(body)) {
				t.Fatalf("accepted a number json.Valid refuses")
			}
			if err != nil && len(tc.number) <= 100 && !strings.Contains(err.Error(), "64-bit float") && json.Valid([]byte(body)) {
				t.Fatalf("refused a number json.Valid accepts")
			}
		})
	}
}

// A reviewer must see exactly what will run: members keep the bytes sent,
// with their escapes and spacing, in document order; keys are decoded.
func TestParseObjectKeepsRawMembers(t *testing.T) {
	t.Parallel()
	body := ` { "b" :  [1, 2.0 ,"\u00e9"] ,"a":"x\ty\u00e9\ud83d\ude00" , "\n\u00e9":{"z" :1e2}, "n":null}`
	got, err := strictjson.ParseObject([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []strictjson.Member{
		{Key: "b", Value: json.RawMessage(`[1, 2.0 ,"\u00e9"]`)},
		{Key: "a", Value: json.RawMessage(`"x\ty\u00e9\ud83d\ude00"`)},
		{Key: "\né", Value: json.RawMessage(`{"z" :1e2}`)},
		{Key: "n", Value: json.RawMessage(`null`)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d members, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Key != want[i].Key || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Errorf("member %d = %q %s, want %q %s", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
}

// Every escape decodes to what JSON says it means (checked through the key).
func TestParseObjectDecodesEscapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		escaped string
		want    string
	}{
		{`\"`, `"`}, {`\\`, `\`}, {`\/`, `/`}, {`\b`, "\b"}, {`\f`, "\f"}, {`\n`, "\n"},
		{`\r`, "\r"}, {`\t`, "\t"}, {`\u00e9`, "é"}, {`\u00E9`, "é"}, {`\u212a`, "\u212a"},
		{`\ud83d\ude00`, "😀"}, {`a\u0062c`, "abc"}, {`é\n`, "é\n"},
	}
	for _, tc := range tests {
		members, err := strictjson.ParseObject([]byte(`{"` + tc.escaped + `":1}`))
		if err != nil {
			t.Errorf("%s: %v", tc.escaped, err)
			continue
		}
		if members[0].Key != tc.want {
			t.Errorf("%s decoded to %q, want %q", tc.escaped, members[0].Key, tc.want)
		}
	}
}

// A refusal names the path of the fault and the byte where reading
// stopped, and says the path before the reason.
func TestErrorNamesPathAndOffset(t *testing.T) {
	t.Parallel()
	doc := `{"arguments":{"list":[0,{"x":"\u0000"}]}}`
	_, err := strictjson.ParseObject([]byte(doc))
	var e *strictjson.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want *strictjson.Error", err, err)
	}
	if e.Path != "arguments.list[1].x" || e.Reason != `NUL character (\u0000) in string` || e.Offset != strings.Index(doc, `"}`) {
		t.Fatalf("%+v, want the NUL at arguments.list[1].x, offset %d", e, strings.Index(doc, `"}`))
	}
	if e.Error() != "arguments.list[1].x: "+e.Reason {
		t.Fatalf("Error() = %q, want the path, then the reason", e.Error())
	}
	_, err = strictjson.ParseObject([]byte(`[]`))
	if !errors.As(err, &e) || e.Path != "" || e.Error() != "body must be a JSON object" {
		t.Fatalf("not an object: %#v, want no path", err)
	}
}

// caseVariants returns the runes that some decoder could take for r when
// matching names without regard to case: r's simple-folding orbit and its
// upper, lower and title forms.
func caseVariants(r rune) []rune {
	var vs []rune
	add := func(v rune) {
		if v != r && !strings.ContainsRune(string(vs), v) {
			vs = append(vs, v)
		}
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		add(f)
	}
	add(unicode.ToUpper(r))
	add(unicode.ToLower(r))
	add(unicode.ToTitle(r))
	add(unicode.ToUpper(unicode.ToLower(r)))
	return vs
}

// Exhaustively: no two keys that differ only in the case of one rune, for
// any rune in Unicode, get past ParseObject; and each pair encoding/json
// itself confuses is among them (encoding/json is the oracle, not a copy of
// its folding).
func TestParseObjectRefusesEveryCaseVariant(t *testing.T) {
	t.Parallel()
	pairs, confused := 0, 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		variants := caseVariants(r)
		if len(variants) == 0 {
			continue
		}
		key := "x" + string(r)
		// A struct whose one field is named key: encoding/json fills it from
		// every key it takes for that name.
		typ := reflect.StructOf([]reflect.StructField{{
			Name: "F", Type: reflect.TypeFor[int](), Tag: reflect.StructTag(`json:"` + key + `"`),
		}})
		for _, v := range variants {
			other := "x" + string(v)
			body := `{"` + key + `":1,"` + other + `":2}`
			pairs++
			if _, err := strictjson.ParseObject([]byte(body)); err == nil {
				t.Errorf("keys %q (%U) and %q (%U) both accepted", key, r, other, v)
			}
			dst := reflect.New(typ)
			if err := json.Unmarshal([]byte(`{"`+other+`":7}`), dst.Interface()); err == nil && dst.Elem().Field(0).Int() == 7 {
				confused++
			}
		}
	}
	// The test can fail: there are thousands of pairs, and encoding/json
	// really does confuse most of them.
	if pairs < 2000 || confused < 2000 {
		t.Fatalf("only %d pairs, %d confused by encoding/json: the test is not testing", pairs, confused)
	}
	t.Logf("%d case-variant pairs refused, %d of them confused by encoding/json", pairs, confused)
}

// The brief's attack, shown against encoding/json itself: it reads the last
// of two case-variant keys, and folds ſ to s and K to k.
func TestEncodingJSONConfusesCaseVariants(t *testing.T) {
	t.Parallel()
	var in struct {
		Tool string `json:"tool"`
		Mask string `json:"mask"`
		Key  string `json:"key"`
	}
	if err := json.Unmarshal([]byte(`{"tool":"ls","TOOL":"rm -rf /","maſk":"evil","\u212aey":"evil"}`), &in); err != nil {
		t.Fatal(err)
	}
	if in.Tool != "rm -rf /" || in.Mask != "evil" || in.Key != "evil" {
		t.Fatalf("encoding/json no longer folds keys (%+v); revisit foldKey's comment", in)
	}
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string
		data string
		want []string
	}{
		{"a number is a JSON value", "v", `1`, accepted},
		{"a string is a JSON value", "v", `"s"`, accepted},
		{"null is a JSON value", "v", `null`, accepted},
		{"an array is a JSON value", "v", ` [1, {"a":[]}] `, accepted},
		{"an object is a JSON value", "v", `{"a":1}`, accepted},
		{"an empty document is refused", "v", ``, refusedWith("v: unexpected end of JSON")},
		{"a duplicate key is refused under the path given", "context", `{"a":{"b":1,"b":2}}`, refusedWith(`context.a: duplicate key "b"`)},
		{"a case variant is refused under the path given", "context", `{"Id":1,"iD":2}`, refusedWith(`context: keys "Id" and "iD" differ only in case`)},
		{"invalid UTF-8 is refused under the path given", "context", "[\"\xff\"]", refusedWith("context[0]: invalid UTF-8")},
		{"trailing data is refused", "context", `{} x`, refusedWith("unexpected data after the JSON value at byte 3")},
		{"two values are refused", "v", `1 2`, refusedWith("unexpected data after the JSON value at byte 2")},
		{"64 nested arrays are fine", "v", strings.Repeat("[", 64) + strings.Repeat("]", 64), accepted},
		{"65 nested arrays are refused", "v", strings.Repeat("[", 65) + strings.Repeat("]", 65), refusedWith("nesting deeper than 64")},
		{"64 nested objects are fine", "v", nestObjects(64), accepted},
		{"65 nested objects are refused", "v", nestObjects(65), refusedWith("nesting deeper than 64")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkOutcome(t, strictjson.Check(tc.path, []byte(tc.data)), tc.want)
		})
	}
}

// Canonical makes documents with the same meaning hash alike: key order and
// insignificant space do not matter; values, array order, number text and
// text do.
func TestCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"key order does not matter", `{"b":1,"a":2}`, `{"a":2,"b":1}`, true},
		{"key order deep inside does not matter", `{"x":[{"b":1,"a":{"d":1,"c":2}}]}`, `{"x":[{"a":{"c":2,"d":1},"b":1}]}`, true},
		{"whitespace does not matter", "{ \"a\" :\t[ 1 , 2 ]\n}", `{"a":[1,2]}`, true},
		{"an escape and the character it stands for are the same", `{"a":"\u00e9\/"}`, `{"a":"é/"}`, true},
		{"array order matters", `{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{"1.0 and 1 differ: number text is kept", `{"a":1.0}`, `{"a":1}`, false},
		{"1e2 and 100 differ", `{"a":1e2}`, `{"a":100}`, false},
		{"-0 and 0 differ", `{"a":-0}`, `{"a":0}`, false},
		{"a number and a string differ", `{"a":1}`, `{"a":"1"}`, false},
		{"null and an absent key differ", `{"a":null}`, `{}`, false},
		{"é and e differ", `{"a":"é"}`, `{"a":"e"}`, false},
		{"composed and decomposed é differ (no normalisation)", `{"a":"\u00e9"}`, `{"a":"e\u0301"}`, false},
		{"keys differing in case differ", `{"a":1}`, `{"A":1}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ca, err := strictjson.Canonical([]byte(tc.a))
			if err != nil {
				t.Fatal(err)
			}
			cb, err := strictjson.Canonical([]byte(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(ca, cb) != tc.same {
				t.Fatalf("Canonical(%s) = %s, Canonical(%s) = %s; same = %v, want %v", tc.a, ca, tc.b, cb, !tc.same, tc.same)
			}
		})
	}
}

func TestCanonicalOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"keys sorted and space removed", ` { "b" : 1.0 , "a" : [ true , null ] } `, `{"a":[true,null],"b":1.0}`},
		{"number text kept as written", `[1.0, 1E+2, -0, 123456789012345678901234567890]`, `[1.0,1E+2,-0,123456789012345678901234567890]`},
		{"unicode and HTML characters kept unescaped", `{"a":"é <b>&</b> 😀 \u00e9"}`, `{"a":"é <b>&</b> 😀 é"}`},
		{"keys sorted by bytes", `{"é":1,"y":2,"Z":3,"a":4}`, `{"Z":3,"a":4,"y":2,"é":1}`},
		{"a scalar stays a scalar", `"x"`, `"x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := strictjson.Canonical([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonical(%s) = %s, want %s", tc.in, got, tc.want)
			}
			again, err := strictjson.Canonical(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("Canonical is not idempotent: %s -> %s (%v)", got, again, err)
			}
			if err := strictjson.Check("", got); err != nil {
				t.Fatalf("canonical output is not strict JSON: %v", err)
			}
		})
	}
}

// Canonical must not paper over what the strict parser refuses: encoding/json
// would keep the last duplicate and ignore trailing data, so {"a":1,"a":2}
// would hash like {"a":2}.
func TestCanonicalRefusesNonStrictJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"duplicate keys are refused", `{"a":1,"a":2}`, refusedWith(`duplicate key "a"`)},
		{"case variants are refused", `{"tool":"ls","TOOL":"rm"}`, refusedWith("differ only in case")},
		{"trailing data is refused", `{"a":1} {"a":2}`, refusedWith("unexpected data")},
		{"invalid UTF-8 is refused", "{\"a\":\"\xff\"}", refusedWith("invalid UTF-8")},
		{"a lone surrogate is refused", `{"a":"\ud800"}`, refusedWith("unpaired surrogate")},
		{"an empty document is refused", ``, refusedWith("unexpected end of JSON")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := strictjson.Canonical([]byte(tc.in))
			checkOutcome(t, err, tc.want)
		})
	}
}

// The parser names paths in errors but must not build them for every value:
// one long key over many array elements made a 1 MiB body cost minutes of
// CPU (path length × elements bytes of garbage). This test measures bytes
// allocated, not time, so a busy machine cannot make it flaky; it is not
// parallel because the allocation counter is process-wide.
func TestParseObjectCostIsLinear(t *testing.T) {
	key := strings.Repeat("k", 64<<10)
	var members strings.Builder
	for i := range 1 << 10 {
		fmt.Fprintf(&members, `"m%d":[0,0,0,0,0,0,0,0],`, i)
	}
	shapes := map[string]string{
		"a long key over many elements": `{"` + key + `":[` + strings.Repeat("0,", 32<<10) + `0]}`,
		"long keys nested 64 deep over many members": strings.Repeat(`{"`+key[:1<<10]+`":`, 62) +
			`{` + members.String() + `"b":0}` + strings.Repeat("}", 62),
	}
	for name, body := range shapes {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := strictjson.ParseObject([]byte(body))
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %.200v", name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 8*uint64(len(body)) {
			t.Errorf("%s: parsing %d bytes allocated %d bytes", name, len(body), got)
		}
	}
}
