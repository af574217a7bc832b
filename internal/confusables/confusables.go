// Package confusables computes the confusable skeleton of Unicode TS #39
// ("Confusable Detection"): two strings that look alike have the same
// skeleton, so a history search for "paypal" also finds "pаypal" with a
// Cyrillic "а".
//
// Skeleton is github.com/mtibben/confusables's (BSD licence in LICENSE).
// Its table of 6,300 characters, tables.go, is generated from Unicode's
// confusables.txt 13.0.0, committed beside it (Unicode's licence in
// LICENSE-UNICODE), by internal/gen, whose test checks that the two
// agree byte for byte; it is the table that package generated from the
// same file. The table is built on the first Skeleton rather than at
// start-up: as a package-level map it cost every airlock process, the
// hook's included, about 220 KB and a millisecond or more before main
// (docs/dependencies.md), though only the inbox's search uses it.
package confusables

//go:generate go run ./internal/gen -data confusables.txt -o tables.go

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
