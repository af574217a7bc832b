package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// segment is a run of text as the reviewer sees it: plain text, or one
// marker standing for a character that would otherwise be invisible or
// would reorder the text around it (⟨U+202E⟩).
type segment struct {
	Text   string
	Marker bool
}

// visible splits s into segments, replacing every character a reviewer
// could not see or that changes how the text around it is displayed by a
// marker naming its code point. Line breaks and tabs are markers too: a
// one-line field such as a tool name or a title must not hide a second
// line.
func visible(s string) []segment { return split(s, false) }

// visibleText is visible for multi-line texts (the agent's reasoning, a
// description, a note, formatted JSON): line feeds and tabs stay as they
// are, every other invisible character becomes a marker.
func visibleText(s string) []segment { return split(s, true) }

func split(s string, multiline bool) []segment {
	var out []segment
	var plain strings.Builder
	flush := func() {
		if plain.Len() > 0 {
			out = append(out, segment{Text: plain.String()})
			plain.Reset()
		}
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			flush()
			out = append(out, segment{Text: fmt.Sprintf("⟨0x%02X⟩", s[i]), Marker: true})
		case hidden(r, multiline):
			flush()
			out = append(out, segment{Text: marker(r), Marker: true})
		default:
			plain.WriteRune(r)
		}
		i += size
	}
	flush()
	return out
}

// marker is how a hidden character is shown: ⟨U+202E⟩.
func marker(r rune) string { return fmt.Sprintf("⟨U+%04X⟩", r) }

// hidden reports whether r must be shown as a marker: controls (Cc),
// format characters (Cf: zero-width, bidirectional controls U+202A–U+202E
// and U+2066–U+2069, tag characters U+E0000–U+E007F, BOM), separators other
// than the ASCII space (no-break and other-width spaces, line and paragraph
// separators), private-use and unassigned code points, variation selectors,
// and the letters and marks that render as nothing (Hangul fillers, the
// combining grapheme joiner, the Braille blank).
func hidden(r rune, multiline bool) bool {
	if multiline && (r == '\n' || r == '\t') {
		return false
	}
	if r == ' ' {
		return false
	}
	switch r {
	case 0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180E, 0x2800, 0x3164, 0xFFA0:
		return true
	}
	if r >= 0xE0000 && r <= 0xE007F {
		return true
	}
	if unicode.Is(unicode.Variation_Selector, r) {
		return true
	}
	// IsPrint is false for Cc, Cf, Co, Cn, Zl, Zp and every space but ' '.
	return !unicode.IsPrint(r)
}

// plainText joins segments back into a string, markers included: what a
// reviewer reads, for places that take a plain string (the page title).
func plainText(segs []segment) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.Text)
	}
	return b.String()
}

// lookAlike returns a warning when a word of s mixes letters of Latin,
// Greek and Cyrillic, as "pаypal" with a Cyrillic "а" does: each letter
// looks right, the word is not what it seems. Empty when there is none.
func lookAlike(s string) string {
	var word []rune
	check := func() string {
		defer func() { word = word[:0] }()
		scripts := map[string]bool{}
		for _, r := range word {
			switch {
			case unicode.Is(unicode.Latin, r):
				scripts["Latin"] = true
			case unicode.Is(unicode.Cyrillic, r):
				scripts["Cyrillic"] = true
			case unicode.Is(unicode.Greek, r):
				scripts["Greek"] = true
			}
		}
		if len(scripts) < 2 {
			return ""
		}
		var names []string
		for _, n := range []string{"Latin", "Greek", "Cyrillic"} {
			if scripts[n] {
				names = append(names, n)
			}
		}
		return fmt.Sprintf("“%s” mixes %s letters: some may be look-alikes", plainText(visible(string(word))), strings.Join(names, " and "))
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsMark(r) {
			word = append(word, r)
			continue
		}
		if w := check(); w != "" {
			return w
		}
	}
	return check()
}

// prettyJSON indents a JSON document for reading. The bytes of every
// string, number and key stay exactly as submitted; only whitespace
// between tokens changes. A document that does not indent (it cannot
// happen for stored requests, which were checked strictly) is shown as is.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
