package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestCheckpointBesideWriter checks that the log is checkpointed by the
// checkpointer's own connection after commits: every page the commits
// logged reaches the database file without the writer's help (its own
// automatic checkpoint would only start at 16,384 pages).
func TestCheckpointBesideWriter(t *testing.T) {
	t.Parallel()
	type result struct{ logPages, copied int }
	results := make(chan result, 64)
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"), func(c *config) {
		c.checkpointed = func(logPages, copied int) {
			select {
			case results <- result{logPages, copied}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 50 {
		if _, err := s.CreateInstance(t.Context(), airlock.Instance{OwnerID: "tok_a", Name: "ckpt"}, "tok_a"); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	// The last write's checkpoint comes within checkpointEvery of it;
	// wait for one that found the whole log copied, which no reader can
	// stop here (there are none).
	deadline := time.After(10 * time.Second)
	for {
		select {
		case r := <-results:
			if r.logPages > 0 && r.copied == r.logPages {
				return
			}
		case <-deadline:
			t.Fatal("no checkpoint copied the whole log within 10 s of 50 commits")
		}
	}
}

// TestIdleEmptiesLog checks that once the writer is idle the log file is
// emptied (so the next burst appends to it instead of overwriting blocks
// the kernel may no longer cache), that nothing written is lost, and that
// a reader still on an older snapshot puts it off, without being waited
// for, until the reader is done.
func TestIdleEmptiesLog(t *testing.T) {
	t.Parallel()
	type attempt struct {
		emptied bool
		took    time.Duration
	}
	attempts := make(chan attempt, 256)
	path := filepath.Join(t.TempDir(), "airlock.db")
	s, err := Open(t.Context(), path, func(c *config) {
		c.emptyLogAfter = 20 * time.Millisecond
		c.emptied = func(emptied bool, took time.Duration) {
			select {
			case attempts <- attempt{emptied, took}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logSize := func() int64 {
		t.Helper()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// waitEmptied waits for an attempt that emptied the log and a log
	// still empty after it (an earlier attempt's report may come first).
	waitEmptied := func(after string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case a := <-attempts:
				if a.emptied && logSize() == 0 {
					return
				}
			case <-deadline:
				t.Fatalf("the log is %d bytes 10 s after %s, want it emptied", logSize(), after)
			}
		}
	}
	write := func(n int) []string {
		t.Helper()
		var ids []string
		for i := range n {
			in, err := s.CreateInstance(t.Context(), airlock.Instance{OwnerID: "tok_a", Name: "idle"}, "tok_a")
			if err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			ids = append(ids, in.ID)
		}
		return ids
	}

	ids := write(50)
	waitEmptied("50 writes")

	// A reader on the snapshot before the next writes keeps them in the log.
	tx, err := s.read.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var before int
	if err := tx.QueryRowContext(t.Context(), `SELECT count(*) FROM instances`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, write(10)...)
	for range 3 { // the first may be from before the writes
		select {
		case a := <-attempts:
			// It gives up at once: waiting for the reader (the busy
			// timeout, 10 s) would hold every write up meanwhile.
			if a.took > time.Second {
				t.Fatalf("an attempt to empty the log under a reader took %v: it waited for the reader", a.took)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no attempt to empty the log within 10 s of the writes")
		}
	}
	if logSize() == 0 {
		t.Fatal("the log was emptied under a reader that needs it")
	}
	ids = append(ids, write(1)...)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	waitEmptied("the reader left")
	for _, id := range ids {
		if _, err := s.GetInstance(t.Context(), id); err != nil {
			t.Fatalf("instance %s after the log was emptied: %v", id, err)
		}
	}
}
