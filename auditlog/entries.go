package auditlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
)

// Entry is one leaf with its index in the tree: a line of the export and of
// GET /v1/audit/entries. Leaf holds the leaf's canonical bytes, which the
// tree hashes.
type Entry struct {
	Index int64
	Leaf  []byte
	// Passkey, when set, is the passkey-signed decision or vote this
	// leaf records (the "passkey" member beside "leaf"); it is not part
	// of the leaf, and VerifyEntries checks it against the leaf.
	Passkey *PasskeyRecord
	// parsed: ParseLeaf accepted Leaf already (EntryReader's fast path),
	// so VerifyEntries need not parse it again.
	parsed bool
}

// MaxLineBytes bounds a JSON line of entries. A leaf holds identifiers,
// digests and a time, never a payload, so a line is a few hundred bytes;
// one with a passkey record, whose bytes and note are bounded (about
// 40 KiB at most), a few kilobytes. A longer one is refused before it is
// parsed.
const MaxLineBytes = 64 << 10

// AppendEntry appends e as one JSON line, {"index":N,"leaf":{...}} and a
// newline, to dst: the form EntryReader reads.
func AppendEntry(dst []byte, e Entry) []byte {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, e.Index, 10)
	dst = append(dst, `,"leaf":`...)
	dst = append(dst, e.Leaf...)
	if e.Passkey != nil {
		// A record's members are strings, which always marshal.
		rec, _ := e.Passkey.MarshalJSON()
		dst = append(dst, `,"passkey":`...)
		dst = append(dst, rec...)
	}
	return append(dst, "}\n"...)
}

// EntryReader reads entries from JSON lines, one entry a line.
type EntryReader struct {
	sc   *bufio.Scanner
	line int64
	err  error
}

// NewEntryReader returns a reader of the JSON lines in r.
func NewEntryReader(r io.Reader) *EntryReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	return &EntryReader{sc: sc}
}

// entryLine is one line's members.
type entryLine struct {
	Index   *int64          `json:"index"`
	Leaf    json.RawMessage `json:"leaf"`
	Passkey json.RawMessage `json:"passkey"`
}

// Next returns the next entry, io.EOF after the last, or an error naming the
// line that is not one: longer than MaxLineBytes, not strict JSON (a
// duplicated or unknown member, invalid UTF-8), no index, or a leaf that is
// not a JSON object. The leaf comes back in its canonical form (RFC 8785),
// so a line reformatted in transit reads as it was written; ParseLeaf
// checks what it says. After an error Next returns the same error.
func (r *EntryReader) Next() (Entry, error) {
	if r.err != nil {
		return Entry{}, r.err
	}
	e, err := r.next()
	if err != nil {
		r.err = err
	}
	return e, err
}

func (r *EntryReader) next() (Entry, error) {
	if !r.sc.Scan() {
		err := r.sc.Err()
		switch {
		case errors.Is(err, bufio.ErrTooLong):
			return Entry{}, fmt.Errorf("line %d: longer than %d bytes", r.line+1, MaxLineBytes)
		case err != nil:
			return Entry{}, fmt.Errorf("line %d: %w", r.line+1, err)
		}
		return Entry{}, io.EOF
	}
	r.line++
	line := bytes.TrimSuffix(r.sc.Bytes(), []byte("\r"))
	if e, ok := appendedEntry(line); ok {
		return e, nil
	}
	var l entryLine
	if err := airlock.DecodeObject(line, &l); err != nil {
		return Entry{}, fmt.Errorf("line %d: %w", r.line, err)
	}
	if l.Index == nil {
		return Entry{}, fmt.Errorf("line %d: no index", r.line)
	}
	if len(l.Leaf) == 0 || l.Leaf[0] != '{' {
		return Entry{}, fmt.Errorf("line %d: leaf is not a JSON object", r.line)
	}
	leaf, err := approvaltoken.Canonical(l.Leaf)
	if err != nil {
		return Entry{}, fmt.Errorf("line %d: leaf: %w", r.line, err)
	}
	e := Entry{Index: *l.Index, Leaf: leaf}
	if len(l.Passkey) > 0 && string(l.Passkey) != "null" {
		if e.Passkey, err = parsePasskey(l.Passkey); err != nil {
			return Entry{}, fmt.Errorf("line %d: %w", r.line, err)
		}
	}
	return e, nil
}

// appendedEntry reads a line exactly as AppendEntry writes it, with a leaf in
// its canonical form: the line an export holds unless it was reformatted.
// Anything else (ok false) takes the strict path, which canonicalises the
// leaf and says what is wrong.
func appendedEntry(line []byte) (e Entry, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(`{"index":`))
	if !found {
		return Entry{}, false
	}
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits == 0 || digits > 18 || (digits > 1 && rest[0] == '0') {
		return Entry{}, false
	}
	index, err := strconv.ParseInt(string(rest[:digits]), 10, 64)
	if err != nil {
		return Entry{}, false
	}
	leaf, found := bytes.CutPrefix(rest[digits:], []byte(`,"leaf":`))
	if !found {
		return Entry{}, false
	}
	leaf, found = bytes.CutSuffix(leaf, []byte("}"))
	if !found {
		return Entry{}, false
	}
	if _, err := ParseLeaf(leaf); err != nil {
		return Entry{}, false
	}
	return Entry{Index: index, Leaf: bytes.Clone(leaf), parsed: true}, true
}

// All returns the entries as a sequence for VerifyEntries: each entry with
// a nil error, then, if reading failed, the error, and nothing after it.
func (r *EntryReader) All() iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// Entries returns es as a sequence for VerifyEntries.
func Entries(es []Entry) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for _, e := range es {
			if !yield(e, nil) {
				return
			}
		}
	}
}
