// Package testkit is what Airlock's tests share, so that each package's
// tests say what they check rather than how to get there: the real binary
// built once per test binary, a PostgreSQL schema of the test's own,
// processes started, waited for and killed, polling with a deadline, and
// the rule that a missing service fails under CI instead of skipping.
//
// It imports no package of Airlock's, so every package's tests, internal
// or external, may use it.
package testkit

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// InCI reports whether the tests run in CI (CI=true), where every test
// runs its full size and a missing service is a failure.
func InCI() bool { return os.Getenv("CI") == "true" }

// Short reports whether a heavy test may shrink: only with -short, and
// never in CI, where every test runs its full size.
func Short() bool { return testing.Short() && !InCI() }

// Long marks t as one of the long end-to-end scenarios, which -short
// skips outside CI so that `-short` is a quick run of everything else. CI,
// and the README's test command without -short, run it.
func Long(t testing.TB) {
	t.Helper()
	if Short() {
		t.Skip("a long end-to-end scenario, skipped by -short; the full run (go run ./internal/testkit/gotest -race ./...) runs it")
	}
}

// Unavailable stops t because something it needs is missing (a database,
// node, a browser): it skips with msg, or under CI, where every test is
// mandatory, fails with it. msg should say what to install or set. Every
// test that skips for a missing part skips here, so that the test command
// lists them all at the end of a run (MissingTag).
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI=true: this test is mandatory under CI)", msg)
	}
	t.Skip(MissingTag + msg)
}

// MissingTag begins the message of a test Unavailable skips. `go test`
// shows no skip of a package that passes, so the README's test command
// (internal/testkit/gotest) finds the tag in `go test -json` and names
// each such test, and why, on one line at the end of the run.
const MissingTag = "missing: "

// Main runs a package's tests, then removes the binaries Airlock built and,
// when every test passed, fails on leaked goroutines. A package's TestMain
// is `func TestMain(m *testing.M) { testkit.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	removeBuilds()
	if code == 0 {
		// Checked here rather than with goleak.VerifyTestMain so that the
		// built binaries are removed either way.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Eventually polls cond every millisecond until it holds, and fails t when
// it still does not after within. It is for what nothing can signal (a
// waiter count, another process, the database's clock); whatever can be
// signalled should be waited on instead.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Go runs fn on a goroutine of its own until t ends: then fn's context is
// cancelled and the cleanup waits for fn to return, so that nothing it
// does outlives the test. It is for loops such as a provider's Run, whose
// error once its context ends says only that it ended.
func Go(t testing.TB, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}
