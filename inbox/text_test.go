package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

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
			if got := plainText(visible(tc.in)); got != tc.single {
				t.Errorf("visible(%q) = %q, want %q", tc.in, got, tc.single)
			}
			if tc.multi != "" {
				if got := plainText(visibleText(tc.in)); got != tc.multi {
					t.Errorf("visibleText(%q) = %q, want %q", tc.in, got, tc.multi)
				}
			}
		})
	}
	segs := visible("a\u202Eb")
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
		if got := lookAlike(in) != ""; got != flagged {
			t.Errorf("lookAlike(%q) flagged = %v, want %v (%q)", in, got, flagged, lookAlike(in))
		}
	}
}

// TestShortDuration writes validity choices as a person would.
func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[string]string{"5m0s": "5m", "1h0m0s": "1h", "1m30s": "1m30s", "30s": "30s"} {
		dur, _ := parseDur(d)
		if got := shortDuration(dur); got != want {
			t.Errorf("shortDuration(%s) = %s, want %s", d, got, want)
		}
	}
}

func parseDur(s string) (d time.Duration, err error) { return time.ParseDuration(s) }

// TestContainsMappedPieces checks that a search over a long text, mapped a
// piece at a time, finds exactly what a search over the whole text mapped
// at once finds: for lowering and for confusable skeletons, over texts
// mixing ASCII, combining marks, Cyrillic look-alikes and wide letters,
// with needles that span two pieces and needles made up.
func TestContainsMappedPieces(t *testing.T) {
	alphabet := []rune("abcmrnlIO01 |{}\":,ÀÉé\u0301\u0323\u0430\u0440\u0435ＡＢｍ\u202e€ß\u1e9e")
	rng := rand.New(rand.NewPCG(1, 2))
	randomText := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	// Pieces of exactly searchPiece bytes, each starting with an ASCII
	// letter, so that the pieces end where the test knows.
	var b strings.Builder
	for range 4 {
		piece := "m" + randomText(searchPiece-8)
		b.WriteString(piece + strings.Repeat("a", searchPiece-len(piece)))
	}
	text := b.String()
	ascii := func(i int) bool { return text[i] < utf8.RuneSelf }
	for name, mapping := range map[string]func(string) string{"lower": strings.ToLower, "skeleton": lowerSkeleton} {
		whole := mapping(text)
		spanning := 0
		for k := 1; k < 4; k++ {
			end := k * searchPiece
			for i := range 12 {
				// From an ASCII byte before the end of a piece to one after it.
				from, to := end-1-i, end+1+rng.IntN(12)
				for from > 0 && !ascii(from) {
					from--
				}
				for to < len(text) && !ascii(to) {
					to++
				}
				needle := mapping(text[from:to])
				if !containsMapped(text, needle, mapping) {
					t.Errorf("%s: %q, across the end of piece %d, not found", name, needle, k)
				}
				spanning++
			}
		}
		for range 40 {
			needle := mapping(randomText(1 + rng.IntN(6)))
			if got, want := containsMapped(text, needle, mapping), strings.Contains(whole, needle); got != want {
				t.Errorf("%s: containsMapped(…, %q) = %v, the whole text mapped says %v", name, needle, got, want)
			}
		}
		if spanning == 0 {
			t.Fatal("no needle spanned two pieces")
		}
	}
}
