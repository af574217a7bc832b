package inbox

import (
	"github.com/airlockhq/airlock/approvaltoken"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func tokenDigest(b []byte) string {
	d, err := approvaltoken.ArgsDigest(b)
	if err != nil {
		panic(err)
	}
	return d
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
