// Package display shows people the texts agents wrote, as they are: every
// character a reader could not see, or that would reorder the text around
// it, becomes a marker naming its code point (⟨U+202E⟩), and a word that
// mixes Latin, Greek and Cyrillic letters is flagged. The inbox shows
// texts through it, and the command line prints them through it, so a
// terminal shows what the inbox shows and no escape sequence reaches it.
package display

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Segment is a run of text as the reader sees it: plain text, or one
// marker standing for a character that would otherwise be invisible or
// would reorder the text around it (⟨U+202E⟩). Templates show markers
// apart.
type Segment struct {
	Text   string
	Marker bool
}

// Line splits s into segments, replacing every character a reader could
// not see or that changes how the text around it is displayed by a marker
// naming its code point. Line breaks and tabs are markers too: a one-line
// field such as a tool name or a title must not hide a second line.
func Line(s string) []Segment { return split(s, false) }

// Text is Line for multi-line texts (the agent's reasoning, a
// description, a note, formatted JSON): line feeds and tabs stay as they
// are, every other invisible character becomes a marker.
func Text(s string) []Segment { return split(s, true) }

// Visible returns s as a one-line field is shown: Line joined back into
// a string, markers included.
func Visible(s string) string { return Join(Line(s)) }

// VisibleText is Visible for multi-line texts: Text joined back into a
// string.
func VisibleText(s string) string { return Join(Text(s)) }

func split(s string, multiline bool) []Segment {
	var out []Segment
	var plain strings.Builder
	flush := func() {
		if plain.Len() > 0 {
			out = append(out, Segment{Text: plain.String()})
			plain.Reset()
		}
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			flush()
			out = append(out, Segment{Text: fmt.Sprintf("⟨0x%02X⟩", s[i]), Marker: true})
		case Hidden(r, multiline):
			flush()
			out = append(out, Segment{Text: marker(r), Marker: true})
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

// Hidden reports whether r is shown as a marker, in a multi-line text when
// multiline is set: controls (Cc), format characters (Cf: zero-width,
// bidirectional controls U+202A–U+202E and U+2066–U+2069, tag characters
// U+E0000–U+E007F, BOM), separators other than the ASCII space (no-break
// and other-width spaces, line and paragraph separators), private-use and
// unassigned code points, variation selectors, and the letters and marks
// that render as nothing (Hangul fillers, the combining grapheme joiner,
// the Braille blank). A multi-line text keeps its line feeds and tabs.
func Hidden(r rune, multiline bool) bool {
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

// Join joins segments back into a string, markers included: what a
// reader reads, for places that take a plain string (a page's title, a
// terminal).
func Join(segs []Segment) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.Text)
	}
	return b.String()
}

// LookAlike returns a warning when a word of s mixes letters of Latin,
// Greek and Cyrillic, as "pаypal" with a Cyrillic "а" does: each letter
// looks right, the word is not what it seems. Empty when there is none.
func LookAlike(s string) string {
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
		return fmt.Sprintf("“%s” mixes %s letters: some may be look-alikes", Visible(string(word)), strings.Join(names, " and "))
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
