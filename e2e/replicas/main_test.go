// Package replicas runs several real `airlock serve` processes against one
// PostgreSQL database and checks that together they behave exactly like one
// provider (T02, T06 and T08 of docs/reliability.md): races between
// replicas end every request exactly once, a long-poll on one replica hears
// a decision made on another, and killing a replica loses nothing. Its
// benchmarks measure cross-replica wake-up latency and lifecycle throughput
// against direct SQL (docs/performance.md).
//
// The tests build the binary once (with -race when they run with it) and
// use the PostgreSQL at AIRLOCK_TEST_POSTGRES (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable), each test in a
// fresh schema that it drops at the end. Without a database they are
// skipped, naming the variable — except under CI=true, where they fail.
package replicas

import (
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
