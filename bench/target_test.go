package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/sqlite"
)

// TestTimeSweepsKeepsTokenStamp checks that the in-process server sees the
// SQLite store as `airlock serve` does, token stamp included (without it
// every call would look its token up, and the run would measure a server
// nobody runs).
func TestTimeSweepsKeepsTokenStamp(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "bench.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wrapped := timeSweeps(st, &sweepLog{})
	if _, ok := wrapped.(airlock.TokenStamper); !ok {
		t.Error("the wrapped SQLite store hides its token stamp")
	}
	if _, ok := wrapped.(airlock.ChangeFeed); ok {
		t.Error("the wrapped SQLite store claims a change feed it does not have")
	}
}

// TestNamedDBLeavesNothing runs the lifecycle on a --db path of its own and
// checks that the run removes every file the store made beside it.
func TestNamedDBLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := short(Lifecycle)
	cfg.DB = filepath.Join(dir, "run.db")
	run(t, cfg)
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}

// TestTimeSweepsKeepsTokenCheck is TestTimeSweepsKeepsTokenStamp for a
// store shared by replicas: the wrapper keeps its change feed and its
// token check (without the check, every call would look its token up).
func TestTimeSweepsKeepsTokenCheck(t *testing.T) {
	shared := struct {
		fullStore
		airlock.ChangeFeed
		tokenChecker
	}{}
	wrapped := timeSweeps(shared, &sweepLog{})
	if _, ok := wrapped.(airlock.ChangeFeed); !ok {
		t.Error("the wrapped shared store hides its change feed")
	}
	if _, ok := wrapped.(airlock.TokenChecker); !ok {
		t.Error("the wrapped shared store hides its token check")
	}
}
