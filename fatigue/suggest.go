package fatigue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

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

// call is a decided tool call with its arguments in canonical form, key
// by key.
type call struct {
	store.DecidedRequest
	canonical string            // the whole arguments, canonical
	keys      map[string]string // each key's value, canonical
}

// parse reads d's arguments as a JSON object; ok false when they are
// not one (absent once purged, an array, invalid).
func parse(d store.DecidedRequest) (call, bool) {
	if len(d.Arguments) == 0 {
		return call{}, false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(d.Arguments, &obj); err != nil || obj == nil {
		return call{}, false
	}
	whole, err := approvaltoken.Canonical(d.Arguments)
	if err != nil {
		return call{}, false
	}
	c := call{DecidedRequest: d, canonical: string(whole), keys: make(map[string]string, len(obj))}
	for k, v := range obj {
		cv, err := approvaltoken.Canonical(v)
		if err != nil {
			return call{}, false
		}
		c.keys[k] = string(cv)
	}
	return c, true
}

// Suggester gathers decided calls (store.History.DecidedCalls) and
// proposes rules for the patterns people approved.
type Suggester struct {
	// approved are people's approvals, by tool; denied every denial, by
	// tool, whoever decided it.
	approved map[string][]call
	denied   map[string][]call
}

// Add takes one decided call. Approvals by a rule, a grant or the system
// are neither counted nor held against a pattern; every denial is.
func (s *Suggester) Add(d store.DecidedRequest) {
	if s.approved == nil {
		s.approved, s.denied = map[string][]call{}, map[string][]call{}
	}
	approved := d.State == "approved"
	if approved && KindOf(d.DecidedBy) != KindPerson {
		return
	}
	c, ok := parse(d)
	if !ok {
		return
	}
	c.Arguments = nil // kept canonical, key by key
	if approved {
		s.approved[d.Tool] = append(s.approved[d.Tool], c)
	} else {
		s.denied[d.Tool] = append(s.denied[d.Tool], c)
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
	for tool, approvals := range s.approved {
		denials := s.denied[tool]
		// Same arguments.
		same := map[string][]call{}
		for _, c := range approvals {
			same[c.canonical] = append(same[c.canonical], c)
		}
		for args, cs := range same {
			if len(cs) < min || slices.ContainsFunc(denials, func(d call) bool { return d.canonical == args }) {
				continue
			}
			out = append(out, suggest(PatternSameArguments, tool, cs[0].keys, nil, cs, true))
		}
		// Constant keys, when the arguments varied.
		if len(same) < 2 || len(approvals) < min {
			continue
		}
		constant, varying := constantKeys(approvals)
		if len(constant) == 0 {
			continue
		}
		if slices.ContainsFunc(denials, func(d call) bool { return hasAll(d.keys, constant) }) {
			continue
		}
		out = append(out, suggest(PatternConstantKeys, tool, constant, varying, approvals, false))
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

// constantKeys are the keys every call has with one value, and the
// others, sorted.
func constantKeys(cs []call) (map[string]string, []string) {
	constant := map[string]string{}
	for k, v := range cs[0].keys {
		constant[k] = v
	}
	seen := map[string]bool{}
	for _, c := range cs {
		for k := range c.keys {
			seen[k] = true
		}
		for k, v := range constant {
			if cv, ok := c.keys[k]; !ok || cv != v {
				delete(constant, k)
			}
		}
	}
	var varying []string
	for k := range seen {
		if _, ok := constant[k]; !ok {
			varying = append(varying, k)
		}
	}
	slices.Sort(varying)
	return constant, varying
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
func suggest(pattern, tool string, keys map[string]string, varying []string, cs []call, exact bool) Suggestion {
	s := Suggestion{Pattern: pattern, Tool: tool, Varying: varying, Approvals: len(cs)}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
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
		kq, _ := json.Marshal(k)
		args.Write(kq)
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
	match, _ := json.Marshal(s.Match) // a JSON string is a YAML double-quoted scalar
	quotedName, _ := json.Marshal(name)
	s.Rule = fmt.Sprintf("- name: %s\n  match: %s\n  action: allow\n  shadow: true\n", quotedName, match)

	if len(instances) == 1 {
		g := &GrantProposal{Tool: tool, InstanceID: cs[0].InstanceID, ExpiresIn: "720h", Match: s.Match}
		if exact {
			g.Match = "same_arguments"
		}
		s.Grant = g
	}
	return s
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
