package auditlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
)

// LeafVersion is the leaf format this package writes and reads (the "v"
// member). A later format gets a new number, and ParseLeaf refuses numbers
// it does not know rather than guess.
const LeafVersion = 1

// TimeLayout is how a leaf writes its time: RFC 3339 in UTC with exactly six
// fractional digits, the microsecond both stores keep.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// digestPrefix names the hash of every digest, as approvaltoken.ArgsDigest does.
const digestPrefix = "sha256:"

// digestLen is the length of a digest: the prefix and 43 base64url characters.
const digestLen = len(digestPrefix) + 43

// Leaf is one event as the tree holds it (the package doc lists its members).
// NewLeaf makes one from an event and ParseLeaf reads one back; both go
// through Marshal, so a leaf has one byte form.
type Leaf struct {
	Type airlock.EventType
	// UID is the event's random identity; EventID stands in for it, and only
	// then, for events appended before events had one.
	UID     string
	EventID int64
	At      time.Time
	Actor   string

	RequestID  string
	InstanceID string
	TokenID    string
	State      airlock.State
	Subject    string
	PolicyHash string

	// Payloads holds the digests of the request's payloads; nil exactly when
	// RequestID is empty.
	Payloads *Payloads
}

// Payloads are the digests of an approval request's payloads that each of
// its events' leaves carries, so purging the bytes never changes a leaf.
// Each is "sha256:" and the unpadded base64url SHA-256 (DigestJSON,
// DigestString). Tool and Reasoning are always set; Arguments and Context
// are empty when the request has none.
type Payloads struct {
	Tool      string
	Arguments string
	Reasoning string
	Context   string
}

// RequestPayloads returns the digests of r's tool, arguments, reasoning and
// context: what the sequencer hands NewLeaf for each of r's events.
func RequestPayloads(r airlock.Request) (Payloads, error) {
	p := Payloads{Tool: DigestString(r.Tool), Reasoning: DigestString(r.AgentReasoning)}
	var err error
	if len(r.Arguments) > 0 {
		if p.Arguments, err = DigestJSON(r.Arguments); err != nil {
			return Payloads{}, fmt.Errorf("request %s: arguments: %w", r.ID, err)
		}
	}
	if len(r.Context) > 0 {
		if p.Context, err = DigestJSON(r.Context); err != nil {
			return Payloads{}, fmt.Errorf("request %s: context: %w", r.ID, err)
		}
	}
	return p, nil
}

// DigestJSON returns the digest of a JSON value: "sha256:" and the unpadded
// base64url SHA-256 of its RFC 8785 canonical form. It is
// approvaltoken.ArgsDigest, so arguments have one digest in a token and in
// the log.
func DigestJSON(value []byte) (string, error) {
	return approvaltoken.ArgsDigest(value)
}

// DigestString returns the digest of a string: "sha256:" and the unpadded
// base64url SHA-256 of its UTF-8 bytes, exactly as they are.
func DigestString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return digestPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// NewLeaf returns the canonical bytes of the leaf of event e: what the
// sequencer appends to the tree. payloads are the digests of the request's
// payloads (RequestPayloads), required when e has a request ID and refused
// when it has none.
func NewLeaf(e airlock.Event, payloads *Payloads) ([]byte, error) {
	l := Leaf{
		Type: e.Type, UID: e.UID, At: e.At, Actor: e.Actor,
		RequestID: e.RequestID, InstanceID: e.InstanceID, TokenID: e.TokenID,
		State: e.State, Subject: e.Subject, PolicyHash: e.PolicyHash,
		Payloads: payloads,
	}
	if e.UID == "" {
		l.EventID = e.ID
	}
	return l.Marshal()
}

// wireLeaf is a leaf's JSON members; the canonical form sorts them.
type wireLeaf struct {
	Actor           string `json:"actor"`
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
	ContextDigest   string `json:"context_digest,omitempty"`
	EventID         int64  `json:"event_id,omitempty"`
	InstanceID      string `json:"instance_id,omitempty"`
	PolicyHash      string `json:"policy_hash,omitempty"`
	ReasoningDigest string `json:"reasoning_digest,omitempty"`
	RequestID       string `json:"request_id,omitempty"`
	State           string `json:"state,omitempty"`
	Subject         string `json:"subject,omitempty"`
	Time            string `json:"time"`
	TokenID         string `json:"token_id,omitempty"`
	ToolDigest      string `json:"tool_digest,omitempty"`
	Type            string `json:"type"`
	UID             string `json:"uid,omitempty"`
	V               int    `json:"v"`
}

// leafMembers are the members a leaf may have; ParseLeaf refuses others.
var leafMembers = []string{
	"actor", "arguments_digest", "context_digest", "event_id", "instance_id",
	"policy_hash", "reasoning_digest", "request_id", "state", "subject",
	"time", "token_id", "tool_digest", "type", "uid", "v",
}

// Marshal checks l and returns its canonical bytes (RFC 8785).
func (l Leaf) Marshal() ([]byte, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	w := wireLeaf{
		Actor: l.Actor, EventID: l.EventID, InstanceID: l.InstanceID,
		PolicyHash: l.PolicyHash, RequestID: l.RequestID, State: string(l.State),
		Subject: l.Subject, Time: l.At.UTC().Format(TimeLayout), TokenID: l.TokenID,
		Type: string(l.Type), UID: l.UID, V: LeafVersion,
	}
	if p := l.Payloads; p != nil {
		w.ToolDigest, w.ArgumentsDigest, w.ReasoningDigest, w.ContextDigest = p.Tool, p.Arguments, p.Reasoning, p.Context
	}
	if data, ok := w.appendPlain(make([]byte, 0, 512)); ok {
		return data, nil
	}
	data, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("leaf: %w", err)
	}
	if canonicalAlready(data, w.EventID) {
		return data, nil
	}
	return approvaltoken.Canonical(data)
}

// appendPlain appends w's JSON to dst as json.Marshal writes it, when that
// is already canonical (canonicalAlready): no string needs an escape in
// either form and the event ID is exact. It reports false, having written
// part of it, otherwise. The sequencer writes every leaf, and
// json.Marshal's reflection was most of the cost of one
// (docs/performance.md); TestMarshalFastPath and the testdata vectors
// hold the two to the same bytes.
func (w *wireLeaf) appendPlain(dst []byte) ([]byte, bool) {
	if w.EventID > maxExactInteger {
		return dst, false
	}
	ok := true
	// str appends a member; checked is for the members check has held to
	// digests and Marshal formats (the time), which need no escape.
	str := func(name, v string, always, checked bool) {
		if v == "" && !always {
			return
		}
		if !checked && !plainString(v) {
			ok = false
			return
		}
		dst = append(dst, ',', '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':', '"')
		dst = append(dst, v...)
		dst = append(dst, '"')
	}
	dst = append(dst, '{')
	start := len(dst)
	str("actor", w.Actor, true, false)
	str("arguments_digest", w.ArgumentsDigest, false, true)
	str("context_digest", w.ContextDigest, false, true)
	if w.EventID != 0 {
		dst = append(dst, `,"event_id":`...)
		dst = strconv.AppendInt(dst, w.EventID, 10)
	}
	str("instance_id", w.InstanceID, false, false)
	str("policy_hash", w.PolicyHash, false, false)
	str("reasoning_digest", w.ReasoningDigest, false, true)
	str("request_id", w.RequestID, false, false)
	str("state", w.State, false, false)
	str("subject", w.Subject, false, false)
	str("time", w.Time, true, true)
	str("token_id", w.TokenID, false, false)
	str("tool_digest", w.ToolDigest, false, true)
	str("type", w.Type, true, false)
	str("uid", w.UID, false, false)
	dst = append(dst, `,"v":`...)
	dst = strconv.AppendInt(dst, int64(w.V), 10)
	dst = append(dst, '}')
	// Members are written with a leading comma; the first one's goes.
	dst = append(dst[:start], dst[start+1:]...)
	return dst, ok
}

// plainString reports whether json.Marshal writes s as itself between
// quotes, and RFC 8785 does too: valid UTF-8 with no control character,
// quote, backslash, U+2028 or U+2029, and none of the <, > and & that
// json.Marshal escapes.
func plainString(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !plainASCII[c] {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += size
	}
	return true
}

// plainASCII are the ASCII bytes plainString lets through.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = !strings.ContainsRune(`"\<>&`, rune(c))
	}
	return t
}()

// maxExactInteger is the largest integer RFC 8785 writes as itself: its
// numbers are IEEE 754 doubles.
const maxExactInteger = 1<<53 - 1

// canonicalAlready reports whether json.Marshal's bytes of a wireLeaf are
// already its canonical form (RFC 8785), which spares a verifier the
// canonicalisation it would otherwise run for every leaf. They are when no
// string needed an escape — json.Marshal and RFC 8785 escape differently
// (<, >, &, U+2028, invalid UTF-8), and both write every other character as
// itself — and the event ID is an integer a double holds exactly; wireLeaf's
// members are declared in the canonical order. TestMarshalFastPath checks
// both paths agree.
func canonicalAlready(data []byte, eventID int64) bool {
	return eventID <= maxExactInteger && bytes.IndexByte(data, '\\') < 0
}

// check refuses a leaf that could not be read back as itself, or that breaks
// the rules of the package doc.
func (l Leaf) check() error {
	switch {
	case l.Type == "":
		return errors.New("leaf: no event type")
	case l.UID == "" && l.EventID <= 0:
		return errors.New("leaf: event has neither a uid nor an id")
	case l.UID != "" && l.EventID != 0:
		return errors.New("leaf: event_id is only for events without a uid")
	case l.At.IsZero():
		return errors.New("leaf: event has no time")
	case l.At.Nanosecond()%1000 != 0:
		return fmt.Errorf("leaf: time %s is finer than the microsecond stores keep", l.At.Format(time.RFC3339Nano))
	case l.At.UTC().Year() < 1 || l.At.UTC().Year() > 9999:
		return fmt.Errorf("leaf: time %s is outside RFC 3339's years", l.At.Format(time.RFC3339Nano))
	case l.RequestID != "" && l.Payloads == nil:
		return fmt.Errorf("leaf: event of request %s without the request's payload digests", l.RequestID)
	case l.RequestID == "" && l.Payloads != nil:
		return errors.New("leaf: payload digests for an event without a request")
	}
	for _, s := range []string{string(l.Type), l.UID, l.Actor, l.RequestID, l.InstanceID, l.TokenID, string(l.State), l.Subject, l.PolicyHash} {
		if strings.ContainsRune(s, 0) {
			return errors.New("leaf: NUL in a member")
		}
	}
	if p := l.Payloads; p != nil {
		for _, d := range []struct {
			name, digest string
			required     bool
		}{{"tool", p.Tool, true}, {"arguments", p.Arguments, false}, {"reasoning", p.Reasoning, true}, {"context", p.Context, false}} {
			if d.digest == "" && !d.required {
				continue
			}
			if err := checkDigest(d.digest); err != nil {
				return fmt.Errorf("leaf: %s digest: %w", d.name, err)
			}
		}
	}
	return nil
}

// checkDigest refuses anything but "sha256:" and 43 base64url characters.
func checkDigest(d string) error {
	if len(d) != digestLen || !strings.HasPrefix(d, digestPrefix) {
		return fmt.Errorf("%q is not sha256: and 43 base64url characters", d)
	}
	// Decoded on the stack: the sequencer checks several digests a leaf.
	var src [digestLen - len(digestPrefix)]byte
	var sum [sha256.Size]byte
	copy(src[:], d[len(digestPrefix):])
	if _, err := strictBase64URL.Decode(sum[:], src[:]); err != nil {
		return fmt.Errorf("%q is not sha256: and 43 base64url characters", d)
	}
	return nil
}

// strictBase64URL is the encoding of a digest's hash, refusing any other
// spelling of its bytes.
var strictBase64URL = base64.RawURLEncoding.Strict()

// ParseLeaf reads a leaf from its canonical bytes, as a verifier does. It
// refuses bytes that are not the canonical form of a leaf of LeafVersion:
// another spelling of the same JSON, unknown or duplicated members, a
// malformed time or digest, payload digests without a request or a request
// without them. So a leaf that parses is exactly Marshal of what it returns.
func ParseLeaf(data []byte) (Leaf, error) {
	// Most leaves are read back from the bytes Marshal wrote: decoding and
	// marshalling again gives the same bytes, and that alone proves the
	// form — an unknown, duplicated or differently spelt member, another
	// order or spacing would marshal differently. Anything else takes the
	// strict path below, which says what is wrong.
	if l, err := decodeLeaf(data); err == nil {
		if again, err := l.Marshal(); err == nil && bytes.Equal(again, data) {
			return l, nil
		}
	}
	members, err := airlock.ParseObject(data)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf: %w", err)
	}
	for _, m := range members {
		if !slices.Contains(leafMembers, m.Key) {
			return Leaf{}, fmt.Errorf("leaf: unknown member %q", airlock.Clip(m.Key))
		}
	}
	l, err := decodeLeaf(data)
	if err != nil {
		return Leaf{}, err
	}
	again, err := l.Marshal()
	if err != nil {
		return Leaf{}, err
	}
	if !bytes.Equal(again, data) {
		return Leaf{}, errors.New("leaf: not in its canonical form (RFC 8785)")
	}
	return l, nil
}

// decodeLeaf reads a leaf's members, its version and time, without checking
// that data is the leaf's canonical form.
func decodeLeaf(data []byte) (Leaf, error) {
	var w wireLeaf
	w.V = -1
	if err := json.Unmarshal(data, &w); err != nil {
		return Leaf{}, fmt.Errorf("leaf: %w", err)
	}
	if w.V != LeafVersion {
		return Leaf{}, fmt.Errorf("leaf: version %d, want %d", w.V, LeafVersion)
	}
	at, err := time.Parse(TimeLayout, w.Time)
	if err != nil {
		return Leaf{}, fmt.Errorf("leaf: time %q is not %s", airlock.Clip(w.Time), TimeLayout)
	}
	l := Leaf{
		Type: airlock.EventType(w.Type), UID: w.UID, EventID: w.EventID, At: at, Actor: w.Actor,
		RequestID: w.RequestID, InstanceID: w.InstanceID, TokenID: w.TokenID,
		State: airlock.State(w.State), Subject: w.Subject, PolicyHash: w.PolicyHash,
	}
	if w.ToolDigest != "" || w.ArgumentsDigest != "" || w.ReasoningDigest != "" || w.ContextDigest != "" {
		l.Payloads = &Payloads{Tool: w.ToolDigest, Arguments: w.ArgumentsDigest, Reasoning: w.ReasoningDigest, Context: w.ContextDigest}
	}
	return l, nil
}
