package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// unavailable says why err means that the store cannot serve now, in words
// for the caller, or "" when it means something else. These are failures
// of the file or the disk under it, not of the call: the same call may
// succeed once the operator has freed space or fixed the file.
func unavailable(err error) string {
	if errors.Is(err, errClosed) {
		return "Airlock's store is closed: the server is shutting down"
	}
	se, ok := errors.AsType[*msqlite.Error](err)
	if !ok {
		return ""
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return "Airlock's database disk is full: nothing can be recorded until space is freed"
	case sqlite3.SQLITE_IOERR:
		return "Airlock's database cannot be read or written (an I/O error, such as a full disk)"
	case sqlite3.SQLITE_READONLY:
		return "Airlock's database file is read-only"
	case sqlite3.SQLITE_CANTOPEN:
		return "Airlock's database file cannot be opened"
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		// Within one process the single write connection never waits;
		// only another process holding the file past busy_timeout gets
		// here.
		return "Airlock's database is locked by another process past the busy timeout"
	}
	return ""
}

// noteWrites remembers, for Ping, whether the store's writes are failing
// because it cannot write: set when a write of the batch failed so, cleared
// when the writes of a batch committed without such a failure and changed
// a row. A batch whose operations were all refused (a conflict), or that
// changed nothing (a sweep that found nothing due), wrote nothing and
// says nothing.
func (s *Store) noteWrites(results []result, changed bool) {
	failed, wrote := false, false
	for _, r := range results {
		switch {
		case !r.failed():
			wrote = true
		case unavailable(r.err) != "":
			failed = true
		}
	}
	switch {
	case failed:
		s.writesFailing.Store(true)
	case wrote && changed && s.writesFailing.Load():
		s.writesFailing.Store(false)
	}
}

// probePad is the size of the probe's row: room for a modest request.
const probePad = 16 << 10

// Ping checks that the store can serve: that a read answers, and, once a
// write has failed because the store could not write (a full disk, say),
// that a write commits again. The probe is a real write through the one
// writer (inserting a row of probePad bytes and deleting it, committed), so
// readiness turns ready again by itself when the store recovers, whoever
// asks first: a probe or a caller's write. It returns an unavailable error
// while the store cannot serve.
func (s *Store) Ping(ctx context.Context) error {
	if !s.writesFailing.Load() {
		var one int
		return translate(s.read.QueryRowContext(ctx, `SELECT 1`).Scan(&one), "database", "ping")
	}
	err := s.inTx(ctx, func(tx *txn, _ time.Time) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO write_probe (id, pad) VALUES (1, zeroblob(?))`, probePad); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM write_probe`)
		return err
	})
	if err != nil {
		return translate(fmt.Errorf("write probe: %w", err), "database", "ping")
	}
	return nil
}
