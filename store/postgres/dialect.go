package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// dialect is the store as sqlcore.Core sees it: pipelined transactions
// retried on transient failures (write), reads behind the pending token
// check, times as timestamptz, and translate. A view made by Checking has
// a dialect of its own, so that its calls make its check.
type dialect struct{ s *Store }

// Write implements sqlcore.Dialect with write.
func (d dialect) Write(ctx context.Context, fn func(sqlcore.Tx) error) error {
	return d.s.write(ctx, func(_ context.Context, t *tx) error { return fn(coreTx{t}) })
}

// Query implements sqlcore.Dialect.
func (d dialect) Query(ctx context.Context, query string, args sqlcore.Args) (sqlcore.Rows, error) {
	return d.s.query(ctx, query, &bound{args: args, s: d.s})
}

// QueryRow implements sqlcore.Dialect.
func (d dialect) QueryRow(ctx context.Context, query string, args sqlcore.Args) sqlcore.Row {
	return d.s.queryRow(ctx, query, &bound{args: args, s: d.s})
}

// Translate implements sqlcore.Dialect.
func (dialect) Translate(err error, what, id string) error { return translate(err, what, id) }

// Settle implements sqlcore.Dialect with the gate (event.go): events up
// to last are settled when a settling said so already; else it waits for
// a settling begun now.
func (d dialect) Settle(ctx context.Context, last int64) (int64, bool, error) {
	if last <= d.s.gate.settled.Load() {
		return last, false, nil
	}
	upto, err := d.s.settledUpTo(ctx)
	return upto, true, err
}

// SettleLately implements sqlcore.Dialect with the gate: when a settling
// began within settleLately and its mark is fewer than settleLatelyEvents
// behind last, it returns that mark (or a later one's), without waiting;
// else it waits for a settling begun now.
func (d dialect) SettleLately(ctx context.Context, last int64) (int64, error) {
	g := d.s.gate
	if settled := g.settled.Load(); last <= settled {
		return last, nil
	}
	lately, span := settleLately, int64(settleLatelyEvents)
	if d.s.hooks.settleLately > 0 {
		lately, span = d.s.hooks.settleLately, d.s.hooks.settleEvents
	}
	if began := g.began.Load(); began != 0 && time.Since(time.Unix(0, began)) < lately &&
		last-g.settled.Load() < span {
		return g.settled.Load(), nil
	}
	return d.s.settledUpTo(ctx)
}

// Violates implements sqlcore.Dialect.
func (dialect) Violates(err error, constraint string) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == "23505" && pe.ConstraintName == constraint
}

// coreTx is a write transaction as sqlcore.Tx: its statements go through
// tx, in the pipelines tx builds, and its events are appended with COMMIT.
type coreTx struct{ t *tx }

// Exec implements sqlcore.Tx.
func (c coreTx) Exec(query string, args sqlcore.Args) (int64, error) {
	tag, err := c.t.Exec(c.t.ctx, query, &bound{args: args, s: c.t.s})
	return tag.RowsAffected(), err
}

// QueryRow implements sqlcore.Tx.
func (c coreTx) QueryRow(query string, args sqlcore.Args) sqlcore.Row {
	return c.t.QueryRow(c.t.ctx, query, &bound{args: args, s: c.t.s})
}

// Query implements sqlcore.Tx.
func (c coreTx) Query(query string, args sqlcore.Args) (sqlcore.Rows, error) {
	return c.t.Query(c.t.ctx, query, &bound{args: args, s: c.t.s})
}

// Lock implements sqlcore.Tx with an advisory lock of the schema's,
// held until the transaction ends.
func (c coreTx) Lock(what string) error {
	_, err := c.t.Exec(c.t.ctx, `SELECT pg_advisory_xact_lock(@class, @key)`,
		named{"class": advisoryClass, "key": lockKey(c.t.s.schema, what)})
	return err
}

// Event implements sqlcore.Tx: the event is queued, and appended in the
// pipeline of the transaction's COMMIT (appendSQL).
func (c coreTx) Event(e airlock.Event) error {
	c.t.event(e)
	return nil
}

// StateEvents implements sqlcore.Tx: the events are queued (requestEvent).
func (c coreTx) StateEvents(actor string, at time.Time, rs []airlock.Request) error {
	for _, r := range rs {
		c.t.requestEvent(airlock.StateEvent(r.State), actor, at, r)
	}
	return nil
}

// RequestEvent implements sqlcore.Tx: the event is queued (stateEvent).
func (c coreTx) RequestEvent(e airlock.Event, r airlock.Request) error {
	c.t.stateEvent(e, r)
	return nil
}

// Instructions implements sqlcore.Tx: the instructions are queued, as
// stateEvent queues them.
func (c coreTx) Instructions(at time.Time, rs []airlock.Request) error {
	for _, r := range rs {
		c.t.changed = append(c.t.changed, r.ID)
		switch r.State {
		case airlock.StateApproved, airlock.StateDenied, airlock.StateExpired:
			if r.SessionID != "" {
				c.t.decided = append(c.t.decided, airlock.Event{RequestID: r.ID, At: at})
			}
		}
	}
	return nil
}

// Last implements sqlcore.Tx: the statement is sent in the pipeline of
// COMMIT (tx.last).
func (c coreTx) Last(query string, args sqlcore.Args, scan func(sqlcore.Row) error) error {
	if c.t.last != nil {
		return fmt.Errorf("a transaction runs one statement last, not two (%.60q)", query)
	}
	c.t.last = &lastStatement{sql: query, args: &bound{args: args, s: c.t.s}, scan: func(row pgx.Row) error { return scan(row) }}
	return nil
}

// Changed implements sqlcore.Tx: the request or token is announced once
// the transaction has committed, so every replica's waiters re-check it.
func (c coreTx) Changed(id string) { c.t.changed = append(c.t.changed, id) }

// Time implements sqlcore.Values.
func (dialect) Time(p *time.Time) any { return (*utcTime)(p) }

// NullTime implements sqlcore.Values.
func (dialect) NullTime(p *sqlcore.NullTime) any { return (*nullUTCTime)(p) }

// Duration implements sqlcore.Values: pgx scans an interval into a
// time.Duration.
func (dialect) Duration(p *time.Duration) any { return p }

// Strings implements sqlcore.Values: pgx scans a text[] into a []string.
func (dialect) Strings(p *[]string) any { return p }

// utcTime scans a timestamptz, in UTC.
type utcTime time.Time

func (t *utcTime) ScanTimestamptz(v pgtype.Timestamptz) error {
	if !v.Valid {
		return fmt.Errorf("cannot scan NULL into a time")
	}
	*t = utcTime(v.Time.UTC())
	return nil
}

// nullUTCTime scans a nullable timestamptz, in UTC.
type nullUTCTime sqlcore.NullTime

func (t *nullUTCTime) ScanTimestamptz(v pgtype.Timestamptz) error {
	*t = nullUTCTime{Time: v.Time.UTC(), Valid: v.Valid}
	if !v.Valid {
		t.Time = time.Time{}
	}
	return nil
}
