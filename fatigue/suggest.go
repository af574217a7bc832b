package fatigue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/store"
)

// Patterns of calls people approved (docs/policy.md, "Suggestions").
const (
	// PatternSameArguments is one tool with the same arguments, compared
	// in canonical form (RFC 8785: key order, spacing and the spelling
	// of numbers do not matter), as a same_arguments grant compares them.
	PatternSameArguments = "same_arguments"
	// PatternConstantKeys is one tool with the argument keys whose value
	// was the same in every approval of the tool, whatever the others: a
	// rule on those keys alone. It needs one such key at least.
	PatternConstantKeys = "constant_keys"
)

// DefaultMinApprovals is how many approvals a pattern needs before it is
// suggested (GET /v1/suggestions's min).
const DefaultMinApprovals = 10

// MaxListedIDs bounds the request IDs a suggestion lists; Approvals
// counts them all.
const MaxListedIDs = 100

// MaxSuggestions bounds the suggestions of one answer, the most approved
// first.
const MaxSuggestions = 100

// Suggestion is a pattern of tool calls people approved, unchanged, at
// least the minimum number of times in the window, with no denial of a
// call of the pattern, and the rule or grant that would have approved
// them.
type Suggestion struct {
	Pattern string
	Tool    string
	// Arguments are, for same_arguments, the arguments in canonical form;
	// for constant_keys, an object of the constant keys and their values.
	Arguments json.RawMessage
	// Varying are, for constant_keys, the keys whose value varied, or
	// that some approvals lacked, sorted.
	Varying []string
	// Approvals counts the approvals the pattern covers; RequestIDs lists
	// up to MaxListedIDs of them, sorted.
	Approvals  int
	RequestIDs []string
	// Approvers are the distinct people who approved them, sorted.
	Approvers []string
	// Match is the CEL expression (docs/policy.md's language) that holds
	// for exactly the calls of the pattern; Rule is a policy rule with it,
	// in shadow, as YAML to paste under rules:.
	Match string
	Rule  string
	// Grant is a proposed POST /v1/grants body, when every approval was on
	// one instance; nil otherwise.
	Grant *GrantProposal
}

// GrantProposal is the body of a grant that would have covered a
// suggestion's calls on its one instance.
type GrantProposal struct {
	Tool       string `json:"tool"`
	Match      string `json:"match"`
	InstanceID string `json:"instance_id"`
	ExpiresIn  string `json:"expires_in"`
}

// ref is what a suggestion keeps of an approval.
type ref struct {
	ID, InstanceID, DecidedBy string
}

// denial is a denied call's arguments in canonical form, whole and key by
// key.
type denial struct {
	canonical string
	keys      map[string]string
}

// group is the approvals of one tool with the same arguments.
type group struct {
	refs []ref
}

// toolCalls is what the Suggester keeps of one tool: its approvals, by
// arguments and all together, the keys whose value was the same in every
// approval so far, every key seen, and its denials.
type toolCalls struct {
	approvals []ref
	same      map[string]*group
	constant  map[string]string
	seen      map[string]bool
	denials   []denial
}

// canonicalArgs reads arguments as a JSON object, each value and the whole
// in canonical form (RFC 8785); ok false when they are not an object
// (absent once purged, an array, invalid). A string without escapes or
// control characters, a small integer, true, false and null are their own
// canonical form; other values are transformed.
func canonicalArgs(arguments []byte) (whole string, keys map[string]string, ok bool) {
	if len(arguments) == 0 {
		return "", nil, false
	}
	keys, ok = scanFlat(arguments)
	if !ok {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(arguments, &obj); err != nil || obj == nil {
			return "", nil, false
		}
		keys = make(map[string]string, len(obj))
		for k, v := range obj {
			cv, ok := canonicalValue(v)
			if !ok {
				return "", nil, false
			}
			keys[k] = cv
		}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.SortFunc(names, compareUTF16)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(canonicalKey(k))
		b.WriteByte(':')
		b.WriteString(keys[k])
	}
	b.WriteByte('}')
	return b.String(), keys, true
}

// scanFlat reads the common case without a decoder: an object whose keys
// and values are all plain (plainJSON), its values as they are; ok false
// for anything else, which the caller decodes.
func scanFlat(b []byte) (map[string]string, bool) {
	i := 0
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	token := func() ([]byte, bool) { // a plain string, number or literal
		start := i
		if i < len(b) && b[i] == '"' {
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					return nil, false
				}
				i++
			}
			if i == len(b) {
				return nil, false
			}
			i++
		} else {
			for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
				i++
			}
		}
		v := b[start:i]
		return v, plainJSON(v)
	}
	ws()
	if i == len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	keys := map[string]string{}
	ws()
	if i < len(b) && b[i] == '}' {
		i++
		ws()
		return keys, i == len(b)
	}
	for {
		ws()
		k, ok := token()
		if !ok || len(k) < 2 || k[0] != '"' {
			return nil, false
		}
		ws()
		if i == len(b) || b[i] != ':' {
			return nil, false
		}
		i++
		ws()
		v, ok := token()
		if !ok {
			return nil, false
		}
		name := string(k[1 : len(k)-1])
		if _, dup := keys[name]; dup {
			return nil, false
		}
		keys[name] = string(v)
		ws()
		if i == len(b) {
			return nil, false
		}
		if b[i] == '}' {
			i++
			ws()
			return keys, i == len(b)
		}
		if b[i] != ',' {
			return nil, false
		}
		i++
	}
}

// canonicalValue is v in canonical form.
func canonicalValue(v []byte) (string, bool) {
	if plainJSON(v) {
		return string(v), true
	}
	c, err := approvaltoken.Canonical(v)
	return string(c), err == nil
}

// plainJSON reports whether v is already canonical: a string with no
// escape and no control character, in valid UTF-8; an integer of at most
// 15 digits with no leading zero; true, false or null.
func plainJSON(v []byte) bool {
	switch {
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		inner := v[1 : len(v)-1]
		for _, c := range inner {
			if c < 0x20 || c == '\\' || c == '"' {
				return false
			}
		}
		return utf8.Valid(inner)
	case string(v) == "true" || string(v) == "false" || string(v) == "null" || string(v) == "0":
		return true
	}
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || digits[0] == '0' {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// canonicalKey is k as a canonical JSON string.
func canonicalKey(k string) string {
	q, _ := json.Marshal(k)
	if plainJSON(q) {
		return string(q)
	}
	c, err := approvaltoken.Canonical(q)
	if err != nil {
		return string(q)
	}
	return string(c)
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// sorts an object's keys.
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// Suggester gathers decided calls (store.History.DecidedCalls) and
// proposes rules for the patterns people approved.
type Suggester struct {
	tools map[string]*toolCalls
}

// Add takes one decided call. Approvals by a rule, a grant or the system
// are neither counted nor held against a pattern; every denial is.
func (s *Suggester) Add(d store.DecidedRequest) {
	approved := d.State == "approved"
	if approved && KindOf(d.DecidedBy) != KindPerson {
		return
	}
	whole, keys, ok := canonicalArgs(d.Arguments)
	if !ok {
		return
	}
	if s.tools == nil {
		s.tools = map[string]*toolCalls{}
	}
	t := s.tools[d.Tool]
	if t == nil {
		t = &toolCalls{same: map[string]*group{}, seen: map[string]bool{}}
		s.tools[d.Tool] = t
	}
	if !approved {
		t.denials = append(t.denials, denial{canonical: whole, keys: keys})
		return
	}
	r := ref{ID: d.ID, InstanceID: d.InstanceID, DecidedBy: d.DecidedBy}
	t.approvals = append(t.approvals, r)
	g := t.same[whole]
	if g == nil {
		g = &group{}
		t.same[whole] = g
	}
	g.refs = append(g.refs, r)
	if t.constant == nil {
		t.constant = maps.Clone(keys)
	} else {
		for k, v := range t.constant {
			if cv, ok := keys[k]; !ok || cv != v {
				delete(t.constant, k)
			}
		}
	}
	for k := range keys {
		if !t.seen[k] {
			t.seen[k] = true
		}
	}
}

// Suggestions are the patterns approved at least min times with no denial,
// the most approved first (then by tool and arguments), at most
// MaxSuggestions.
func (s *Suggester) Suggestions(min int) []Suggestion {
	if min < 1 {
		min = DefaultMinApprovals
	}
	var out []Suggestion
	for tool, t := range s.tools {
		// Same arguments.
		for args, g := range t.same {
			if len(g.refs) < min || slices.ContainsFunc(t.denials, func(d denial) bool { return d.canonical == args }) {
				continue
			}
			_, keys, _ := canonicalArgs([]byte(args)) // read again: kept for the few suggested
			out = append(out, suggest(PatternSameArguments, tool, keys, nil, g.refs, true))
		}
		// Constant keys, when the arguments varied.
		if len(t.same) < 2 || len(t.approvals) < min || len(t.constant) == 0 {
			continue
		}
		if slices.ContainsFunc(t.denials, func(d denial) bool { return hasAll(d.keys, t.constant) }) {
			continue
		}
		var varying []string
		for k := range t.seen {
			if _, ok := t.constant[k]; !ok {
				varying = append(varying, k)
			}
		}
		slices.Sort(varying)
		out = append(out, suggest(PatternConstantKeys, tool, t.constant, varying, t.approvals, false))
	}
	slices.SortFunc(out, func(a, b Suggestion) int {
		if a.Approvals != b.Approvals {
			return b.Approvals - a.Approvals
		}
		if c := strings.Compare(a.Tool, b.Tool); c != 0 {
			return c
		}
		if c := strings.Compare(a.Pattern, b.Pattern); c != 0 {
			return c
		}
		return bytes.Compare(a.Arguments, b.Arguments)
	})
	if len(out) > MaxSuggestions {
		out = out[:MaxSuggestions]
	}
	return out
}

// hasAll reports whether keys holds every key of want with its value.
func hasAll(keys, want map[string]string) bool {
	for k, v := range want {
		if keys[k] != v {
			return false
		}
	}
	return true
}

// suggest builds the suggestion of a pattern over its approvals cs: keys
// are its keys and values (canonical); exact adds the arguments' size, so
// that the match holds for those arguments alone.
func suggest(pattern, tool string, keys map[string]string, varying []string, cs []ref, exact bool) Suggestion {
	s := Suggestion{Pattern: pattern, Tool: tool, Varying: varying, Approvals: len(cs)}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.SortFunc(names, compareUTF16)
	var args bytes.Buffer
	args.WriteByte('{')
	terms := []string{"request.tool == " + strconv.Quote(tool)}
	if exact {
		terms = append(terms, fmt.Sprintf("size(request.arguments) == %d", len(keys)))
	}
	for i, k := range names {
		if i > 0 {
			args.WriteByte(',')
		}
		args.WriteString(canonicalKey(k))
		args.WriteByte(':')
		args.WriteString(keys[k])
		terms = append(terms, fmt.Sprintf("%s in request.arguments && request.arguments[%s] == %s",
			strconv.Quote(k), strconv.Quote(k), celLiteral(json.RawMessage(keys[k]))))
	}
	args.WriteByte('}')
	s.Arguments = args.Bytes()
	s.Match = strings.Join(terms, " && ")

	ids := make([]string, 0, len(cs))
	people := map[string]bool{}
	instances := map[string]bool{}
	for _, c := range cs {
		ids = append(ids, c.ID)
		people[c.DecidedBy] = true
		instances[c.InstanceID] = true
	}
	slices.Sort(ids)
	s.RequestIDs = ids[:min(len(ids), MaxListedIDs)]
	for p := range people {
		s.Approvers = append(s.Approvers, p)
	}
	slices.Sort(s.Approvers)

	sum := sha256.Sum256([]byte(pattern + "\x00" + tool + "\x00" + string(s.Arguments)))
	name := "suggested " + tool
	if len(name) > 80 {
		name = name[:80]
	}
	name += " " + hex.EncodeToString(sum[:4])
	s.Rule = fmt.Sprintf("- name: %s\n  match: %s\n  action: allow\n  shadow: true\n", yamlQuote(name), yamlQuote(s.Match))

	if len(instances) == 1 {
		g := &GrantProposal{Tool: tool, InstanceID: cs[0].InstanceID, ExpiresIn: "720h", Match: s.Match}
		if exact {
			g.Match = "same_arguments"
		}
		s.Grant = g
	}
	return s
}

// yamlQuote is s as a YAML single-quoted scalar: every character as it
// is but the quote, doubled. s holds no line break (a match's strings are
// quoted with escapes, and a tool name has none).
func yamlQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// celLiteral writes the JSON value raw (canonical) as a CEL literal that
// equals it when compared with the JSON the policy reads: strings quoted,
// integers as integers, other numbers as doubles, lists and maps
// element by element.
func celLiteral(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "null"
	}
	var b strings.Builder
	writeCEL(&b, v)
	return b.String()
}

func writeCEL(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		b.WriteString(strconv.Quote(v))
	case json.Number:
		if i, err := v.Int64(); err == nil {
			b.WriteString(strconv.FormatInt(i, 10))
			return
		}
		f, err := v.Float64()
		if err != nil || math.IsInf(f, 0) {
			b.WriteString(strconv.Quote(v.String())) // never equal: a number too large for CEL
			return
		}
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		b.WriteString(s)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			writeCEL(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(k))
			b.WriteString(": ")
			writeCEL(b, v[k])
		}
		b.WriteByte('}')
	}
}
