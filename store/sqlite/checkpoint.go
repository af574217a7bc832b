package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
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
//
// Once no write has come for emptyLogAfter, the writer itself also empties
// the log file (a TRUNCATE checkpoint, emptyLog). SQLite reuses the log
// from its start, and a log frame (a 24-byte header and a page) straddles
// the file system's 4 KiB blocks, so overwriting a block the kernel no
// longer caches reads it from disk first, in the middle of a commit. A
// machine may drop an idle log from its page cache (this one pages out
// file pages idle for about a minute), and the first burst after the idle
// spell then paid a disk read for most frames it wrote: in the store
// benchmark (BenchmarkExpireAfterIdle), 100,000 requests due at once
// expired at 34,000/s instead of 44,000/s, their commits 3.8–4.2 ms instead
// of 1.4–1.8 ms at p50. A log emptied while idle is appended to instead,
// which reads nothing. It is the writer that empties it, not the
// checkpointer: a connection that finds the log reset by another one drops
// its page cache, and the writer's (64 MiB) is what keeps sweeps short.
const (
	checkpointEvery         = 50 * time.Millisecond
	backstopCheckpointPages = 16384 // 64 MiB of log at 4 KiB pages
	emptyLogAfter           = time.Second
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

// emptyLog checkpoints the whole log and empties its file, on the write
// connection, between write transactions; it reports whether it did. It
// never waits: with no busy timeout, a reader still on an older snapshot
// (or a checkpoint under way) makes it a PASSIVE checkpoint instead, so it
// cannot keep the writer, and the writes queued behind it, waiting on a
// reader. Writes that come while it runs wait for it: for the copy of what
// is left of the log (little, since checkpoints follow commits) and the
// truncation.
func (s *Store) emptyLog() (ok bool) {
	if s.emptied != nil {
		start := time.Now()
		defer func() { s.emptied(ok, time.Since(start)) }()
	}
	ctx := context.Background()
	conn, err := s.write.DB.Conn(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil {
		return false
	}
	var busy, logPages, copied int
	err = conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &copied)
	ok = err == nil && busy == 0 && logPages == 0
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, s.busyTimeout.Milliseconds())); err != nil {
		// Without its timeout the connection would fail where it should
		// wait for another process: drop it, and the pool opens a new one
		// from the DSN.
		conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return ok
}

// close stops the goroutine and closes its connection.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}
