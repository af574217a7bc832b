package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, clock airlock.Clock) store.Store {
		return open(t, filepath.Join(t.TempDir(), "airlock.db"), sqlite.WithClock(clock))
	})
}

// TestReplicas runs the suite of two stores sharing one database on two
// stores opened on one file, as two airlock processes on one machine
// share it: their writes contend for SQLite's lock, and busy_timeout with
// BEGIN IMMEDIATE must absorb it. The two take turns on that lock, a
// waiter sleeping in SQLite's busy handler, so the largest races make 200
// requests rather than 1,000: at 1,000, T06 alone took 30 s to 110 s on
// a 2-core machine under -race.
func TestReplicas(t *testing.T) {
	t.Parallel()
	storetest.RunReplicas(t, storetest.Replicas{
		Open: func(t *testing.T) (store.Store, store.Store) {
			path := filepath.Join(t.TempDir(), "airlock.db")
			return open(t, path), open(t, path)
		},
		OpenN: func(t *testing.T, n int) []store.Store {
			path := filepath.Join(t.TempDir(), "airlock.db")
			out := make([]store.Store, n)
			for i := range out {
				out[i] = open(t, path)
			}
			return out
		},
		Requests: 200,
	})
}

// TestExtras: a SQLite store has a token stamp, which the conformance
// suite checks (Extras/TokenStamp), and neither a change feed nor a token
// check of its own: one process serves its file.
func TestExtras(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "airlock.db"))
	if x := s.Extras(); x.TokenStamp == nil || x.Events == nil || x.TokenCheck != nil || x.Feed != nil {
		t.Errorf("Extras = %+v, want the token stamp and the event watcher alone", x)
	}
}

// TestWatchEvents: every watcher hears of each commit that appended
// events, whichever write appended them (an instance's, a create's, a
// sweep's, which appends its events by a statement of its own), and of no
// other.
func TestWatchEvents(t *testing.T) {
	t.Parallel()
	clock := storetest.NewFakeClock(time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC))
	s := open(t, filepath.Join(t.TempDir(), "airlock.db"), sqlite.WithClock(clock))
	ctx := t.Context()
	var first, second int
	s.WatchEvents(func() { first++ }) // the writes below run one at a time
	s.WatchEvents(func() { second++ })
	heard := func(what string, want int) {
		t.Helper()
		if first != want || second != want {
			t.Fatalf("after %s: the watchers heard %d and %d commits with events, want %d", what, first, second, want)
		}
	}
	if _, err := s.AcquireSequencer(ctx, "seq_a", time.Minute); err != nil {
		t.Fatal(err)
	}
	heard("a lease, which appends no event", 0)
	in, err := s.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_a", Name: "x"}, "tok_a")
	if err != nil {
		t.Fatal(err)
	}
	heard("an instance", 1)
	if _, _, err := s.CreateRequest(ctx, store.NewRequestParams{
		Request: airlock.Request{InstanceID: in.ID, OwnerID: "tok_a", Kind: airlock.KindToolCall, Tool: "t",
			Arguments: json.RawMessage(`{}`), Timeout: "1m", IdempotencyKey: "k", Fingerprint: "fp_k"},
		Window: time.Minute, Actor: "tok_a",
	}); err != nil {
		t.Fatal(err)
	}
	heard("a create", 2)
	if rs, err := s.ExpireDue(ctx, 100); err != nil || len(rs) != 0 {
		t.Fatalf("nothing due: expired %d, %v", len(rs), err)
	}
	heard("a sweep that expired none", 2)
	clock.Advance(2 * time.Minute)
	if rs, err := s.ExpireDue(ctx, 100); err != nil || len(rs) != 1 {
		t.Fatalf("one due: expired %d, %v", len(rs), err)
	}
	heard("a sweep", 3)
}

// open opens a store that is closed when t ends.
func open(t testing.TB, path string, opts ...sqlite.Option) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestReopenKeepsData: a store closed and opened again on a path with
// characters a DSN could misread keeps what it held.
func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a b?c#d%.db") // characters a DSN could misread
	storetest.Reopen(t, func(t *testing.T) store.Store { return open(t, path) })
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "airlock.db")
	open(t, path).Close()

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err = sqlite.Open(t.Context(), path)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open on a newer schema = %v, want an error saying it is newer", err)
	}
}

func TestRefusesMemory(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", ":memory:"} {
		if s, err := sqlite.Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", path)
		}
	}
}

// BenchmarkCreateDecideGet measures one request's whole round: create,
// approve, read back.
func BenchmarkCreateDecideGet(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	ctx := b.Context()
	in, err := s.CreateInstance(ctx, airlock.Instance{OwnerID: "tok_a", Name: "bench"}, "tok_a")
	if err != nil {
		b.Fatal(err)
	}
	round := func() error {
		key := airlock.NewID("key_")
		r, _, err := s.CreateRequest(ctx, store.NewRequestParams{
			Request: airlock.Request{InstanceID: in.ID, OwnerID: "tok_a", Tool: "shell.exec",
				Arguments: json.RawMessage(`{"cmd":"ls -la","cwd":"/srv"}`), IdempotencyKey: key, Fingerprint: key},
			Window: time.Hour, Actor: "tok_a",
		})
		if err != nil {
			return err
		}
		if _, err := s.Decide(ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"}); err != nil {
			return err
		}
		_, err = s.GetRequest(ctx, r.ID)
		return err
	}
	// cpu-µs/op is the process's CPU a round, which the machine's other
	// work inflates less than ns/op, where a round's fsyncs dominate.
	b.Run("serial", func(b *testing.B) {
		cpu0 := processCPU()
		for b.Loop() {
			if err := round(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	})
	b.Run("parallel", func(b *testing.B) {
		cpu0 := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := round(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
