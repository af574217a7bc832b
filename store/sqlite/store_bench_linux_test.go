package sqlite

import (
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/store/storetest"
	"golang.org/x/sys/unix"
)

// BenchmarkExpireAfterIdle measures sweeping 100,000 requests due together
// (in sweeps of 250) after an idle spell long enough for the kernel to drop
// the database and its log from the page cache, as a machine that pages out
// idle file pages does (checkpoint.go). With the log kept at the size the
// backlog's creation left it, each commit overwrites log blocks no longer
// cached, and the kernel reads them from disk first; with the log emptied
// while idle (what the writer does), commits append to it instead.
func BenchmarkExpireAfterIdle(b *testing.B) {
	const backlog, batch = 100_000, 250
	for _, emptied := range []bool{false, true} {
		name := map[bool]string{false: "log kept", true: "log emptied"}[emptied]
		b.Run(name, func(b *testing.B) {
			var (
				held, commits []time.Duration
				holding       atomic.Bool
				swept         time.Duration
			)
			emptiedLog := make(chan bool, 64)
			for range b.N {
				clock := storetest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				s := benchStore(b, WithClock(clock), WithBatchObserver(func(t Batch) {
					if holding.Load() {
						held = append(held, t.Held)
						commits = append(commits, t.Commit)
					}
				}), func(c *config) {
					c.emptyLogAfter = time.Hour // never, unless emptied
					if emptied {
						c.emptyLogAfter = 50 * time.Millisecond
					}
					c.emptied = func(ok bool, _ time.Duration) {
						select {
						case emptiedLog <- ok:
						default:
						}
					}
				})
				fillDue(b, s, backlog, 1000)
				clock.Advance(2 * time.Second)
				if emptied {
					waitLogEmptied(b, s.path, emptiedLog)
				}
				dropFromPageCache(b, s.path, s.path+"-wal")
				holding.Store(true)
				swept += sweepBacklog(b, s, backlog, batch)
				holding.Store(false)
				s.Close()
			}
			slices.Sort(held)
			slices.Sort(commits)
			b.ReportMetric(float64(backlog*b.N)/swept.Seconds(), "expired/s")
			b.ReportMetric(float64(commits[len(commits)/2].Microseconds())/1000, "p50-commit-ms")
			b.ReportMetric(float64(held[len(held)/2].Microseconds())/1000, "p50-ms/sweep")
			b.ReportMetric(float64(held[len(held)-1].Microseconds())/1000, "max-ms/sweep")
		})
	}
}

// dropFromPageCache writes the files' dirty pages and asks the kernel to
// drop their cached pages, as it may for files idle a while.
func dropFromPageCache(b *testing.B, paths ...string) {
	b.Helper()
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		err = f.Sync()
		if err == nil {
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		f.Close()
		if err != nil {
			b.Fatalf("drop %s from the page cache: %v", p, err)
		}
	}
}

// waitLogEmptied waits for an attempt of the writer to empty the log that
// did, and left it empty (an attempt from before the last writes may be
// reported first).
func waitLogEmptied(b *testing.B, path string, attempts <-chan bool) {
	b.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ok := <-attempts:
			if fi, err := os.Stat(path + "-wal"); ok && err == nil && fi.Size() == 0 {
				return
			}
		case <-deadline:
			b.Fatal("the writer did not empty the log within 30 s of the last write")
		}
	}
}
