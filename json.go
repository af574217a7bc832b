package airlock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONDepth is the deepest nesting of objects and arrays accepted anywhere.
const MaxJSONDepth = 64

// Member is one key of a JSON object with its raw value, in document order.
type Member struct {
	Key   string
	Value json.RawMessage
}

// ParseObject checks that data is one strict JSON object and returns its
// top-level members with their raw values.
//
// Go's encoding/json matches keys case-insensitively, keeps the last of
// duplicate keys and replaces invalid UTF-8 silently. A reviewer must see
// exactly what will run, so anywhere in the document this rejects duplicate
// keys, keys that differ only in case, invalid UTF-8, unpaired surrogate
// escapes, NUL (raw or escaped), and nesting deeper than MaxJSONDepth.
func ParseObject(data []byte) ([]Member, error) {
	if !utf8.Valid(data) {
		return nil, Invalid("", "body is not valid UTF-8")
	}
	p := parser{data: data}
	p.skipSpace()
	if p.pos >= len(p.data) || p.data[p.pos] != '{' {
		return nil, Invalid("", "body must be a JSON object")
	}
	var members []Member
	if err := p.object("", 1, &members); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, Invalid("", "unexpected data after the JSON object at byte %d", p.pos)
	}
	return members, nil
}

// CheckJSON checks that data is one strict JSON value of any type, under the
// rules of ParseObject; path names it in errors.
func CheckJSON(path string, data []byte) error {
	if !utf8.Valid(data) {
		return Invalid(path, "%s is not valid UTF-8", path)
	}
	p := parser{data: data}
	p.skipSpace()
	if err := p.value(path, 0); err != nil {
		return err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return Invalid(path, "unexpected data after the JSON value at byte %d", p.pos)
	}
	return nil
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) errorf(path, format string, args ...any) error {
	field := path
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return Invalid(field, "%s", msg)
}

func (p *parser) syntax(path string) error {
	if p.pos >= len(p.data) {
		return p.errorf(path, "unexpected end of JSON")
	}
	return p.errorf(path, "invalid JSON at byte %d", p.pos)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (p *parser) value(path string, depth int) error {
	if p.pos >= len(p.data) {
		return p.syntax(path)
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(path, depth+1, nil)
	case c == '[':
		return p.array(path, depth+1)
	case c == '"':
		_, err := p.str(path)
		return err
	case c == 't':
		return p.literal(path, "true")
	case c == 'f':
		return p.literal(path, "false")
	case c == 'n':
		return p.literal(path, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(path)
	}
	return p.syntax(path)
}

func (p *parser) literal(path, lit string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
		return p.syntax(path)
	}
	p.pos += len(lit)
	return nil
}

func (p *parser) object(path string, depth int, members *[]Member) error {
	if depth > MaxJSONDepth {
		return p.errorf(path, "JSON nesting deeper than %d levels", MaxJSONDepth)
	}
	p.pos++ // {
	seen := map[string]string{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.syntax(path)
		}
		key, err := p.str(path)
		if err != nil {
			return err
		}
		folded := foldKey(key)
		if prev, ok := seen[folded]; ok {
			if prev == key {
				return p.errorf(path, "duplicate key %q", key)
			}
			return p.errorf(path, "keys %q and %q differ only in case; use one", prev, key)
		}
		seen[folded] = key
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.syntax(path)
		}
		p.pos++
		p.skipSpace()
		start := p.pos
		if err := p.value(join(path, key), depth); err != nil {
			return err
		}
		if members != nil {
			*members = append(*members, Member{Key: key, Value: json.RawMessage(p.data[start:p.pos])})
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.syntax(path)
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return nil
		default:
			return p.syntax(path)
		}
	}
}

func (p *parser) array(path string, depth int) error {
	if depth > MaxJSONDepth {
		return p.errorf(path, "JSON nesting deeper than %d levels", MaxJSONDepth)
	}
	p.pos++ // [
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return nil
	}
	for i := 0; ; i++ {
		p.skipSpace()
		if err := p.value(path+"["+strconv.Itoa(i)+"]", depth); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.syntax(path)
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return nil
		default:
			return p.syntax(path)
		}
	}
}

// str parses a string at p.pos and returns its decoded value.
func (p *parser) str(path string) (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			if c == 0 {
				return "", p.errorf(path, "NUL character in string")
			}
			return "", p.errorf(path, "unescaped control character in string at byte %d", p.pos)
		}
		p.pos++
	}
	var b strings.Builder
	b.Write(p.data[start:p.pos])
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c < 0x20:
			if c == 0 {
				return "", p.errorf(path, "NUL character in string")
			}
			return "", p.errorf(path, "unescaped control character in string at byte %d", p.pos)
		case c != '\\':
			b.WriteByte(c)
			p.pos++
			continue
		}
		// escape
		if p.pos+1 >= len(p.data) {
			return "", p.syntax(path)
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.syntax(path)
			}
			if r == 0 {
				return "", p.errorf(path, "NUL character (\\u0000) in string")
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
					return "", p.errorf(path, "unpaired surrogate escape in string")
				}
				p.pos += 2
				r2, ok := p.hex4()
				if !ok {
					return "", p.syntax(path)
				}
				r = utf16.DecodeRune(r, r2)
				if r == unicode.ReplacementChar {
					return "", p.errorf(path, "unpaired surrogate escape in string")
				}
			}
			b.WriteRune(r)
		default:
			return "", p.errorf(path, "invalid escape \\%c in string", e)
		}
	}
	return "", p.syntax(path)
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(v), true
}

func (p *parser) number(path string) error {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(p.data) && p.data[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return p.syntax(path)
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.syntax(path)
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.syntax(path)
		}
	}
	if p.pos-start > 100 {
		return p.errorf(path, "number literal longer than 100 characters")
	}
	return nil
}

// foldKey maps a key to a representative of its case-folding class, so keys
// that encoding/json would treat as the same field compare equal.
func foldKey(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	for _, r := range s {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}

// Canonical returns a canonical encoding of a strict JSON value: object keys
// sorted, no insignificant space, numbers as written. Two documents with the
// same meaning have the same canonical bytes, which makes them safe to hash.
func Canonical(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
