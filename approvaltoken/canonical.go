package approvaltoken

import (
	"bytes"
	"slices"
)

// The arguments' canonical form is computed on every signature and every
// verification. gowebpki/jcs builds a tree of strings for any document;
// most arguments are plain (ASCII strings without escapes, short integers,
// objects with distinct keys), and for those canonicalPlain writes the
// canonical form in one pass. Anything else, and anything it is not sure
// of, it leaves to jcs: it only ever answers for documents whose canonical
// form it knows to be jcs's (FuzzCanonicalPlain holds it to that).

// Limits of the one-pass canonical form: deeper documents and longer
// integers go to jcs.
const (
	plainMaxDepth     = 32
	plainMaxIntDigits = 15 // below 2^53: the double prints as these digits
)

// canonicalPlain returns the RFC 8785 canonical form of data, a valid
// JSON document (json.Valid), or false when data is not plain enough for
// it to be sure; then jcs decides.
func canonicalPlain(data []byte) ([]byte, bool) {
	p := plain{in: data, out: make([]byte, 0, len(data))}
	if !p.value(0) {
		return nil, false
	}
	p.space()
	if p.i != len(p.in) {
		return nil, false
	}
	return p.out, true
}

// plain is canonicalPlain's reader: in from i, the canonical form so far
// in out.
type plain struct {
	in  []byte
	i   int
	out []byte
}

func (p *plain) space() {
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value copies one value at i to out, canonical.
func (p *plain) value(depth int) bool {
	p.space()
	if p.i >= len(p.in) || depth > plainMaxDepth {
		return false
	}
	switch c := p.in[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, ok := p.str()
		p.out = append(append(append(p.out, '"'), s...), '"')
		return ok
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return p.integer()
	}
}

func (p *plain) literal(lit string) bool {
	if !bytes.HasPrefix(p.in[p.i:], []byte(lit)) {
		return false
	}
	p.i += len(lit)
	p.out = append(p.out, lit...)
	return true
}

// str reads a string at i and returns its content: only printable ASCII
// without a backslash, which is its own canonical form (RFC 8785 escapes
// only '"', '\' and control characters, and writes all else as is).
func (p *plain) str() ([]byte, bool) {
	p.i++ // the opening quote
	start := p.i
	for ; p.i < len(p.in); p.i++ {
		switch c := p.in[p.i]; {
		case c == '"':
			s := p.in[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// integer copies an integer of at most plainMaxIntDigits digits: ES6's
// form of its double is its own digits, but -0 is 0. Fractions and
// exponents go to jcs.
func (p *plain) integer() bool {
	start := p.i
	if p.i < len(p.in) && p.in[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.in) && '0' <= p.in[p.i] && p.in[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	switch {
	case n == 0 || n > plainMaxIntDigits || n > 1 && p.in[digits] == '0':
		return false
	case p.i < len(p.in) && (p.in[p.i] == '.' || p.in[p.i] == 'e' || p.in[p.i] == 'E'):
		return false
	case n == 1 && p.in[digits] == '0':
		p.out = append(p.out, '0') // -0 too
		return true
	}
	p.out = append(p.out, p.in[start:p.i]...)
	return true
}

func (p *plain) array(depth int) bool {
	p.i++ // '['
	p.out = append(p.out, '[')
	p.space()
	if p.i < len(p.in) && p.in[p.i] == ']' {
		p.i++
		p.out = append(p.out, ']')
		return true
	}
	for {
		if !p.value(depth + 1) {
			return false
		}
		p.space()
		if p.i >= len(p.in) {
			return false
		}
		switch p.in[p.i] {
		case ',':
			p.i++
			p.out = append(p.out, ',')
		case ']':
			p.i++
			p.out = append(p.out, ']')
			return true
		default:
			return false
		}
	}
}

// member is one member of an object: its key, and where its canonical
// "key":value lies in out.
type member struct {
	key        []byte
	start, end int
}

// object copies an object with its members sorted by key. The keys are
// ASCII, whose UTF-16 code units sort as their bytes do; two equal keys
// go to jcs, which refuses them.
func (p *plain) object(depth int) bool {
	p.i++ // '{'
	p.out = append(p.out, '{')
	p.space()
	if p.i < len(p.in) && p.in[p.i] == '}' {
		p.i++
		p.out = append(p.out, '}')
		return true
	}
	var buf [16]member
	members := buf[:0]
	first := len(p.out)
	for {
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != '"' {
			return false
		}
		start := len(p.out)
		key, ok := p.str()
		if !ok {
			return false
		}
		p.out = append(append(append(p.out, '"'), key...), '"', ':')
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != ':' {
			return false
		}
		p.i++
		if !p.value(depth + 1) {
			return false
		}
		members = append(members, member{key: key, start: start, end: len(p.out)})
		p.space()
		if p.i >= len(p.in) {
			return false
		}
		if p.in[p.i] == '}' {
			p.i++
			break
		}
		if p.in[p.i] != ',' {
			return false
		}
		p.i++
		p.out = append(p.out, ',')
	}
	byKey := func(a, b member) int { return bytes.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(members, byKey) {
		written := slices.Clone(p.out[first:])
		slices.SortFunc(members, byKey)
		p.out = p.out[:first]
		for i, m := range members {
			if i > 0 {
				p.out = append(p.out, ',')
			}
			p.out = append(p.out, written[m.start-first:m.end-first]...)
		}
	}
	for i := 1; i < len(members); i++ {
		if bytes.Equal(members[i-1].key, members[i].key) {
			return false
		}
	}
	p.out = append(p.out, '}')
	return true
}
