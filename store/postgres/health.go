package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// unavailable says why err means that the database cannot serve now, in
// words for the caller, or "" when it means something else: the database
// shutting down, restarting or failing over, a connection refused, reset
// or lost, a pool that found no connection in time, a database out of
// disk, memory or connections, a read-only database, a statement timeout.
// The same call may succeed once the database is back.
func unavailable(err error) string {
	_, committing := errors.AsType[*commitError](err)
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			// admin_shutdown, crash_shutdown, cannot_connect_now.
			return lost(committing, "Airlock's database is shutting down or restarting")
		case strings.HasPrefix(pe.Code, "08"):
			return lost(committing, "Airlock's connection to its database failed")
		case strings.HasPrefix(pe.Code, "53"):
			return "Airlock's database is out of resources (disk, memory or connections)"
		case pe.Code == "25006":
			return "Airlock's database is read-only (a standby, or set read-only)"
		case pe.Code == "57014":
			return "Airlock's database did not finish in time (statement timeout): it is overloaded or a lock is held too long"
		}
		return ""
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return "Airlock cannot connect to its database"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return lost(committing, "Airlock's database did not answer in time")
	}
	if _, ok := errors.AsType[net.Error](err); ok || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return lost(committing, "Airlock lost its connection to its database")
	}
	return ""
}

// lost words a failure that may have come after COMMIT was sent: the
// change may then have been recorded, and the caller should look before
// doing it again.
func lost(committing bool, why string) string {
	if committing {
		return why + " while committing: the change may have been recorded; read it back before repeating it"
	}
	return why
}

// noteWrite remembers, for Ping, whether the store's writes are failing
// because the database cannot serve them: set by a write that failed so,
// cleared by one that committed. A refused write (a conflict) says nothing.
func (s *Store) noteWrite(err error) {
	switch {
	case err == nil:
		if s.writesFailing.Load() { // a load leaves the cache line shared on every write's path
			s.writesFailing.Store(false)
		}
	case unavailable(err) != "":
		s.writesFailing.Store(true)
	}
}

// probeSQL is the write Ping tries once writes have failed (migration 0005).
const probeSQL = `INSERT INTO write_probe (id, at) VALUES (1, clock_timestamp())
ON CONFLICT (id) DO UPDATE SET at = EXCLUDED.at`

// Ping checks that the database can serve: that it answers a query, and,
// once a write has failed because the database could not serve it, that a
// write commits again. The probe is a real write through the store's one
// write path, so readiness turns ready again by itself when the database
// recovers, whoever asks first: a probe or a caller's write. It returns an
// unavailable error while the database cannot serve.
func (s *Store) Ping(ctx context.Context) error {
	if s.writesFailing.Load() {
		return translate(s.write(ctx, func(ctx context.Context, t *tx) error {
			_, err := t.Exec(ctx, probeSQL)
			return err
		}), "database", "write probe")
	}
	var one int
	return translate(s.queryRow(ctx, `SELECT 1`).Scan(&one), "database", "ping")
}
