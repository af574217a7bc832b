// Package confusables computes the confusable skeleton of Unicode TS #39
// ("Confusable Detection"): two strings that look alike have the same
// skeleton, so a history search for "paypal" also finds "pаypal" with a
// Cyrillic "а".
//
// It is github.com/mtibben/confusables (BSD licence in LICENSE) with one
// change: its table of 6,300 characters is built on the first Skeleton
// rather than at start-up. As a package-level map it cost every airlock
// process, the hook's included, about 220 KB and a millisecond or more
// before main (docs/performance.md), though only the inbox's search uses it.
package confusables

import (
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// table maps each character of confusables.txt to its prototype.
var table = sync.OnceValue(buildTable)

// Skeleton returns the skeleton of s: NFD, each character mapped to its
// prototype, NFD again. The result is for comparing, never for display.
func Skeleton(s string) string {
	m := table()
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if p, ok := m[r]; ok {
			b.WriteString(p)
		} else {
			b.WriteRune(r)
		}
	}
	return norm.NFD.String(b.String())
}
