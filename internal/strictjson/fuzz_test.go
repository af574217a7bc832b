package strictjson_test

// FuzzParseObjectAgreesWithEncodingJSON is one of the fuzz targets of T11
// (docs/reliability.md); in CI it runs for a fixed count of executions
// (.ci/run):
//
//	go test -run '^$' -fuzz '^FuzzParseObjectAgreesWithEncodingJSON$' -fuzztime 600000x ./internal/strictjson
//
// Seeds below, plus any crashers saved under testdata/fuzz, run as ordinary
// tests in every `go test`.

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/strictjson"
)

// jsonSeeds are documents that sit on the edges of the strict parser.
var jsonSeeds = []string{
	`{}`,
	`{"tool":"issue_refund","arguments":{"payment_id":"payment_123","amount":4900,"currency":"GBP"},"timeout":"30m"}`,
	`{"tool":"ls","TOOL":"rm -rf /"}`,
	`{"s":1,"ſ":2}`,
	`{"k":1,"\u212a":2}`,
	`{"a":1,"\u0061":2}`,
	`{"a":{"b":[{"c":1,"c":2}]}}`,
	"{\"a\":\"\xff\"}",
	"{\"a\":\"\xed\xa0\x80\"}",
	"{\"a\":\"x\x00\"}",
	`{"a":"\u0000"}`,
	`{"a":"\ud800"}`,
	`{"a":"\ud83d\ude00"}`,
	`{"a":"\ud800\"}`,
	nestObjects(64),
	nestObjects(65),
	nestArrays(65),
	`{} {}`,
	`{"n":-0.5e-3}`,
	`{"n":01}`,
	`{"n":` + strings.Repeat("9", 101) + `}`,
	`{"n":1e400}`,
	`{"n":-2e-324}`,
	`{"a":"\" \\ \/ \b \f \n \r \t \u00e9"}`,
	"{\"a\":\"\t\"}",
	`{"a":tru}`,
	`{"a":[1,]}`,
	`{"a" : [ true , false , null ] }`,
	"\xef\xbb\xbf{}",
}

// strictReasons are the only reasons ParseObject may refuse a document that
// json.Valid accepts: everything else it refuses must be invalid JSON.
var strictReasons = []string{
	"duplicate key", "differ only in case", "invalid UTF-8", "NUL character",
	"unpaired surrogate", "nesting deeper than", "longer than 100 characters",
	"must be a JSON object", "a 64-bit float",
}

func FuzzParseObjectAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		members, err := strictjson.ParseObject(data)
		valid := json.Valid(data)
		if err != nil {
			var e *strictjson.Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("refused with %#v, want a *strictjson.Error within the document", err)
			}
			if valid && !slices.ContainsFunc(strictReasons, func(r string) bool { return strings.Contains(err.Error(), r) }) {
				t.Fatalf("refused valid JSON %q for a reason that is not a strictness rule: %v", data, err)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted %q, which json.Valid refuses", data)
		}
		if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
			t.Fatalf("accepted invalid UTF-8 or a NUL in %q", data)
		}
		if err := strictjson.Check("", data); err != nil {
			t.Fatalf("ParseObject accepts but CheckJSON refuses: %v", err)
		}
		// With no duplicates, encoding/json sees exactly our members.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("encoding/json refuses what ParseObject accepted: %v", err)
		}
		if len(m) != len(members) {
			t.Fatalf("encoding/json sees %d keys (%q), ParseObject %d", len(m), slices.Collect(maps.Keys(m)), len(members))
		}
		for _, mem := range members {
			if v, ok := m[mem.Key]; !ok || !bytes.Equal(v, mem.Value) {
				t.Fatalf("member %q = %s, encoding/json has %s", mem.Key, mem.Value, v)
			}
			if err := strictjson.Check(mem.Key, mem.Value); err != nil {
				t.Fatalf("member %q value %s is not strict on its own: %v", mem.Key, mem.Value, err)
			}
		}
		checkNoFoldedKeys(t, members)
		c, err := strictjson.Canonical(data)
		if err != nil {
			t.Fatalf("accepted document has no canonical form: %v", err)
		}
		if c2, err := strictjson.Canonical(c); err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("Canonical is not idempotent: %s -> %s (%v)", c, c2, err)
		}
		if _, err := strictjson.ParseObject(c); err != nil {
			t.Fatalf("canonical form %s does not re-parse: %v", c, err)
		}
	})
}

// checkNoFoldedKeys fails t if two keys of an accepted object, or of an
// object nested in it, match under strings.EqualFold: encoding/json matches
// field names exactly that way (see its foldName), so it would read one key
// as the other.
func checkNoFoldedKeys(t *testing.T, members []strictjson.Member) {
	t.Helper()
	for i, a := range members {
		for _, b := range members[:i] {
			if strings.EqualFold(a.Key, b.Key) {
				t.Fatalf("accepted keys %q and %q, which encoding/json takes for one another", b.Key, a.Key)
			}
		}
		if len(a.Value) > 0 && a.Value[0] == '{' {
			nested, err := strictjson.ParseObject(a.Value)
			if err != nil {
				t.Fatalf("member %q: accepted document holds an object ParseObject refuses: %v", a.Key, err)
			}
			checkNoFoldedKeys(t, nested)
		}
	}
}
