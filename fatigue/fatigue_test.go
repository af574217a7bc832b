package fatigue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/store"
)

// history is a seeded history of 10,000 decided requests with known
// patterns (see seed).
type history struct {
	reqs []airlock.Request
}

func (h *history) add(tool, args, state, by, instance string) string {
	id := fmt.Sprintf("apr_%05d", len(h.reqs))
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(len(h.reqs)) * time.Minute)
	r := airlock.Request{ID: id, InstanceID: instance, Kind: airlock.KindToolCall, Tool: tool, State: airlock.State(state),
		CreatedAt: at, Timeout: "10m"}
	if args != "" {
		r.Arguments = json.RawMessage(args)
	}
	if state != "pending" {
		r.Decision = &airlock.Decision{Status: r.State, DecidedBy: by, DecidedAt: at.Add(5 * time.Second)}
	}
	h.reqs = append(h.reqs, r)
	return id
}

// decided is the history as store.History.DecidedCalls yields it: the
// approvals and denials.
func (h *history) decided() []store.DecidedRequest {
	var out []store.DecidedRequest
	for _, r := range h.reqs {
		if r.State != airlock.StateApproved && r.State != airlock.StateDenied {
			continue
		}
		out = append(out, store.DecidedRequest{ID: r.ID, InstanceID: r.InstanceID, Tool: r.Tool, State: r.State,
			DecidedBy: r.Decision.DecidedBy, Arguments: r.Arguments, ArgumentsBytes: len(r.Arguments)})
	}
	return out
}

const fillerTools = 401

// seed builds the history. Its patterns, by tool:
//
//	read_file  40 approvals of one path on ins_1, 15 purged (no arguments)
//	deploy     300 staging approvals (3 services, every ref new) on ins_1
//	           and ins_2; 5 prod denials
//	shell      50 approvals of "ls -la" and 1 denial of it; 20 denials of
//	           rm -rf; 30 approvals of other commands
//	refund     10 approvals of 12 GBP, spelt five ways twice (key order,
//	           12 or 12.0), 9 of 500 GBP, all on ins_3
//	search     20 approvals with limit 10, every q new, by people; 100
//	           by a policy rule with limit 50
//	query      12 approvals of nested arguments on ins_2
//	fetch      30 approvals by a grant
//	echo       11 approvals of arguments that are not an object
//	misc_*     the rest, to 10,000: 401 tools, every argument new,
//	           approved, denied, expired and cancelled
func seed() (*history, map[string][]string) {
	h := &history{}
	people := []string{"tok_alice", "tok_bob", "oidc:https://idp.example#carol"}
	ids := map[string][]string{}
	note := func(k, id string) { ids[k] = append(ids[k], id) }
	for i := range 40 {
		note("read", h.add("read_file", `{"path":"/srv/docs/README.md"}`, "approved", people[i%3], "ins_1"))
	}
	for i := range 15 {
		note("read purged", h.add("read_file", "", "approved", people[i%3], "ins_1"))
	}
	for i := range 300 {
		note("staging", h.add("deploy", fmt.Sprintf(`{"env":"staging","service":"svc%d","ref":"r%d"}`, i%3, i), "approved", people[i%3], fmt.Sprintf("ins_%d", 1+i%2)))
	}
	for i := range 5 {
		note("prod", h.add("deploy", fmt.Sprintf(`{"env":"prod","service":"api","ref":"p%d"}`, i), "denied", "tok_bob", "ins_1"))
	}
	for i := range 50 {
		note("ls", h.add("shell", `{"cmd":"ls -la"}`, "approved", people[i%3], "ins_1"))
	}
	note("ls denied", h.add("shell", `{"cmd": "ls -la"}`, "denied", "tok_bob", "ins_1"))
	for i := range 20 {
		note("rm", h.add("shell", fmt.Sprintf(`{"cmd":"rm -rf /tmp/x%d"}`, i), "denied", people[i%3], "ins_1"))
	}
	for i := range 30 {
		note("cat", h.add("shell", fmt.Sprintf(`{"cmd":"cat f%d"}`, i), "approved", people[i%3], "ins_1"))
	}
	spellings := []string{`{"amount": 12, "currency":"GBP"}`, `{"currency":"GBP","amount":12.0}`, `{"amount":12,"currency":"GBP"}`,
		`{ "currency" : "GBP" , "amount" : 1.2e1 }`, `{"amount":12.00,"currency":"GBP"}`}
	for i := range 10 {
		note("refund 12", h.add("refund", spellings[i%5], "approved", people[i%3], "ins_3"))
	}
	for i := range 9 {
		note("refund 500", h.add("refund", `{"amount":500,"currency":"GBP"}`, "approved", people[i%3], "ins_3"))
	}
	for i := range 20 {
		note("search", h.add("search", fmt.Sprintf(`{"q":"term%d","limit":10}`, i), "approved", people[i%3], fmt.Sprintf("ins_%d", 1+i%2)))
	}
	for range 100 {
		note("search by rule", h.add("search", `{"q":"x","limit":50}`, "approved", "policy:searches", "ins_1"))
	}
	for i := range 12 {
		note("query", h.add("query", `{"db":"main","filter":{"a":[1,2.5,"x"],"b":null,"c":true}}`, "approved", people[i%3], "ins_2"))
	}
	for range 30 {
		note("fetch", h.add("fetch", `{"url":"https://example.com/"}`, "approved", "grant:grt_1", "ins_1"))
	}
	for i := range 11 {
		note("echo", h.add("echo", `["a"]`, "approved", people[i%3], "ins_1"))
	}
	for i := 0; len(h.reqs) < 10_000; i++ {
		state, by := "approved", people[i%3]
		switch {
		case i%10 == 0:
			state, by = "expired", airlock.ActorExpiry
		case i%10 == 1:
			state, by = "cancelled", "tok_agent"
		case i%3 == 0:
			state = "denied"
		}
		note("misc "+state, h.add(fmt.Sprintf("misc_%d", i%fillerTools), fmt.Sprintf(`{"n":%d,"kind":"k%d"}`, i, i%7), state, by, "ins_4"))
	}
	return h, ids
}

// TestSuggestionsOverSeededHistory: over 10,000 requests with known
// patterns, the suggestions are exactly those expected, and each
// suggested rule, compiled by the policy package, matches exactly the
// approvals it says it covers and no denial.
func TestSuggestionsOverSeededHistory(t *testing.T) {
	h, ids := seed()
	if len(h.reqs) != 10_000 {
		t.Fatalf("seeded %d requests; want 10,000", len(h.reqs))
	}
	var sg Suggester
	for _, d := range h.decided() {
		sg.Add(d)
	}
	got := sg.Suggestions(DefaultMinApprovals)
	type want struct {
		pattern, tool, args string
		varying             []string
		covers              []string
		grant               string // the grant's match and instance; "" for none
	}
	refunds := append(slices.Clone(ids["refund 12"]), ids["refund 500"]...)
	wants := []want{
		{PatternConstantKeys, "deploy", `{"env":"staging"}`, []string{"ref", "service"}, ids["staging"], ""},
		{PatternSameArguments, "read_file", `{"path":"/srv/docs/README.md"}`, nil, ids["read"], "same_arguments ins_1"},
		{PatternConstantKeys, "search", `{"limit":10}`, []string{"q"}, ids["search"], ""},
		{PatternConstantKeys, "refund", `{"currency":"GBP"}`, []string{"amount"}, refunds, "cel ins_3"},
		{PatternSameArguments, "query", `{"db":"main","filter":{"a":[1,2.5,"x"],"b":null,"c":true}}`, nil, ids["query"], "same_arguments ins_2"},
		{PatternSameArguments, "refund", `{"amount":12,"currency":"GBP"}`, nil, ids["refund 12"], "same_arguments ins_3"},
	}
	if len(got) != len(wants) {
		for _, s := range got {
			t.Logf("got %s %s %s ×%d", s.Pattern, s.Tool, s.Arguments, s.Approvals)
		}
		t.Fatalf("%d suggestions; want %d", len(got), len(wants))
	}
	for i, w := range wants {
		s := got[i]
		covers := slices.Sorted(slices.Values(w.covers))
		if s.Pattern != w.pattern || s.Tool != w.tool || string(s.Arguments) != w.args || !slices.Equal(s.Varying, w.varying) ||
			s.Approvals != len(covers) || !slices.Equal(s.RequestIDs, covers[:min(len(covers), MaxListedIDs)]) {
			t.Errorf("suggestion %d = %s %s %s varying %v ×%d %v…; want %s %s %s varying %v ×%d", i, s.Pattern, s.Tool, s.Arguments, s.Varying,
				s.Approvals, s.RequestIDs[:min(3, len(s.RequestIDs))], w.pattern, w.tool, w.args, w.varying, len(covers))
		}
		var g string
		if s.Grant != nil {
			kind := "cel"
			if s.Grant.Match == "same_arguments" {
				kind = "same_arguments"
			} else if s.Grant.Match != s.Match {
				t.Errorf("suggestion %d: grant match %q; want the rule's %q", i, s.Grant.Match, s.Match)
			}
			g = kind + " " + s.Grant.InstanceID
		}
		if g != w.grant {
			t.Errorf("suggestion %d (%s %s): grant %q; want %q", i, s.Tool, s.Pattern, g, w.grant)
		}
		if want := []string{"oidc:https://idp.example#carol", "tok_alice", "tok_bob"}; !slices.Equal(s.Approvers, want) {
			t.Errorf("suggestion %d: approvers %v; want %v", i, s.Approvers, want)
		}
		// The rule, as an admin pastes it, compiles and matches exactly
		// what the suggestion covers, over the whole history.
		set, err := policy.Compile([]byte("rules:\n" + s.Rule))
		if err != nil {
			t.Fatalf("suggestion %d: rule does not compile: %v\n%s", i, err, s.Rule)
		}
		name := set.Rules()[0].Name
		if !set.Rules()[0].Shadow || set.Rules()[0].Action != policy.ActionAllow {
			t.Errorf("suggestion %d: rule %+v; want a shadow allow", i, set.Rules()[0])
		}
		var matched []string
		for _, r := range h.reqs {
			out := set.Decide(t.Context(), airlock.PolicyInput{Request: r, Window: 10 * time.Minute})
			if slices.Contains(out.Shadowed, name) {
				matched = append(matched, r.ID)
				if r.State == airlock.StateDenied {
					t.Errorf("suggestion %d's rule matches denied %s", i, r.ID)
				}
			}
		}
		if !slices.Equal(matched, slices.Sorted(slices.Values(w.covers))) {
			t.Errorf("suggestion %d's rule %s matches %d requests; want the %d it covers", i, s.Match, len(matched), len(w.covers))
		}
	}
	// A higher minimum leaves the most approved alone.
	if got := sg.Suggestions(41); len(got) != 1 || got[0].Tool != "deploy" {
		t.Fatalf("suggestions with min 41 = %d; want deploy's alone", len(got))
	}
}

// replayPolicy is the candidate replayed over the seeded history.
const replayPolicy = `rules:
  - name: docs
    match: request.tool == "read_file"
    action: allow
  - name: no prod deploys
    match: request.tool == "deploy" && request.arguments.env == "prod"
    action: deny
  - name: deploys
    match: request.tool == "deploy"
    action: allow
  - name: listing
    match: request.tool == "shell" && request.arguments.cmd == "ls -la"
    action: allow
  - name: big refunds
    match: request.tool == "refund" && request.arguments.amount >= 100
    action: deny
    shadow: true
  - name: small refunds
    match: request.tool == "refund" && request.arguments.amount < 100
    action: allow
  - name: searches by people
    match: request.tool == "search" && request.arguments.limit == 10
    action: ask
  - name: no misc_0 denied
    match: request.tool == "misc_0"
    action: deny
`

// TestReplayOverSeededHistory: a candidate policy replayed over the 10,000
// requests counts, per rule, what it would have done beside what happened,
// exactly, and lists the denied requests it would have allowed.
func TestReplayOverSeededHistory(t *testing.T) {
	h, ids := seed()
	set, err := policy.Compile([]byte(replayPolicy))
	if err != nil {
		t.Fatal(err)
	}
	rp := NewReplayer(set)
	for _, r := range h.reqs {
		rp.Add(t.Context(), airlock.PolicyInput{Request: r, Window: 10 * time.Minute,
			Instance: func(context.Context) (airlock.Instance, error) { return airlock.Instance{ID: r.InstanceID}, nil }})
	}
	if rp.Requests != 10_000 || rp.Skipped != 0 {
		t.Fatalf("replayed %d, skipped %d; want 10,000 and 0", rp.Requests, rp.Skipped)
	}
	// The misc_0 requests: every 401st filler request.
	var misc0 [4]int // approved, denied, expired, cancelled
	others := map[string]int{}
	for i := 0; i < len(ids["misc approved"])+len(ids["misc denied"])+len(ids["misc expired"])+len(ids["misc cancelled"]); i++ {
		state := "approved"
		switch {
		case i%10 == 0:
			state = "expired"
		case i%10 == 1:
			state = "cancelled"
		case i%3 == 0:
			state = "denied"
		}
		if i%fillerTools == 0 {
			misc0[slices.Index([]string{"approved", "denied", "expired", "cancelled"}, state)]++
		} else {
			others[state]++
		}
	}
	noRuleApproved := 30 + 9 + 100 + 12 + 30 + 11 + others["approved"] // cat, refund 500, search by rule, query, fetch, echo
	noRuleDenied := 20 + others["denied"]                              // rm
	misc0Total := misc0[0] + misc0[1] + misc0[2] + misc0[3]
	want := []ReplayRow{
		{Rule: "docs", Action: policy.ActionAllow, Allow: 55, Approved: 55},
		{Rule: "no prod deploys", Action: policy.ActionDeny, Deny: 5, Denied: 5},
		{Rule: "deploys", Action: policy.ActionAllow, Allow: 300, Approved: 300},
		{Rule: "listing", Action: policy.ActionAllow, Allow: 51, Approved: 50, Denied: 1, AllowedDenied: ids["ls denied"]},
		{Rule: "big refunds", Action: policy.ActionDeny, Shadow: 9},
		{Rule: "small refunds", Action: policy.ActionAllow, Allow: 10, Approved: 10},
		{Rule: "searches by people", Action: policy.ActionAsk, Ask: 20, Approved: 20},
		{Rule: "no misc_0 denied", Action: policy.ActionDeny, Deny: misc0Total, Approved: misc0[0], Denied: misc0[1], Expired: misc0[2],
			Cancelled: misc0[3], DeniedApproved: misc0[0]},
		{Rule: NoRule, Action: policy.ActionAsk, Ask: 10_000 - 55 - 5 - 300 - 51 - 10 - 20 - misc0Total,
			Approved: noRuleApproved, Denied: noRuleDenied, Expired: others["expired"], Cancelled: others["cancelled"]},
	}
	got := rp.Rows()
	if len(got) != len(want) {
		t.Fatalf("%d rows; want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.AllowedDenied == nil {
			g.AllowedDenied = []string{}
		}
		if w.AllowedDenied == nil {
			w.AllowedDenied = []string{}
		}
		if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if misc0Total == 0 || misc0[0] == 0 {
		t.Fatalf("misc_0 has %v requests; the seed should give it some of each", misc0)
	}
}

// TestStatsInjectedTimes: the tally of decisions with known times gives
// the counts, the rate, the nearest-rank percentiles and the fast
// approvals exactly; the read floor is max(2 s, 2 s per KiB).
func TestStatsInjectedTimes(t *testing.T) {
	for _, c := range []struct {
		bytes int
		floor time.Duration
	}{{0, 2 * time.Second}, {1024, 2 * time.Second}, {1536, 3 * time.Second}, {9 * 1024, 18 * time.Second}} {
		if got := ReadFloor(c.bytes); got != c.floor {
			t.Errorf("ReadFloor(%d) = %s; want %s", c.bytes, got, c.floor)
		}
	}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d := func(by, state string, took time.Duration, size int) store.DecidedRequest {
		return store.DecidedRequest{DecidedBy: by, State: airlock.State(state), CreatedAt: base, DecidedAt: base.Add(took), ArgumentsBytes: size}
	}
	var tl Tally
	// tok_alice: ten decisions taking 1 s … 10 s; the approvals are those
	// taking 1, 2, 3, 4 s and 9 s; the 9 s one had 9 KiB of arguments (a
	// floor of 18 s): fast approvals are 1 s (floor 2 s), and 9 s.
	for i := 1; i <= 10; i++ {
		state, size := "denied", 100
		if i <= 4 || i == 9 {
			state = "approved"
		}
		if i == 9 {
			size = 9 * 1024
		}
		tl.Add(d("tok_alice", state, time.Duration(i)*time.Second, size))
	}
	for range 3 {
		tl.Add(d("policy:read-only", "approved", 0, 10))
	}
	tl.Add(d("grant:grt_1", "approved", 0, 10))
	got := tl.Stats()
	want := []Stats{
		{DecidedBy: "tok_alice", Kind: KindPerson, Decisions: 10, Approvals: 5, Denials: 5, ApprovalRate: 0.5,
			P50: 5 * time.Second, P90: 9 * time.Second, FastApprovals: 2},
		{DecidedBy: "policy:read-only", Kind: KindPolicy, Decisions: 3, Approvals: 3, ApprovalRate: 1, FastApprovals: 3},
		{DecidedBy: "grant:grt_1", Kind: KindGrant, Decisions: 1, Approvals: 1, ApprovalRate: 1, FastApprovals: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stats =\n%+v\nwant\n%+v", got, want)
	}
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{{"30d", 30 * 24 * time.Hour, false}, {"7d", 7 * 24 * time.Hour, false}, {"12h", 12 * time.Hour, false},
		{"PT2H", 2 * time.Hour, false}, {"0d", 0, true}, {"367d", 0, true}, {"d", 0, true}, {"-1d", 0, true}, {"x", 0, true}} {
		got, err := ParseSince(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("ParseSince(%q) = %s, %v; want %s (error %v)", c.in, got, err, c.want, c.bad)
		}
	}
	if KindOf(airlock.ActorPolicy) != KindPolicy || KindOf(airlock.ActorExpiry) != KindSystem || !strings.HasPrefix(airlock.ActorExpiry, "system:") {
		t.Fatal("KindOf: system:policy is a policy's, system:expiry the system's")
	}
}

// TestCanonicalArgs: the decoder-free reading of flat objects gives what
// RFC 8785 gives, and anything else is decoded and transformed.
func TestCanonicalArgs(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"b":"x"}`, ` { "b" : "x" , "a" : 1 } `, `{"a":1.0,"b":"x"}`, `{"a":1e0,"b":"x"}`, `{}`,
		`{"é":"ü","z":true,"n":null,"m":-12}`, `{"a":"tab\there"}`, `{"k\"q":1}`, `{"a":{"y":1,"x":[2,1]}}`,
		`{"a":123456789012345678}`, `{"a":0.1}`, `{"\ud83d\ude00":1,"\uffff":2}`,
	} {
		whole, _, ok := canonicalArgs([]byte(in))
		want, err := approvaltokenCanonical(in)
		if !ok || err != nil || whole != want {
			t.Errorf("canonicalArgs(%s) = %s, %v; want %s (%v)", in, whole, ok, want, err)
		}
	}
	for _, in := range []string{`[1]`, `"x"`, `{"a":1`, `{"a":1,}`, `{"a" 1}`, `{"a":1}x`, ``} {
		if _, _, ok := canonicalArgs([]byte(in)); ok {
			t.Errorf("canonicalArgs(%q) = ok; want refused", in)
		}
	}
}

func approvaltokenCanonical(s string) (string, error) {
	c, err := approvaltoken.Canonical([]byte(s))
	return string(c), err
}
