package sqlite

import (
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
