package postgres

import (
	"context"
	"errors"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// tx is one write transaction on a connection of the pool: what it ran,
// plus the audit events it appends just before COMMIT, the requests it
// changed and the tokens it revoked or replaced (announced after COMMIT),
// and the requests it decided whose sessions get an instruction.
//
// It saves round trips, which on a busy database cost more than the
// statements themselves: BEGIN is not sent on its own but in one pipeline
// with the transaction's first statement, and the events are appended in
// one pipeline with COMMIT (commit). A write that decides with one
// compare-and-set thus takes two round trips, not four.
type tx struct {
	// ctx and s are the write's context and store, for the statements of
	// its sqlcore.Tx (coreTx).
	ctx   context.Context
	s     *Store
	conn  *pgxpool.Conn
	began bool // BEGIN has been sent
	// check is the store's token check (Store.check), sent with the
	// transaction's first statement while it is pending.
	check *airlock.TokenCheck

	events  []airlock.Event
	changed []string // request IDs, and token IDs (airlock.PrefixToken)
	decided []airlock.Event

	// last, when set, is the transaction's one statement, sent by commit
	// in the pipeline of its COMMIT: a write that needs nothing from the
	// database before it commits is then one round trip. Its statement
	// appends its own events; its row goes to scan (pgx.ErrNoRows when it
	// returned none).
	last *lastStatement
}

// lastStatement is a statement commit sends with COMMIT (tx.last).
type lastStatement struct {
	sql  string
	args pgx.QueryRewriter
	scan func(pgx.Row) error
}

// event queues an audit event, appended at the end of the transaction.
func (t *tx) event(e airlock.Event) {
	e.TraceID, e.SpanID = sqlcore.TraceOf(t.ctx, e)
	t.events = append(t.events, e)
}

// pipeline starts a batch of sql: BEGIN first, when not yet sent. It
// returns the batch's results positioned at sql's, or the error of BEGIN.
func (t *tx) pipeline(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	check := queueTokenCheck(t.check, b)
	b.Queue(sql, args...)
	t.began = true
	br := t.conn.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = readTokenCheck(br, check)
	}
	if err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

// Exec runs a statement in the transaction.
func (t *tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.began {
		return t.conn.Exec(ctx, sql, args...)
	}
	br, err := t.pipeline(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs a query of one row in the transaction.
func (t *tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.began {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	br, err := t.pipeline(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

// Query runs a query in the transaction.
func (t *tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.began {
		return t.conn.Query(ctx, sql, args...)
	}
	br, err := t.pipeline(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	return nextRows(br)
}

// nextRows reads br's next result as rows, which close br when closed.
func nextRows(br pgx.BatchResults) (pgx.Rows, error) {
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// errRow is a row whose query failed before it ran.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// batchRow is a row read from a batch, which it closes once scanned.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are rows read from a batch, which they close when closed.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.br.Close()
	}
}

// commit sends t's last statement (tx.last), appends t's events
// (appendSQL) and commits, in one pipeline (with BEGIN when nothing was
// sent before), and announces the requests t changed: in the same
// pipeline when nothing was sent for a moment (sendNow), else through the
// notifier. Errors of COMMIT, and errors after which the COMMIT may have
// reached the server, are commitErrors: the change may have committed.
//
// Tests hold a write just before its COMMIT with a statement of their own
// in the same pipeline (WithBeforeCommitForTest), so that they run the
// path production runs.
func (s *Store) commit(ctx context.Context, t *tx) error {
	if !t.began && len(t.events) == 0 && t.last == nil {
		return nil // nothing ran
	}
	// A write announces what it changed, or, with events and no request
	// changed, wakes the event streams.
	announces := len(t.events) > 0 || len(t.changed) > 0
	var hold string // a test's statement before COMMIT
	if s.hooks.beforeCommit != nil {
		hold = s.hooks.beforeCommit()
	}
	b := &pgx.Batch{}
	var check *airlock.TokenCheck
	if !t.began {
		b.Queue("BEGIN")
		check = queueTokenCheck(t.check, b)
	}
	if t.last != nil {
		b.Queue(t.last.sql, t.last.args)
	}
	if len(t.events) > 0 {
		b.Queue(appendSQL, s.appendArgs(t))
	}
	if hold != "" {
		b.Queue(hold)
	}
	b.Queue("COMMIT")
	notify := announces && s.sendNow()
	if notify {
		b.Queue(notifySQL, s.notifyArgs(t.changed))
	}
	began := t.began
	t.began = true
	br := t.conn.SendBatch(ctx, b)
	defer br.Close()
	// The server skips the rest of a pipeline after an error, so a
	// server's error means COMMIT did not run; so does an error before
	// anything was sent, and so does a refused token check (the server's
	// error, told as ours). Any other (a connection lost while reading the
	// replies) leaves the outcome unknown.
	failedBeforeCommit := func(err error) error {
		if _, ok := errors.AsType[*pgconn.PgError](err); ok || pgconn.SafeToRetry(err) {
			return err
		}
		if _, ok := errors.AsType[*airlock.Error](err); ok {
			return err
		}
		return &commitError{err}
	}
	if !began {
		if _, err := br.Exec(); err != nil {
			return failedBeforeCommit(err)
		}
		if err := readTokenCheck(br, check); err != nil {
			return failedBeforeCommit(err)
		}
	}
	if t.last != nil {
		if err := t.last.scan(br.QueryRow()); err != nil {
			return failedBeforeCommit(err)
		}
	}
	if len(t.events) > 0 {
		if _, err := br.Exec(); err != nil {
			return failedBeforeCommit(err)
		}
	}
	if hold != "" {
		if _, err := br.Exec(); err != nil {
			return failedBeforeCommit(err)
		}
	}
	if err := committed(br.Exec()); err != nil {
		return err
	}
	if announces {
		if !notify {
			s.announce(t.changed)
		} else if _, err := br.Exec(); err != nil {
			s.announce(t.changed) // let the notifier try
		}
	}
	return nil
}

// committed reads the reply to COMMIT.
func committed(tag pgconn.CommandTag, err error) error {
	switch {
	case err != nil:
		return &commitError{err}
	case tag.String() == "ROLLBACK":
		// The transaction had failed: PostgreSQL rolled it back.
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// end rolls back whatever t left open and returns its connection to the
// pool (which closes a connection left in an unknown state).
func (t *tx) end(ctx context.Context) {
	pc := t.conn.Conn().PgConn()
	if t.began && !pc.IsClosed() && !pc.IsBusy() && pc.TxStatus() != 'I' {
		t.conn.Exec(ctx, "ROLLBACK")
	}
	t.conn.Release()
}
