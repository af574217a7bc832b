package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// Checkpoints run beside the writer, not in it. A WAL checkpoint copies
// the log's pages into the database file and syncs it; run by SQLite
// itself inside a commit (every 1,000 pages by default), it held the one
// writer 12–31 ms, about one expiry sweep in four. A goroutine with a
// connection of its own checkpoints instead, PASSIVE (it never waits for
// the writer or readers, nor makes them wait), after commits and at most
// every checkpointEvery. The writer's own automatic checkpoint stays as a
// backstop, far out (backstopCheckpointPages), should this one fall behind.
const (
	checkpointEvery         = 50 * time.Millisecond
	backstopCheckpointPages = 16384 // 64 MiB of log at 4 KiB pages
)

// checkpointer is the goroutine's state.
type checkpointer struct {
	db *sql.DB
	// committed is signalled (without blocking) after each commit.
	committed chan struct{}
	stop      chan struct{}
	done      chan struct{}
	// checkpointed, set by tests only, runs after each checkpoint with the
	// log's pages and how many of them are now in the database file.
	checkpointed func(logPages, copied int)
}

func newCheckpointer(db *sql.DB) *checkpointer {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return &checkpointer{db: db, committed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// notify tells the checkpointer that a transaction committed.
func (c *checkpointer) notify() {
	select {
	case c.committed <- struct{}{}:
	default:
	}
}

// run checkpoints after commits, at most every checkpointEvery, until stop
// is closed. A failed checkpoint is left to the next one (or to the
// writer's backstop): nothing is lost, the log only grows meanwhile.
func (c *checkpointer) run() {
	defer close(c.done)
	pace := time.NewTimer(0)
	defer pace.Stop()
	for {
		select {
		case <-c.committed:
		case <-c.stop:
			return
		}
		c.checkpoint()
		pace.Reset(checkpointEvery)
		select {
		case <-pace.C:
		case <-c.stop:
			return
		}
	}
}

// checkpoint copies what it can of the log into the database file.
func (c *checkpointer) checkpoint() {
	var busy, logPages, copied int
	err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logPages, &copied)
	if err == nil && c.checkpointed != nil {
		c.checkpointed(logPages, copied)
	}
}

// close stops the goroutine and closes its connection.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}
