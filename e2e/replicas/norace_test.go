//go:build !race

package replicas

// raceEnabled says the tests run with -race, so the binary they build does too.
const raceEnabled = false
