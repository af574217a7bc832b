package postgres

import (
	"context"
	"errors"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The store is its own store.TokenChecker (Extras). The view Checking
// returns holds the check, and every way the store sends a statement
// (queryRow, query, tx.pipeline, commit) queues checkTokenSQL in the
// pipeline of its first one, ahead of it, while the check is pending; the
// server skips the rest of a pipeline after an error. So a call by a token
// revoked on any replica fails before its first statement runs, at no
// round trip of its own.

// Checking implements store.TokenChecker: a view of s whose calls send
// c ahead of their first statement while it is pending.
func (s *Store) Checking(c *airlock.TokenCheck) store.Store {
	v := &Store{shared: s.shared, check: c}
	v.Core = sqlcore.WithDialect(s.Core, dialect{v})
	return v
}

// checkTokenSQL raises SQLSTATE tokenNotLive unless the token is live and
// as the caller knows it (migration 0004).
const (
	checkTokenSQL = `SELECT airlock_check_token(@hash, @id, @role, @principal, @scopes)`
	tokenNotLive  = "28000"
)

// queueTokenCheck queues c on b while it is pending, and returns it; nil,
// queueing nothing, when c is nil or already made.
func queueTokenCheck(c *airlock.TokenCheck, b *pgx.Batch) *airlock.TokenCheck {
	if c == nil || !c.Pending() {
		return nil
	}
	t := c.Token()
	scopes := t.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	b.Queue(checkTokenSQL, named{"hash": t.Hash, "id": t.ID, "role": string(t.Role), "principal": t.Principal, "scopes": scopes})
	return c
}

// readTokenCheck reads the outcome of c, queued on br's batch, and records
// it; nil c reads nothing.
func readTokenCheck(br pgx.BatchResults, c *airlock.TokenCheck) error {
	if c == nil {
		return nil
	}
	_, err := br.Exec()
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == tokenNotLive {
		return c.Fail()
	}
	if err != nil {
		return err
	}
	c.Pass()
	return nil
}

// CheckToken implements store.TokenChecker: it makes c now, in a round
// trip of its own, for a call that reached the end without a statement.
func (s *Store) CheckToken(ctx context.Context, c *airlock.TokenCheck) error {
	b := &pgx.Batch{}
	if queueTokenCheck(c, b) == nil {
		return nil
	}
	br := s.pool.SendBatch(ctx, b)
	err := readTokenCheck(br, c)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return translate(err, "token", c.Token().ID)
}

// sendBehindCheck sends sql in one pipeline behind s's pending token
// check, and reads the check's outcome; it returns no results, and sends
// nothing, when no check is pending.
func (s *Store) sendBehindCheck(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	c := queueTokenCheck(s.check, b)
	if c == nil {
		return nil, nil
	}
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	if err := readTokenCheck(br, c); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

// queryRow is the pool's QueryRow, with s's pending token check sent
// ahead of sql in the same round trip.
func (s *Store) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := s.sendBehindCheck(ctx, sql, args)
	switch {
	case err != nil:
		return errRow{err}
	case br == nil:
		return s.pool.QueryRow(ctx, sql, args...)
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

// query is the pool's Query, with s's pending token check sent ahead of
// sql in the same round trip.
func (s *Store) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := s.sendBehindCheck(ctx, sql, args)
	switch {
	case err != nil:
		return nil, err
	case br == nil:
		return s.pool.Query(ctx, sql, args...)
	}
	return nextRows(br)
}
