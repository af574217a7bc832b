package confusables

import "testing"

// The vectors are github.com/mtibben/confusables's own tests.
func TestSkeleton(t *testing.T) {
	if got := Skeleton("ρ⍺у𝓅𝒂ן"); got != "paypal" {
		t.Errorf("Skeleton(ρ⍺у𝓅𝒂ן) = %q, want paypal", got)
	}
}

func TestConfusable(t *testing.T) {
	for _, v := range [][2]string{
		{"ρ⍺у𝓅𝒂ן", "𝔭𝒶ỿ𝕡𝕒ℓ"},
		{"𝖶", "W"},
		{"so̷s", "søs"},
		{"paypal", "paypal"},
		{"scope", "scope"},
		{"ø", "o̷"},
		{"O", "0"},
		{"ν", "v"},
		{"Ι", "l"},
		{"warning", "waming"},
		{"pаypal", "paypal"}, // a Cyrillic а
	} {
		if Skeleton(v[0]) != Skeleton(v[1]) {
			t.Errorf("Skeleton(%+q) = %+q, Skeleton(%+q) = %+q; want them equal", v[0], Skeleton(v[0]), v[1], Skeleton(v[1]))
		}
	}
	if Skeleton("Paypal") == Skeleton("paypal") {
		t.Error("Paypal and paypal have the same skeleton; want them different (case is not folded)")
	}
}

// TestTable checks the table is confusables.txt 13.0.0's whole: a
// truncated copy would miss look-alikes silently.
func TestTable(t *testing.T) {
	if n := len(buildTable()); n != 6311 {
		t.Errorf("the table has %d characters; confusables.txt 13.0.0 has 6311", n)
	}
}
