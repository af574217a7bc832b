package display

import "testing"

// TestVisible: every character a reviewer could not see, or that reorders
// the text around it, becomes a marker naming its code point (T18).
func TestVisible(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, single, multi string
	}{
		{"plain text is unchanged", "rm -rf /tmp/x", "rm -rf /tmp/x", "rm -rf /tmp/x"},
		{"letters of any script are unchanged", "Grüße, 東京, Привет 👋", "Grüße, 東京, Привет 👋", "Grüße, 東京, Привет 👋"},
		{"right-to-left override", "invoice\u202Efdp.exe", "invoice⟨U+202E⟩fdp.exe", "invoice⟨U+202E⟩fdp.exe"},
		{"every bidi control", "\u202A\u202B\u202C\u202D\u2066\u2067\u2068\u2069\u200E\u200F\u061C", "⟨U+202A⟩⟨U+202B⟩⟨U+202C⟩⟨U+202D⟩⟨U+2066⟩⟨U+2067⟩⟨U+2068⟩⟨U+2069⟩⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩", ""},
		{"zero-width characters", "a\u200Bb\u200Cc\u200Dd\u2060e\uFEFF", "a⟨U+200B⟩b⟨U+200C⟩c⟨U+200D⟩d⟨U+2060⟩e⟨U+FEFF⟩", ""},
		{"tag characters", "ok\U000E0041\U000E0042\U000E007F", "ok⟨U+E0041⟩⟨U+E0042⟩⟨U+E007F⟩", ""},
		{"controls", "a\x07b\x1bc\x7f", "a⟨U+0007⟩b⟨U+001B⟩c⟨U+007F⟩", ""},
		{"odd spaces", "a\u00A0b\u3000c\u2028d\u2029", "a⟨U+00A0⟩b⟨U+3000⟩c⟨U+2028⟩d⟨U+2029⟩", ""},
		{"invisible letters and selectors", "a\u3164b\uFE0Fc\u034Fd\u2800", "a⟨U+3164⟩b⟨U+FE0F⟩c⟨U+034F⟩d⟨U+2800⟩", ""},
		{"newlines in one-line fields", "ls\nrm -rf /", "ls⟨U+000A⟩rm -rf /", "ls\nrm -rf /"},
		{"tabs and carriage returns", "a\tb\r\n", "a⟨U+0009⟩b⟨U+000D⟩⟨U+000A⟩", "a\tb⟨U+000D⟩\n"},
		{"private use and unassigned", "\uE000\U0010FFFF", "⟨U+E000⟩⟨U+10FFFF⟩", ""},
		{"invalid UTF-8 bytes", "a\xffb", "a⟨0xFF⟩b", "a⟨0xFF⟩b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Visible(tc.in); got != tc.single {
				t.Errorf("Visible(%q) = %q, want %q", tc.in, got, tc.single)
			}
			if tc.multi != "" {
				if got := VisibleText(tc.in); got != tc.multi {
					t.Errorf("VisibleText(%q) = %q, want %q", tc.in, got, tc.multi)
				}
			}
		})
	}
	segs := Line("a\u202Eb")
	if len(segs) != 3 || segs[0].Marker || !segs[1].Marker || segs[2].Marker {
		t.Fatalf("segments %+v: want text, marker, text", segs)
	}
}

// TestLookAlike: a word that mixes Latin with Cyrillic or Greek letters
// is flagged; words of one script, and mixed scripts in separate words,
// are not.
func TestLookAlike(t *testing.T) {
	t.Parallel()
	for in, flagged := range map[string]bool{
		"pаypal.com":            true, // Cyrillic а
		"Αpple":                 true, // Greek Alpha
		"paypal.com":            false,
		"Привет мир":            false,
		"hello Привет":          false,
		`{"host":"gіthub.com"}`: true, // Cyrillic і
		"":                      false,
	} {
		if got := LookAlike(in) != ""; got != flagged {
			t.Errorf("LookAlike(%q) flagged = %v, want %v (%q)", in, got, flagged, LookAlike(in))
		}
	}
}

// TestHidden: a multi-line text keeps its line feeds and tabs; a one-line
// field shows them as markers.
func TestHidden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r           rune
		line, multi bool
	}{{'\n', true, false}, {'\t', true, false}, {'\r', true, true}, {' ', false, false}, {'a', false, false}, {0x202E, true, true}} {
		if got := Hidden(tc.r, false); got != tc.line {
			t.Errorf("Hidden(%U, one line) = %v, want %v", tc.r, got, tc.line)
		}
		if got := Hidden(tc.r, true); got != tc.multi {
			t.Errorf("Hidden(%U, multi-line) = %v, want %v", tc.r, got, tc.multi)
		}
	}
}
