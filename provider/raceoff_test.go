//go:build !race

package provider

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
