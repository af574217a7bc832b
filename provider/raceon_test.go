//go:build race

package provider

// raceEnabled reports whether the race detector is on. Under it, the
// pure-Go SQLite runs 10–20 times slower (every memory access of its
// transpiled C is instrumented and pointer-checked).
const raceEnabled = true
