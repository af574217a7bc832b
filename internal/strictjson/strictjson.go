// Package strictjson reads JSON the way a reviewer must be able to trust:
// one reading only. Go's encoding/json (v1) matches keys
// case-insensitively, keeps the last of duplicate keys and replaces
// invalid UTF-8 silently, so two programs can read one document two ways;
// this package refuses, anywhere in a document, duplicate keys, keys that
// differ only in case, invalid UTF-8, unpaired surrogate escapes, NUL (raw
// or escaped), nesting deeper than MaxDepth and numbers a 64-bit float
// cannot hold, and it makes the canonical bytes that are hashed.
//
// Its refusals are *Error values naming the path and the byte offset; the
// domain package turns them into its invalid_request errors in one place
// (airlock.ParseObject and its siblings), so no caller sees this package's
// errors.
package strictjson

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

// MaxDepth is the deepest nesting of objects and arrays accepted anywhere.
const MaxDepth = 64

// Member is one key of a JSON object with its raw value, in document order.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Error is a document refused: where, and why.
type Error struct {
	// Path is the member or element that holds the fault, as
	// "arguments.items[2].sku" (keys clipped to 64 bytes); empty for the
	// document as a whole.
	Path string
	// Offset is the byte of the document where reading stopped.
	Offset int
	// Reason says what is wrong, without the path.
	Reason string
}

// Error is the reason, after the path when there is one.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// ParseObject checks that data is one strict JSON object and returns its
// top-level members with their raw values.
//
// Go's encoding/json matches keys case-insensitively, keeps the last of
// duplicate keys and replaces invalid UTF-8 silently. A reviewer must see
// exactly what will run, so anywhere in the document this rejects duplicate
// keys, keys that differ only in case, invalid UTF-8, unpaired surrogate
// escapes, NUL (raw or escaped), and nesting deeper than MaxDepth.
func ParseObject(data []byte) ([]Member, error) {
	// UTF-8 is checked string by string (the only place a non-ASCII byte may
	// appear), so an error can name the path that holds the bad byte.
	p := parser{data: data}
	p.skipSpace()
	if p.pos >= len(p.data) || p.data[p.pos] != '{' {
		return nil, &Error{Offset: p.pos, Reason: "body must be a JSON object"}
	}
	var members []Member
	if err := p.object(1, &members); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, &Error{Offset: p.pos, Reason: fmt.Sprintf("unexpected data after the JSON object at byte %d", p.pos)}
	}
	return members, nil
}

// Check checks that data is one strict JSON value of any type, under the
// rules of ParseObject; path names it in errors.
func Check(path string, data []byte) error {
	p := parser{data: data, root: path}
	p.skipSpace()
	if err := p.value(0); err != nil {
		return err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return p.errorf("unexpected data after the JSON value at byte %d", p.pos)
	}
	return nil
}

// parser is a strict JSON checker. It tracks where it is as a stack of
// segments and spells the path out only for an error: building it for every
// value would cost the path's length per value, and a 1 MiB body with one
// long key over many values would take minutes.
type parser struct {
	data []byte
	pos  int
	root string    // path of the whole document in errors
	path []pathSeg // the member or element being read
}

// pathSeg is one step of a path: an object key, or an array index when
// index >= 0.
type pathSeg struct {
	key   string
	index int
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

// pathString spells the current path: keys joined by ".", indexes in
// brackets, as in "arguments.items[2].sku".
func (p *parser) pathString() string {
	var b strings.Builder
	b.WriteString(p.root)
	for _, s := range p.path {
		if s.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(Clip(s.key))
	}
	return b.String()
}

// Clip shortens a text for an error message: a body may hold keys of a
// megabyte, and echoing them back helps nobody.
func Clip(s string) string {
	const shown = 64
	if len(s) <= shown {
		return s
	}
	cut := shown - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// errorf returns the refusal of the document at the current path and
// offset.
func (p *parser) errorf(format string, args ...any) error {
	return &Error{Path: p.pathString(), Offset: p.pos, Reason: fmt.Sprintf(format, args...)}
}

func (p *parser) syntax() error {
	if p.pos >= len(p.data) {
		return p.errorf("unexpected end of JSON")
	}
	if r, size := utf8.DecodeRune(p.data[p.pos:]); r == utf8.RuneError && size <= 1 {
		return p.errorf("invalid UTF-8 at byte %d", p.pos)
	}
	return p.errorf("invalid JSON at byte %d", p.pos)
}

func (p *parser) value(depth int) error {
	if p.pos >= len(p.data) {
		return p.syntax()
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth+1, nil)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		_, err := p.str(false)
		return err
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return p.syntax()
}

func (p *parser) literal(lit string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
		return p.syntax()
	}
	p.pos += len(lit)
	return nil
}

func (p *parser) object(depth int, members *[]Member) error {
	if depth > MaxDepth {
		return p.errorf("JSON nesting deeper than %d levels", MaxDepth)
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
			return p.syntax()
		}
		key, err := p.str(true)
		if err != nil {
			return err
		}
		folded := foldKey(key)
		if prev, ok := seen[folded]; ok {
			if prev == key {
				return p.errorf("duplicate key %q", Clip(key))
			}
			return p.errorf("keys %q and %q differ only in case; use one", Clip(prev), Clip(key))
		}
		seen[folded] = key
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.syntax()
		}
		p.pos++
		p.skipSpace()
		start := p.pos
		p.path = append(p.path, pathSeg{key: key, index: -1})
		if err := p.value(depth); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		if members != nil {
			*members = append(*members, Member{Key: key, Value: json.RawMessage(p.data[start:p.pos])})
		}
		if more, err := p.more('}'); !more {
			return err
		}
	}
}

func (p *parser) array(depth int) error {
	if depth > MaxDepth {
		return p.errorf("JSON nesting deeper than %d levels", MaxDepth)
	}
	p.pos++ // [
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return nil
	}
	for i := 0; ; i++ {
		p.skipSpace()
		p.path = append(p.path, pathSeg{index: i})
		if err := p.value(depth); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		if more, err := p.more(']'); !more {
			return err
		}
	}
}

// more reads what follows a member or an element: a comma, when more
// follow, or closer, which ends the object or array.
func (p *parser) more(closer byte) (bool, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return false, p.syntax()
	}
	switch p.data[p.pos] {
	case ',':
		p.pos++
		return true, nil
	case closer:
		p.pos++
		return false, nil
	}
	return false, p.syntax()
}

// str checks the string at p.pos and, when keep is set, returns its decoded
// value (values are only checked, so they are not copied).
func (p *parser) str(keep bool) (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			var s string
			if keep {
				s = string(p.data[start:p.pos])
			}
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			if c == 0 {
				return "", p.errorf("NUL character in string")
			}
			return "", p.errorf("unescaped control character in string at byte %d", p.pos)
		}
		if c >= utf8.RuneSelf {
			size, err := p.utf8Rune()
			if err != nil {
				return "", err
			}
			p.pos += size
			continue
		}
		p.pos++
	}
	var b strings.Builder
	if keep {
		b.Write(p.data[start:p.pos])
	}
	write := func(bs ...byte) {
		if keep {
			b.Write(bs)
		}
	}
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c < 0x20:
			if c == 0 {
				return "", p.errorf("NUL character in string")
			}
			return "", p.errorf("unescaped control character in string at byte %d", p.pos)
		case c >= utf8.RuneSelf:
			size, err := p.utf8Rune()
			if err != nil {
				return "", err
			}
			write(p.data[p.pos : p.pos+size]...)
			p.pos += size
			continue
		case c != '\\':
			write(c)
			p.pos++
			continue
		}
		// escape
		if p.pos+1 >= len(p.data) {
			return "", p.syntax()
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			write(e)
		case 'b':
			write('\b')
		case 'f':
			write('\f')
		case 'n':
			write('\n')
		case 'r':
			write('\r')
		case 't':
			write('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.syntax()
			}
			if r == 0 {
				return "", p.errorf("NUL character (\\u0000) in string")
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
					return "", p.errorf("unpaired surrogate escape in string")
				}
				p.pos += 2
				r2, ok := p.hex4()
				if !ok {
					return "", p.syntax()
				}
				r = utf16.DecodeRune(r, r2)
				if r == unicode.ReplacementChar {
					return "", p.errorf("unpaired surrogate escape in string")
				}
			}
			if keep {
				b.WriteRune(r)
			}
		default:
			return "", p.errorf("invalid escape \\%c in string", e)
		}
	}
	return "", p.syntax()
}

// utf8Rune checks the multi-byte UTF-8 sequence at p.pos and returns its
// length. Overlong forms, encoded surrogates and truncated sequences are
// refused, exactly as utf8.Valid refuses them.
func (p *parser) utf8Rune() (int, error) {
	r, size := utf8.DecodeRune(p.data[p.pos:])
	if r == utf8.RuneError && size == 1 {
		return 0, p.errorf("invalid UTF-8 in string at byte %d", p.pos)
	}
	return size, nil
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

func (p *parser) number() error {
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
		return p.syntax()
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.syntax()
		}
	}
	mantissaEnd := -1
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		mantissaEnd = p.pos
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.syntax()
		}
	}
	if p.pos-start > 100 {
		return p.errorf("number literal longer than 100 characters")
	}
	if mantissaEnd >= 0 {
		return p.checkFloatRange(p.data[start:p.pos], p.data[start:mantissaEnd])
	}
	return nil
}

// checkFloatRange refuses a number literal with an exponent that a 64-bit
// float cannot hold: JavaScript, and most JSON decoders, read 1e400 as
// Infinity and 1e-400 as 0, so a reviewer and the tool could see different
// values. Without an exponent a literal of at most 100 characters is always
// in range, so only literals with one are parsed.
func (p *parser) checkFloatRange(lit, mantissa []byte) error {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		// The syntax was checked above, so this is strconv.ErrRange.
		return p.errorf("number %s is beyond the range of a 64-bit float (JavaScript reads it as Infinity); send a smaller number, or the number as a string", lit)
	}
	if f == 0 && bytes.ContainsAny(mantissa, "123456789") {
		return p.errorf("number %s is too small for a 64-bit float (JavaScript reads it as 0); send 0, or the number as a string", lit)
	}
	return nil
}

// foldKey maps a key to a representative of its case-folding class, so keys
// that encoding/json would treat as the same field compare equal.
//
// encoding/json (fold.go) upper-cases ASCII and maps any other rune to the
// smallest rune of its unicode.SimpleFold orbit, so "s", "S" and "ſ"
// (U+017F) are one name, as are "k", "K" and the Kelvin sign (U+212A). The
// same folding must apply to every rune, ASCII or not, or a key written
// with one long s slips past its ASCII twin. Here each rune becomes the
// lower case of its orbit's smallest rune (lower case, so that the common
// all-lower-case ASCII key needs no allocation); folding ToUpper(ToLower(r))
// first also joins "İ" (U+0130) and "ı" (U+0131) to "i", which decoders that
// match names with ToUpper/ToLower confuse; refusing that pair costs nothing.
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
		b.WriteRune(unicode.ToLower(foldRune(unicode.ToUpper(unicode.ToLower(r)))))
	}
	return b.String()
}

// foldRune returns the smallest rune of r's simple case-folding orbit.
func foldRune(r rune) rune {
	min := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < min {
			min = f
		}
	}
	return min
}

// Canonical returns a canonical encoding of a strict JSON value: object keys
// sorted, no insignificant space, numbers as written. Two documents with the
// same meaning have the same canonical bytes, which makes them safe to hash.
//
// Canonical refuses input that is not strict JSON (see Check): given
// duplicate keys encoding/json keeps the last one and it ignores data after
// the first value, so two different documents would hash alike.
func Canonical(data []byte) ([]byte, error) {
	if err := Check("", data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return Encode(v)
}

// Encode encodes v as compact JSON without HTML escaping: <, > and &
// stay as they are, so text goes out as its author wrote it.
func Encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
