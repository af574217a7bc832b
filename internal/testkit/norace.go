//go:build !race

package testkit

// Race reports whether the tests run with the race detector.
const Race = false
