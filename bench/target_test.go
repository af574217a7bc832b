package bench

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// TestInProcessServerIsServes checks that the in-process server is the one
// `airlock serve` assembles, not a copy that drifted: the reviewer inbox
// beside the API, and the gauges and process metrics of serve's /metrics.
func TestInProcessServerIsServes(t *testing.T) {
	t.Parallel()
	cfg := short(Lifecycle).withDefaults()
	tgt, err := openTarget(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.close(context.WithoutCancel(t.Context()))
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := tgt.hc.Get(tgt.urls[0] + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if status, body := get("/signin"); status != http.StatusOK || !strings.Contains(body, "<form") {
		t.Errorf("GET /signin: %d %.200s; want the inbox's sign-in page", status, body)
	}
	_, metrics := get("/metrics")
	for _, name := range []string{"airlock_long_polls_waiting", "airlock_heavy_reads_in_progress", "airlock_requests_pending", "go_goroutines"} {
		if !strings.Contains(metrics, "\n"+name+" ") {
			t.Errorf("/metrics has no %s", name)
		}
	}
}
