package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

// The wire format (docs/protocol.md, "The REST API"): snake_case keys;
// times RFC 3339 in UTC with trailing zeros of the fraction trimmed; an
// optional field with no value (empty string, absent object, no time) is
// omitted, never null.
//
// Resources are written by hand rather than with encoding/json struct tags
// because json.Marshal re-compacts (and HTML-escapes) json.RawMessage: the
// arguments a reviewer approved must go out byte for byte as stored.

// object writes one JSON object's members in order.
type object struct {
	b *bytes.Buffer
	n int
}

func beginObject(b *bytes.Buffer) *object {
	b.WriteByte('{')
	return &object{b: b}
}

func (o *object) end() { o.b.WriteByte('}') }

func (o *object) key(k string) {
	if o.n > 0 {
		o.b.WriteByte(',')
	}
	o.n++
	writeString(o.b, k)
	o.b.WriteByte(':')
}

// str writes k unless v is empty.
func (o *object) str(k, v string) {
	if v != "" {
		o.key(k)
		writeString(o.b, v)
	}
}

// always writes k with v even when v is a zero value.
func (o *object) always(k string, v any) {
	o.key(k)
	writeValue(o.b, v)
}

// time writes k unless t is zero.
func (o *object) time(k string, t time.Time) {
	if !t.IsZero() {
		o.key(k)
		o.b.WriteByte('"')
		o.b.Write(appendTime(o.b.AvailableBuffer(), t))
		o.b.WriteByte('"')
	}
}

func (o *object) timePtr(k string, t *time.Time) {
	if t != nil {
		o.time(k, *t)
	}
}

// raw writes stored JSON as it is, unless absent.
func (o *object) raw(k string, v json.RawMessage) {
	if len(v) != 0 && string(v) != "null" {
		o.key(k)
		o.b.Write(v)
	}
}

// writeValue encodes a plain Go value (strings, numbers, string slices)
// without HTML escaping, so text reads as the caller wrote it.
func writeValue(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case string:
		writeString(b, v)
	case int:
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(v), 10))
	case int64:
		b.Write(strconv.AppendInt(b.AvailableBuffer(), v, 10))
	case bool:
		b.Write(strconv.AppendBool(b.AvailableBuffer(), v))
	case []string:
		writeArray(b, v, writeString)
	default:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)       // other plain values: numbers of other types
		b.Truncate(b.Len() - 1) // Encode's newline
	}
}

// writeString writes s as a JSON string exactly as encoding/json does with
// HTML escaping off (TestWriteStringMatchesEncodingJSON), without its
// encoder's allocations: the answer to every call writes dozens of them.
// Control characters, quotes and backslashes are escaped, U+2028 and
// U+2029 too (JavaScript reads them as line ends), and invalid UTF-8
// becomes U+FFFD.
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(s[start:i])
			b.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b.WriteString(s[start:i])
			b.WriteString(`\u202`)
			b.WriteByte(hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// appendTime appends t to dst as RFC 3339 in UTC at microsecond
// precision, the precision both stores keep.
func appendTime(dst []byte, t time.Time) []byte {
	return t.UTC().Truncate(time.Microsecond).AppendFormat(dst, time.RFC3339Nano)
}

// writeRequest writes an ApprovalRequest resource.
func writeRequest(b *bytes.Buffer, r airlock.Request) { writeRequestWith(b, r, nil) }

// writeRequestWith writes an ApprovalRequest resource with, when g is set,
// the grant its decision made.
func writeRequestWith(b *bytes.Buffer, r airlock.Request, g *airlock.Grant) {
	writeDecided(b, r, g, nil)
}

// writeDecided writes the answer to a decision: the request, with the
// grant it made when g is set, or, for an edit, the request approved in
// its place (replacement).
func writeDecided(b *bytes.Buffer, r airlock.Request, g *airlock.Grant, replacement *airlock.Request) {
	o := beginObject(b)
	o.always("id", r.ID)
	o.always("instance_id", r.InstanceID)
	o.str("instance_name", r.InstanceName)
	o.str("created_by_name", r.OwnerName)
	o.always("state", string(r.State))
	o.always("kind", string(r.Kind))
	o.str("tool", r.Tool)
	o.raw("arguments", r.Arguments)
	o.str("timeout", r.Timeout)
	o.str("agent_reasoning", r.AgentReasoning)
	o.raw("context", r.Context)
	// A purged request has no arguments, reasoning or context left: they
	// are absent, and purged_at says why (never "no arguments").
	o.timePtr("purged_at", r.PurgedAt)
	o.time("created_at", r.CreatedAt)
	o.time("deadline_at", r.DeadlineAt)
	o.str("derived_from", r.DerivedFrom)
	if p := r.Preview; p != nil {
		o.key("preview")
		po := beginObject(b)
		po.always("type", p.Type)
		po.always("content", p.Content)
		po.end()
	}
	o.str("reversibility", r.Reversibility)
	if d := r.Decision; d != nil {
		o.key("decision")
		do := beginObject(b)
		do.always("status", string(d.Status))
		do.str("note", d.Note)
		do.str("answer", d.Answer)
		do.time("decided_at", d.DecidedAt)
		do.str("decided_by", d.DecidedBy)
		do.str("decided_by_name", d.DecidedByName)
		do.timePtr("expires_at", d.ExpiresAt)
		// A denial that is an edit names the request approved in its
		// place (docs/protocol.md, "Edits").
		do.str("replaced_by", r.ReplacedBy)
		writeReview(do, d.Review)
		if len(r.Votes) > 0 {
			do.key("votes")
			writeVotes(b, r.Votes)
		}
		do.end()
	}
	if len(r.Reviewers) > 0 {
		o.always("reviewers", r.Reviewers)
	}
	if len(r.EscalateTo) > 0 {
		o.always("escalate_to", r.EscalateTo)
	}
	o.timePtr("escalated_at", r.EscalatedAt)
	if r.NeedsQuorum() {
		o.always("approvals", r.Approvals)
		if len(r.Votes) > 0 {
			o.key("votes")
			writeVotes(b, r.Votes)
		}
	}
	if e := r.Execution; e != nil {
		o.key("execution")
		eo := beginObject(b)
		eo.time("claimed_at", e.ClaimedAt)
		eo.always("status", string(e.Status))
		eo.timePtr("finished_at", e.FinishedAt)
		eo.str("detail", e.Detail)
		eo.str("approval_token", e.ApprovalToken)
		eo.end()
	}
	o.str("title", r.Title)
	o.str("description", r.Description)
	o.str("target_type", r.TargetType)
	o.str("target_id", r.TargetID)
	o.str("session_id", r.SessionID)
	if p := r.Proposal; p != nil {
		o.key("proposal")
		po := beginObject(b)
		po.always("mode", p.Mode)
		if c := p.Command; c != nil {
			po.key("command")
			co := beginObject(b)
			co.always("method", c.Method)
			co.raw("input", c.Input)
			co.raw("observed", c.Observed)
			co.end()
		}
		po.end()
	}
	if cr := r.CommandResult; cr != nil {
		o.key("command_result")
		co := beginObject(b)
		co.always("status", cr.Status)
		co.str("detail", cr.Detail)
		co.time("applied_at", cr.AppliedAt)
		co.end()
	}
	if q := r.Question; q != nil {
		o.key("question")
		qo := beginObject(b)
		if len(q.Choices) > 0 {
			qo.always("choices", q.Choices)
		}
		qo.end()
	}
	if g != nil {
		o.key("grant")
		writeGrant(b, *g)
	}
	if replacement != nil {
		o.key("replacement")
		writeRequest(b, *replacement)
	}
	o.end()
}

// writeVotes writes the votes on a request needing several approvals, as
// a list (empty when none was cast).
func writeVotes(b *bytes.Buffer, vs []airlock.Vote) {
	writeArray(b, vs, func(b *bytes.Buffer, v airlock.Vote) {
		vo := beginObject(b)
		vo.always("principal", v.Principal)
		vo.always("name", v.Name)
		vo.always("status", string(v.Status))
		vo.str("note", v.Note)
		vo.time("at", v.At)
		writeReview(vo, v.Review)
		vo.end()
	})
}

// writeReview writes a reviewer's client's claim (airlock.ReviewClaim) as
// "review", when there is one.
func writeReview(o *object, rc *airlock.ReviewClaim) {
	if rc == nil {
		return
	}
	o.key("review")
	ro := beginObject(o.b)
	ro.always("seen_fraction", rc.SeenFraction)
	ro.always("seconds_open", rc.SecondsOpen)
	ro.end()
}

// writeInstance writes an Instance resource.
func writeInstance(b *bytes.Buffer, in airlock.Instance) {
	o := beginObject(b)
	o.always("id", in.ID)
	o.always("name", in.Name)
	o.raw("metadata", in.Metadata)
	o.str("token_audience", in.TokenAudience)
	o.time("created_at", in.CreatedAt)
	o.always("pending_count", in.PendingCount)
	o.end()
}

// writeToken writes a Token resource; secret is written only when given,
// which is once, at creation.
func writeToken(b *bytes.Buffer, t airlock.Token, secret string) {
	o := beginObject(b)
	o.always("id", t.ID)
	o.always("name", t.Name)
	o.always("role", string(t.Role))
	if len(t.Scopes) > 0 {
		o.always("scopes", t.Scopes)
	}
	o.str("principal", t.Principal)
	o.time("created_at", t.CreatedAt)
	o.str("created_by", t.CreatedBy)
	o.timePtr("revoked_at", t.RevokedAt)
	o.str("secret", secret)
	o.end()
}

// writeEvent writes an audit Event.
func writeEvent(b *bytes.Buffer, e airlock.Event) {
	o := beginObject(b)
	o.always("id", e.ID)
	o.always("type", string(e.Type))
	o.time("at", e.At)
	o.str("actor", e.Actor)
	o.str("request_id", e.RequestID)
	o.str("instance_id", e.InstanceID)
	o.str("token_id", e.TokenID)
	o.str("state", string(e.State))
	o.str("subject", e.Subject)
	o.str("policy_sha256", e.PolicyHash)
	o.end()
}

// replyPage answers 200 with a page of requests, written as it is
// encoded: one request at a time goes into a buffer and through to w, so
// the answer is never held whole beside the page (which can hold several
// MiB of arguments). The page is read in full before the first byte, so an
// error is still a problem, and a slow client never holds a read of the
// store open.
func replyPage(w http.ResponseWriter, p provider.Page) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	var b bytes.Buffer
	o := beginObject(&b)
	o.key("items")
	b.WriteByte('[')
	for i, r := range p.Requests {
		if i > 0 {
			b.WriteByte(',')
		}
		writeRequest(&b, r)
		if _, err := w.Write(b.Bytes()); err != nil {
			return // the client went away
		}
		b.Reset()
	}
	b.WriteByte(']')
	o.str("next_cursor", p.NextCursor)
	o.end()
	b.WriteByte('\n')
	w.Write(b.Bytes())
}

// writeArray writes items as a JSON array, each with write.
func writeArray[T any](b *bytes.Buffer, items []T, write func(*bytes.Buffer, T)) {
	b.WriteByte('[')
	for i, item := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		write(b, item)
	}
	b.WriteByte(']')
}

// replyList answers 200 with an object whose one member, key, is the
// array of items, each written with write.
func replyList[T any](w http.ResponseWriter, key string, items []T, write func(*bytes.Buffer, T)) {
	reply(w, http.StatusOK, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.key(key)
		writeArray(b, items, write)
		o.end()
	})
}

// reply writes a JSON resource with status.
func reply(w http.ResponseWriter, status int, write func(b *bytes.Buffer)) {
	var b bytes.Buffer
	write(&b)
	b.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
