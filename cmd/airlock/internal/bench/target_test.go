package bench

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
)

// TestTimeSweepsKeepsExtras checks that the in-process server sees the
// store as `airlock serve` does, with every optional part it has: the
// SQLite store's token stamp (without it every call would look its token
// up, and the run would measure a server nobody runs), and the change
// feed and token check of a store shared by replicas. Nothing is found by
// type assertion, so the wrapper cannot hide a part: it passes Extras on.
func TestTimeSweepsKeepsExtras(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "bench.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, want := timeSweeps(st, &sweepLog{}).Extras(), st.Extras(); got != want || got.TokenStamp == nil {
		t.Errorf("the wrapped SQLite store's extras = %+v, want the store's own %+v, with its token stamp", got, want)
	}
	var rec logtest.Recorder
	if _, err := provider.New(provider.Config{Store: timeSweeps(st, &sweepLog{}), Logger: rec.Logger()}); err != nil {
		t.Fatal(err)
	}
	if got := rec.Containing("store extras"); len(got) != 1 || got[0] != "store extras token_stamp=true token_check=false change_feed=false event_watch=true" {
		t.Errorf("the provider over the wrapped SQLite store logged %q, want its token stamp and nothing else", got)
	}

	shared := sharedStore{Store: st}
	if got := timeSweeps(shared, &sweepLog{}).Extras(); got != shared.Extras() {
		t.Errorf("the wrapped shared store's extras = %+v, want its own change feed and token check", got)
	}
}

// sharedStore is a store that says it has every optional part, as a
// store shared by replicas does (PostgreSQL).
type sharedStore struct{ store.Store }

func (s sharedStore) Extras() store.Extras {
	return store.Extras{TokenStamp: s, TokenCheck: s, Feed: s}
}

func (sharedStore) TokenStamp() (uint64, error)                           { return 1, nil }
func (s sharedStore) Checking(*airlock.TokenCheck) store.Store            { return s }
func (sharedStore) CheckToken(context.Context, *airlock.TokenCheck) error { return nil }
func (sharedStore) Listen(context.Context, func(ids []string)) error      { return nil }

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
		r, err := testkit.Call(t.Context(), tgt.hc, "GET", tgt.urls[0]+path, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return r.Status, r.Raw
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
