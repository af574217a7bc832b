package auditlog

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
)

// digestOf is a digest computed here from the bytes the package doc names,
// without the package: "sha256:" and unpadded base64url.
func digestOf(b string) string {
	sum := sha256.Sum256([]byte(b))
	return "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:])
}

var leafTime = time.Date(2026, 12, 6, 12, 7, 0, 123456000, time.UTC)

func approvedEvent() airlock.Event {
	return airlock.Event{
		ID: 41, Type: airlock.EventRequestApproved, At: leafTime, Actor: "user:ada",
		RequestID: "apr_1", InstanceID: "ins_1", State: airlock.StateApproved, UID: "u41",
	}
}

func toolCall() airlock.Request {
	return airlock.Request{
		ID: "apr_1", Tool: "send_mail",
		Arguments:      json.RawMessage(`{"to":"b@example.com", "n":1.0,"subject":"caf\u00e9"}`),
		AgentReasoning: "The user asked <me> to",
		Context:        json.RawMessage(`{"cwd":"/srv"}`),
	}
}

// The leaf of a request event is exactly the canonical JSON the package doc
// lays out, with the digests of the request's payloads computed from their
// canonical (arguments, context) and UTF-8 (tool, reasoning) bytes.
func TestNewLeafIsTheDocumentedCanonicalJSON(t *testing.T) {
	t.Parallel()
	p, err := RequestPayloads(toolCall())
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewLeaf(approvedEvent(), &p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"actor":"user:ada",` +
		`"arguments_digest":"` + digestOf(`{"n":1,"subject":"café","to":"b@example.com"}`) + `",` +
		`"context_digest":"` + digestOf(`{"cwd":"/srv"}`) + `",` +
		`"instance_id":"ins_1",` +
		`"reasoning_digest":"` + digestOf("The user asked <me> to") + `",` +
		`"request_id":"apr_1","state":"approved",` +
		`"time":"2026-12-06T12:07:00.123456Z",` +
		`"tool_digest":"` + digestOf("send_mail") + `",` +
		`"type":"request.approved","uid":"u41","v":1}`
	if string(got) != want {
		t.Errorf("leaf\n got %s\nwant %s", got, want)
	}
	// The arguments' digest is the approval token's for the same arguments.
	if d, _ := approvaltoken.ArgsDigest(toolCall().Arguments); p.Arguments != d {
		t.Errorf("arguments digest %s, the token's %s", p.Arguments, d)
	}
}

func TestNewLeafOfOtherEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		e    airlock.Event
		want string
	}{
		{"a token event, its actor with HTML characters", airlock.Event{Type: airlock.EventTokenCreated, At: leafTime, Actor: "user:<ada>&", TokenID: "tok_1", UID: "u1"},
			`{"actor":"user:<ada>&","time":"2026-12-06T12:07:00.123456Z","token_id":"tok_1","type":"token.created","uid":"u1","v":1}`},
		{"an event from before uids, in another zone", airlock.Event{ID: 7, Type: airlock.EventWorkItemMoved, At: leafTime.In(time.FixedZone("x", 3600)), Actor: "user:ada", Subject: "wi_1"},
			`{"actor":"user:ada","event_id":7,"subject":"wi_1","time":"2026-12-06T12:07:00.123456Z","type":"work_item.moved","v":1}`},
		{"a whole second", airlock.Event{Type: airlock.EventGrantCreated, At: leafTime.Truncate(time.Second), Actor: "system:policy", PolicyHash: "ab12", UID: "u2"},
			`{"actor":"system:policy","policy_hash":"ab12","time":"2026-12-06T12:07:00.000000Z","type":"grant.created","uid":"u2","v":1}`},
	} {
		got, err := NewLeaf(tc.e, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
		back, err := ParseLeaf(got)
		if err != nil {
			t.Errorf("%s: ParseLeaf: %v", tc.name, err)
			continue
		}
		if again, _ := back.Marshal(); string(again) != string(got) {
			t.Errorf("%s: read back as %s", tc.name, again)
		}
	}
}

func TestNewLeafRefuses(t *testing.T) {
	t.Parallel()
	p, err := RequestPayloads(toolCall())
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*airlock.Event)) airlock.Event { e := approvedEvent(); f(&e); return e }
	for _, tc := range []struct {
		name     string
		e        airlock.Event
		payloads *Payloads
	}{
		{"a request event without its payloads", approvedEvent(), nil},
		{"payloads without a request", with(func(e *airlock.Event) { e.RequestID = "" }), &p},
		{"no type", with(func(e *airlock.Event) { e.Type = "" }), &p},
		{"neither uid nor id", with(func(e *airlock.Event) { e.UID, e.ID = "", 0 }), &p},
		{"no time", with(func(e *airlock.Event) { e.At = time.Time{} }), &p},
		{"a time finer than a microsecond", with(func(e *airlock.Event) { e.At = e.At.Add(1) }), &p},
		{"a NUL", with(func(e *airlock.Event) { e.Actor = "a\x00b" }), &p},
		{"a malformed digest", approvedEvent(), &Payloads{Tool: "sha256:x", Reasoning: p.Reasoning}},
		{"no reasoning digest", approvedEvent(), &Payloads{Tool: p.Tool}},
	} {
		if leaf, err := NewLeaf(tc.e, tc.payloads); err == nil {
			t.Errorf("%s: made %s", tc.name, leaf)
		}
	}
	if _, err := RequestPayloads(airlock.Request{Arguments: json.RawMessage(`{"a":`)}); err == nil {
		t.Error("digested arguments that are not JSON")
	}
}

// ParseLeaf takes exactly the bytes NewLeaf writes: any other spelling of
// a leaf, even of the same JSON value, is refused, so a leaf has one hash.
func TestParseLeafRefuses(t *testing.T) {
	t.Parallel()
	p, err := RequestPayloads(toolCall())
	if err != nil {
		t.Fatal(err)
	}
	good, err := NewLeaf(approvedEvent(), &p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseLeaf(good); err != nil {
		t.Fatalf("the good leaf: %v", err)
	}
	const simple = `{"actor":"a","time":"2026-12-06T12:07:00.123456Z","type":"t","uid":"u","v":1}`
	if _, err := ParseLeaf([]byte(simple)); err != nil {
		t.Fatalf("the simple leaf: %v", err)
	}
	for _, tc := range []struct{ name, leaf string }{
		{"a space", strings.Replace(simple, `,"time"`, `, "time"`, 1)},
		{"members out of order", `{"time":"2026-12-06T12:07:00.123456Z","actor":"a","type":"t","uid":"u","v":1}`},
		{"an escaped character", strings.Replace(simple, `"actor":"a"`, `"actor":"\u0061"`, 1)},
		{"an unknown member", strings.Replace(simple, `"type"`, `"tool":"x","type"`, 1)},
		{"a member in another case", strings.Replace(simple, `"actor"`, `"Actor"`, 1)},
		{"a repeated member", strings.Replace(simple, `"v":1`, `"v":1,"v":1`, 1)},
		{"another version", strings.Replace(simple, `"v":1`, `"v":2`, 1)},
		{"no version", strings.Replace(simple, `,"v":1`, ``, 1)},
		{"a float version", strings.Replace(simple, `"v":1`, `"v":1.5`, 1)},
		{"a time without microseconds", strings.Replace(simple, `.123456Z`, `Z`, 1)},
		{"a time with an offset", strings.Replace(simple, `.123456Z`, `.123456+00:00`, 1)},
		{"a time with nanoseconds", strings.Replace(simple, `.123456Z`, `.123456789Z`, 1)},
		{"no type", strings.Replace(simple, `"type":"t",`, ``, 1)},
		{"no uid", strings.Replace(simple, `,"uid":"u"`, ``, 1)},
		{"uid and event_id", strings.Replace(simple, `"time"`, `"event_id":3,"time"`, 1)},
		{"a digest without a request", strings.Replace(simple, `"type"`, `"tool_digest":"`+digestOf("x")+`","type"`, 1)},
		{"a request without digests", strings.Replace(simple, `"time"`, `"request_id":"apr_1","time"`, 1)},
		{"a digest in hex", strings.Replace(string(good), p.Tool, "sha256:"+strings.Repeat("ab", 32), 1)},
		{"an array", `[1]`},
		{"two values", simple + simple},
		{"invalid UTF-8", strings.Replace(simple, `"a"`, "\"\xff\"", 1)},
	} {
		if _, err := ParseLeaf([]byte(tc.leaf)); err == nil {
			t.Errorf("%s: parsed %s", tc.name, tc.leaf)
		}
	}
}

// Marshal writes json.Marshal's bytes as they are when they are canonical
// already, and canonicalises them otherwise; the two paths must give what
// RFC 8785 gives. Each leaf here takes one path or the other: plain text,
// HTML characters json.Marshal escapes, U+2028, a control character,
// non-ASCII text, and the largest event IDs on both sides of 2^53.
func TestMarshalFastPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, actor string
		eventID     int64
		fast        bool
	}{
		{"plain", "user:ada", 7, true},
		{"non-ASCII", "user:zoë 🙂", 7, true},
		{"HTML characters", "user:<a&b>", 7, false},
		{"line separator", "user:a\u2028b", 7, false},
		{"control character", "user:a\tb", 7, false},
		{"largest exact event ID", "user:ada", 1<<53 - 1, true},
		{"event ID beyond 2^53", "user:ada", 1<<53 + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Leaf{Type: airlock.EventRequestCreated, EventID: tc.eventID, At: leafTime, Actor: tc.actor}
			got, err := l.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			plain, err := json.Marshal(wireLeaf{Actor: tc.actor, EventID: tc.eventID, Time: leafTime.Format(TimeLayout), Type: string(l.Type), V: LeafVersion})
			if err != nil {
				t.Fatal(err)
			}
			want, err := approvaltoken.Canonical(plain)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("Marshal = %s\nRFC 8785 = %s", got, want)
			}
			if fast := canonicalAlready(plain, tc.eventID); fast != tc.fast {
				t.Errorf("fast path taken: %v, want %v", fast, tc.fast)
			}
			if tc.eventID <= maxExactInteger {
				back, err := ParseLeaf(got)
				if err != nil {
					t.Fatalf("ParseLeaf(Marshal) = %v", err)
				}
				if back.Actor != tc.actor || back.EventID != tc.eventID {
					t.Errorf("ParseLeaf = %+v", back)
				}
			}
		})
	}
}

// TestAppendPlainIsJSONMarshal holds Marshal's hand-written encoder to
// json.Marshal's bytes wherever it takes them, and to refusing wherever
// those bytes are not canonical.
func TestAppendPlainIsJSONMarshal(t *testing.T) {
	t.Parallel()
	d := "sha256:" + strings.Repeat("A", 43)
	full := wireLeaf{Actor: "user:ada", ArgumentsDigest: d, ContextDigest: d, EventID: 42, InstanceID: "ins_1",
		PolicyHash: "sha256:p", ReasoningDigest: d, RequestID: "req_1", State: "approved", Subject: "sub",
		Time: "2026-12-06T20:00:00.000001Z", TokenID: "tok_1", ToolDigest: d, Type: "request.decided", V: LeafVersion}
	withUID := full
	withUID.EventID, withUID.UID = 0, "0123456789abcdef"
	sparse := wireLeaf{Actor: "", Time: full.Time, Type: "instance.created", EventID: 1, V: LeafVersion}
	for _, tc := range []struct {
		name  string
		w     wireLeaf
		plain bool
	}{
		{"every member", full, true},
		{"a uid, no event ID", withUID, true},
		{"the members that are always there", sparse, true},
		{"non-ASCII", wireLeaf{Actor: "user:zoë 🙂", Time: full.Time, Type: "t", EventID: 3, V: 1}, true},
		{"an HTML character", wireLeaf{Actor: "a&b", Time: full.Time, Type: "t", EventID: 3, V: 1}, false},
		{"a quote", wireLeaf{Actor: "a", Subject: `"`, Time: full.Time, Type: "t", EventID: 3, V: 1}, false},
		{"a backslash", wireLeaf{Actor: "a", TokenID: `\`, Time: full.Time, Type: "t", EventID: 3, V: 1}, false},
		{"a control character", wireLeaf{Actor: "a\n", Time: full.Time, Type: "t", EventID: 3, V: 1}, false},
		{"a line separator", wireLeaf{Actor: "a\u2029", Time: full.Time, Type: "t", EventID: 3, V: 1}, false},
		{"invalid UTF-8", wireLeaf{Actor: "a\xff", Time: full.Time, Type: "t", EventID: 3, V: 1}, false},
		{"an event ID beyond 2^53", wireLeaf{Actor: "a", Time: full.Time, Type: "t", EventID: 1<<53 + 1, V: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.w.appendPlain(nil)
			if ok != tc.plain {
				t.Fatalf("appendPlain ok = %v, want %v", ok, tc.plain)
			}
			want, err := json.Marshal(tc.w)
			if err != nil {
				t.Fatal(err)
			}
			if canonicalAlready(want, tc.w.EventID) != tc.plain {
				t.Fatalf("json.Marshal's bytes canonical = %v, want %v: %s", !tc.plain, tc.plain, want)
			}
			if ok && string(got) != string(want) {
				t.Errorf("appendPlain = %s\njson.Marshal = %s", got, want)
			}
		})
	}
}
