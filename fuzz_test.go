package airlock_test

// Fuzz targets (T11 in docs/reliability.md). In CI each runs for a fixed
// count of executions, one at a time (go test accepts one -fuzz target per
// run; .ci/run has the counts):
//
//	go test -run '^$' -fuzz '^FuzzParseCreateRequest$' -fuzztime 600000x .
//
// Seeds below, plus any crashers saved under testdata/fuzz, run as ordinary
// tests in every `go test`.

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// nestObjects returns an object nested depth levels deep: depth 1 is {}.
func nestObjects(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// nestArrays returns an object holding arrays, depth levels in all.
func nestArrays(depth int) string {
	return `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + "}"
}

// jsonSeeds are documents that sit on the edges of the strict parser.
var jsonSeeds = []string{
	`{}`,
	briefExample,
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
	`{"a":"\" \\ \/ \b \f \n \r \t \u00e9"}`,
	"{\"a\":\"\t\"}",
	`{"a":tru}`,
	`{"a":[1,]}`,
	`{"a" : [ true , false , null ] }`,
	"\xef\xbb\xbf{}",
}

func FuzzParseCreateRequest(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"tool":"ls","arguments":{}}`,
		`{"tool":"ls","arguments":{"b":1.0,"a":[1e2,"\u00e9"]},"context":null}`,
		`{"tool":"ls","arguments":{},"context":{"x":{"y":1,"Y":2}}}`,
		`{"tool":"ls\u202e","arguments":{}}`,
		`{"tool":"ls","arguments":{},"state":"approved"}`,
		`{"tool":"ls","arguments":{},"timeout":"PT30M","agent_reasoning":"because"}`,
		`{"tool":5,"arguments":[]}`,
		`{"Tool":"ls","arguments":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := airlock.ParseCreateRequest(body)
		if err != nil {
			if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
				t.Fatalf("refused with %q, want invalid_request: %v", airlock.ErrorCode(err), err)
			}
			return
		}
		fp, err := in.Fingerprint("ins_fuzz")
		if err != nil {
			t.Fatalf("accepted body does not fingerprint: %v", err)
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("accepted input fails Validate again: %v", err)
		}
		args, err := airlock.Canonical(in.Arguments)
		if err != nil {
			t.Fatalf("accepted arguments have no canonical form: %v", err)
		}
		if _, err := airlock.ParseObject(args); err != nil {
			t.Fatalf("canonical arguments %s do not re-parse: %v", args, err)
		}
		again, err := airlock.ParseCreateRequest(body)
		if err != nil {
			t.Fatalf("second parse refused: %v", err)
		}
		if fp2, err := again.Fingerprint("ins_fuzz"); err != nil || fp2 != fp {
			t.Fatalf("second parse fingerprints %s (%v), first %s", fp2, err, fp)
		}
		// The same call re-encoded, fields reversed, with canonical
		// arguments, is the same call.
		rebuilt := reencode(t, in, args)
		re, err := airlock.ParseCreateRequest(rebuilt)
		if err != nil {
			t.Fatalf("re-encoded body %s refused: %v", rebuilt, err)
		}
		if fp3, err := re.Fingerprint("ins_fuzz"); err != nil || fp3 != fp {
			t.Fatalf("re-encoded body %s fingerprints %s (%v), original %s", rebuilt, fp3, err, fp)
		}
		if fp4, _ := in.Fingerprint("ins_other"); fp4 == fp {
			t.Fatalf("fingerprint does not depend on the instance")
		}
	})
}

// reencode writes in as a new body: fields in reverse order, arguments in
// canonical form.
func reencode(t *testing.T, in airlock.CreateRequestInput, args []byte) []byte {
	t.Helper()
	str := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var parts []string
	if in.Context != nil {
		parts = append(parts, `"context": `+string(in.Context))
	}
	parts = append(parts,
		`"agent_reasoning": `+str(in.AgentReasoning),
		`"timeout": `+str(in.Timeout),
		`"arguments": `+string(args),
		`"tool": `+str(in.Tool))
	return []byte("{\n" + strings.Join(parts, ",\n") + "\n}")
}

func FuzzDecodeDecision(f *testing.F) {
	for _, s := range []string{
		`{"status":"approved"}`,
		`{"status":"denied","note":"no"}`,
		`{"status":"approved","answer":"yes","valid_for":"PT10M","note":"ok"}`,
		`{"status":"denied","answer":"yes"}`,
		`{"status":"denied","valid_for":"5m"}`,
		`{"status":"denied","status":"approved"}`,
		`{"status":"denied","STATUS":"approved"}`,
		`{"status":true}`,
		`{"status":"approved","decided_by":"me"}`,
		`{"status":"approved","extra":1}`,
		`{"status":"approved","note":"\u0000"}`,
		`{"status":"approved","valid_for":"P999999999999D"}`,
	} {
		f.Add([]byte(s))
	}
	limits := airlock.DefaultLimits()
	questions := []*airlock.Question{nil, {}, {Choices: []string{"yes", "no"}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in airlock.DecisionInput
		err := airlock.DecodeObject(body, &in)
		if err == nil {
			err = in.Validate()
		}
		if err != nil {
			if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
				t.Fatalf("refused with %q, want invalid_request: %v", airlock.ErrorCode(err), err)
			}
			return
		}
		if in.Status != airlock.StateApproved && in.Status != airlock.StateDenied {
			t.Fatalf("accepted status %q", in.Status)
		}
		if in.Status == airlock.StateDenied && (in.Answer != "" || in.ValidFor != "") {
			t.Fatalf("accepted a denial with an answer or a validity: %+v", in)
		}
		// What the strict decoder accepted, encoding/json reads the same way.
		var plain airlock.DecisionInput
		if err := json.Unmarshal(body, &plain); err != nil || !reflect.DeepEqual(plain, in) {
			t.Fatalf("encoding/json reads %+v (%v), strict decoder %+v", plain, err, in)
		}
		for _, q := range questions {
			err := in.CheckAnswer(airlock.Request{Question: q})
			if err != nil && airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
				t.Fatalf("CheckAnswer: %v", err)
			}
		}
		if d, err := limits.Validity(in.ValidFor); err == nil && (d < time.Second || d > limits.MaxApprovalValidity) {
			t.Fatalf("validity %v outside [1s, %v]", d, limits.MaxApprovalValidity)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"30m", "1h30m", "1.5h", "+5m", "-5m", "0", "9999999999h", "2562047h47m16.854775807s", ".5s", "1.s",
		"PT30M", "P1D", "P1DT2H30M", "P2W", "P1W2D", "PT0.5S", "PT0,5S", "pt30m", "P1Y", "P1M", "PT1M",
		"P999999999999D", "PT9223372036.9S", "PT1S1H", "PT1.5H30M", "PT5ſ", "P", "PT", "P1DT", "",
	} {
		f.Add(s)
	}
	limits := airlock.DefaultLimits()
	f.Fuzz(func(t *testing.T, s string) {
		d, err := airlock.ParseDuration(s)
		if err == nil {
			if d <= 0 {
				t.Fatalf("ParseDuration(%q) = %v, want positive", s, d)
			}
			// A window a reviewer reads has no look-alike characters; Go's
			// "µs" is the one non-ASCII unit.
			if ascii := strings.NewReplacer("µs", "", "μs", "").Replace(s); strings.ContainsFunc(ascii, func(r rune) bool { return r >= utf8.RuneSelf }) {
				t.Fatalf("ParseDuration(%q) = %v: accepted non-ASCII", s, d)
			}
			if d2, err := airlock.ParseDuration(d.String()); err != nil || d2 != d {
				t.Fatalf("ParseDuration(%q) = %v, but %q reads as %v (%v)", s, d, d.String(), d2, err)
			}
			if s[0] == 'P' || s[0] == 'p' {
				if d3, err := airlock.ParseDuration(strings.ToLower(s)); err != nil || d3 != d {
					t.Fatalf("%q is %v but its lower case reads as %v (%v)", s, d, d3, err)
				}
			}
		} else if err.Error() == "" {
			t.Fatalf("empty error for %q", s)
		}
		if w, err := limits.Window(s); err == nil && (w < limits.MinTimeout || w > limits.MaxTimeout) {
			t.Fatalf("window %v for %q outside the limits", w, s)
		} else if err != nil && airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Fatalf("Window(%q): %v", s, err)
		}
		if v, err := limits.Validity(s); err == nil && (v < time.Second || v > limits.MaxApprovalValidity) {
			t.Fatalf("validity %v for %q outside the limits", v, s)
		}
	})
}
