package inbox

import (
	"bytes"
	"encoding/json"
	"github.com/airlockhq/airlock/approvaltoken"
	"strconv"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/display"
)

// jsonPiece is a run of an indented JSON document as a page shows it.
// Long marks a string too long to read on one line: it wraps inside the
// block, where everything else keeps its line.
type jsonPiece struct {
	Long bool
	Text []display.Segment
}

// longString is the length, in characters, from which a JSON string wraps
// inside its block. Shorter strings, keys, numbers and punctuation never
// break: a deep line scrolls sideways in its block instead, so that its
// indentation still shows the structure and `"rm -rf /"` stays one
// token on one line. Longer strings would be read by scrolling sideways
// for pages; they wrap, like prose.
const longString = 80

// jsonPieces indents a JSON document for reading and splits it into
// pieces: each string of longString characters or more apart, the rest
// between. The bytes of every string, number and key stay exactly as
// submitted; only whitespace between tokens changes. A document that does
// not indent (it cannot happen for stored requests, which were checked
// strictly) is shown as it is, as one long piece, so that it wraps.
func jsonPieces(raw json.RawMessage) []jsonPiece {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return []jsonPiece{{Long: true, Text: display.Text(string(raw))}}
	}
	doc := b.String()
	var out []jsonPiece
	from := 0 // the start of what is not yet a piece
	for i := 0; i < len(doc); i++ {
		if doc[i] != '"' {
			continue
		}
		end := stringEnd(doc, i)
		if utf8.RuneCountInString(doc[i:end]) >= longString {
			if from < i {
				out = append(out, jsonPiece{Text: display.Text(doc[from:i])})
			}
			out = append(out, jsonPiece{Long: true, Text: display.Text(doc[i:end])})
			from = end
		}
		i = end - 1
	}
	if from < len(doc) {
		out = append(out, jsonPiece{Text: display.Text(doc[from:])})
	}
	return out
}

// stringEnd returns the index just past the JSON string that starts with
// the quote at doc[start], or len(doc) when it does not end.
func stringEnd(doc string, start int) int {
	for i := start + 1; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(doc)
}

// byteCount writes n bytes for people: "1 byte", "12,345 bytes".
func byteCount(n int) string {
	if n == 1 {
		return "1 byte"
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s + " bytes"
}

// argsDigest is the arguments' digest as an approval token carries it
// (args_digest, docs/tokens.md): "sha256:" and the unpadded base64url
// SHA-256 of their RFC 8785 canonical form, so that a reviewer and a tool
// server compare one value. Arguments without a canonical form (never
// stored: creation checks them) read as such rather than as a digest.
func argsDigest(args []byte) string {
	d, err := approvaltoken.ArgsDigest(args)
	if err != nil {
		return "none: the arguments have no canonical form (RFC 8785)"
	}
	return d
}
