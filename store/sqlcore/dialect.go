package sqlcore

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Dialect is what a driver gives Core: its engine, its values and its
// error translation. Its statements come beside it, in Statements.
type Dialect interface {
	// Write runs fn in one write transaction and returns once that
	// transaction has committed (nil) or fn's writes were undone (fn's
	// error, or the engine's). fn may run more than once (PostgreSQL
	// retries a transaction that failed for a transient reason), so it
	// sets its results afresh on every run and decides only with what the
	// database answers, never with what an earlier run found.
	Write(ctx context.Context, fn func(Tx) error) error
	// Query runs a read outside any write: on SQLite's pool of read-only
	// connections; on PostgreSQL's pool, behind a pending token check.
	Query(ctx context.Context, query string, args Args) (Rows, error)
	// QueryRow is Query for at most one row; a Row whose Scan returns
	// sql.ErrNoRows (or an error wrapping it) when there is none.
	QueryRow(ctx context.Context, query string, args Args) Row
	// Translate is the driver's one translation of its errors into the
	// store's (store.Store): sql.ErrNoRows becomes not_found naming what
	// and id, an *airlock.Error passes through, a store that cannot serve
	// now becomes unavailable, anything else an internal error.
	Translate(err error, what, id string) error
	// Violates reports whether err is a violation of the unique
	// constraint named constraint: a race between writers that a
	// statement's own conditions could not see (PostgreSQL). SQLite's one
	// writer runs every write after the last one committed, so its reads
	// see what it would violate, and it reports false.
	Violates(err error, constraint string) bool
	// Settle is asked, once a read of the audit log found events up to
	// last, whether every event up to last is settled: committed and
	// visible, or never to be. When it is not, Settle waits until every
	// ID up to some upto is, and returns upto with again set: the caller
	// reads again, up to upto. SQLite's one writer commits IDs in order,
	// so every visible one is settled; PostgreSQL's concurrent writers
	// draw IDs before they commit.
	Settle(ctx context.Context, last int64) (upto int64, again bool, err error)
	// SettleLately is Settle for a caller that reads the events again
	// soon whatever it is told (the audit log's sequencer): it returns an
	// ID up to which every event is settled, at most last, and waits for
	// a settling only when none began lately. A settling pauses
	// PostgreSQL's writers; the caller reads the few events above the
	// older mark again instead.
	SettleLately(ctx context.Context, last int64) (upto int64, err error)
	Values
}

// Values are the scan destinations of the columns the two engines keep in
// different types. Each returns a destination that fills p once the row
// is scanned: a time (SQLite: int64 microseconds; PostgreSQL:
// timestamptz) in UTC, a nullable one (NullTime), a duration
// (microseconds; interval) and a list of strings (JSON text; text[]).
// Arguments of these types need no help: a dialect binds time.Time,
// *time.Time, time.Duration and []string values as its engine keeps them.
type Values interface {
	Time(p *time.Time) any
	NullTime(p *NullTime) any
	Duration(p *time.Duration) any
	Strings(p *[]string) any
}

// NullTime is a nullable time column, as Values.NullTime scans it.
type NullTime struct {
	Time  time.Time
	Valid bool
}

// Ptr is t as an optional field: nil when NULL.
func (t NullTime) Ptr() *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// Row is one row of a result: *sql.Row and pgx.Row are.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result read in order. Whoever runs a query reads its rows to
// the end and closes them before the next statement of the transaction.
type Rows interface {
	Row
	Next() bool
	Err() error
	Close()
}

// Tx is a write transaction, as Dialect.Write hands it to fn. Its
// statements run in the order they are called; some (PostgreSQL's
// BEGIN, its events) are sent in one round trip with others.
type Tx interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(query string, args Args) (int64, error)
	// QueryRow runs a statement that yields at most one row.
	QueryRow(query string, args Args) Row
	// Query runs a statement that yields rows.
	Query(query string, args Args) (Rows, error)
	// Lock makes the writers that call it with the same what take
	// turns, until their transactions end: PostgreSQL's writers, which
	// run at once, take an advisory lock (in a statement of its own, so
	// that the statements after it read what the one before committed);
	// SQLite's writes take turns anyway.
	Lock(what string) error
	// Event appends e to the audit log in this transaction, so that it
	// exists exactly when the change commits. e.At is the instant of the
	// statement that made the change, as that statement returned it; zero
	// only where a statement may yield none for an engine whose writes
	// each have one now (SQLite), which dates the event by it.
	Event(e airlock.Event) error
	// StateEvents appends, in order, the event of each of rs's new state
	// (airlock.StateEvent), by actor at at, and stores the instruction of
	// each that became approved, denied or expired and is linked to a
	// session: every path to those states appends their events through
	// here or RequestEvent, so none forgets the instruction, and an
	// instruction exists exactly when its decision does. The requests are
	// announced as changed once the transaction commits.
	StateEvents(actor string, at time.Time, rs []airlock.Request) error
	// RequestEvent appends e, the event of a change to request r (as the
	// transaction holds it), as StateEvents does.
	RequestEvent(e airlock.Event, r airlock.Request) error
	// Instructions stores the instructions of those of rs that became
	// approved, denied or expired at at and are linked to a session, and
	// announces rs, for requests whose events a statement appended
	// itself (RequestSQL.ExpireDueEvents).
	Instructions(at time.Time, rs []airlock.Request) error
	// Last runs query, a statement that appends its own events, as the
	// transaction's last, and passes its row to scan: PostgreSQL sends it
	// in the pipeline of COMMIT, so that a write of one statement is one
	// round trip (its error then comes with the commit's); SQLite runs it
	// at once. At most one statement of a transaction is run last.
	Last(query string, args Args, scan func(Row) error) error
	// Changed tells the other processes on the store, once the
	// transaction has committed, that request or token id changed, so
	// that waiters on the request wake and none goes on accepting what it
	// remembered of the token (SQLite's token stamp, PostgreSQL's change
	// feed). Events of requests announce their requests themselves.
	Changed(id string)
}

// Now is the argument a dialect adds to every statement that names @now
// and is not given it: the instant the statement judges and stamps time
// by. In a SQLite write it is the write's now, read from the injected
// clock once the write lock is held, and in a SQLite read the clock's
// now; in PostgreSQL it is NULL, so that the statement reads the
// database's clock_timestamp() once (its tick), unless a test clock is
// set. A statement that changes a row returns its instant, so that the
// change and its audit event are dated alike.
const Now = "now"

// Arg is one named argument of a statement: @Name in its text.
type Arg struct {
	Name  string
	Value any
}

// Args are a statement's named arguments, in any order. Each name a
// statement uses must be given (but Now), and each given must be used.
type Args []Arg

// Lookup returns the value of the argument named name.
func (a Args) Lookup(name string) (any, bool) {
	for i := range a {
		if a[i].Name == name {
			return a[i].Value, true
		}
	}
	return nil, false
}
