package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
)

// Core is the one implementation of the store.Store methods that both
// drivers run alike, over a driver's Dialect and Statements. A driver's
// Store embeds it, so that its methods are the store's; what only one
// engine does (Ping, Close, Extras, the fast paths) stays the driver's.
type Core struct {
	d Dialect
	q *Statements
	// fault is the drivers' test hook of WithFaultHook; nil in production.
	fault func(point string) error
}

// NewCore returns the Core of a driver's dialect and statements, to embed
// in the driver's Store; fault is the test hook called at each fault
// point of a command's approval (InjectFault), nil in production. It
// panics when a statement that is not optional is missing: a driver's
// mistake, which any test of it finds.
func NewCore(d Dialect, q *Statements, fault func(point string) error) Core {
	if err := q.check(); err != nil {
		panic(err)
	}
	return Core{d: traced{d}, q: q, fault: fault}
}

// WithDialect returns c over another dialect of the same driver: a view
// of the store whose calls do something more (PostgreSQL's pending token
// check). It is a function, not a method, so that it is not one of the
// driver's Store.
func WithDialect(c Core, d Dialect) Core {
	c.d = traced{d}
	return c
}

// Statements are a dialect's SQL text, one field per operation, grouped
// by concern. Each says what it takes (@name arguments; @now, the
// statement's instant, is the dialect's: see Now) and what it yields, in
// the order the scan that reads it expects. A statement a field calls
// optional may be "": its engine needs no such step (SQLite's one writer
// needs none of PostgreSQL's locks).
type Statements struct {
	Reviewers ReviewerSQL
	Board     BoardSQL
	Tokens    TokenSQL
	// Instances are those of instances and sessions.
	Instances InstanceSQL
	Grants    GrantSQL
	Notify    NotifySQL
	Requests  RequestSQL
	// WebSessions are those of WebSessions and OIDCLogins.
	WebSessions WebSessionSQL
	SigningKeys SigningKeySQL
	PushKeys    PushKeySQL
	TokenUses   TokenUseSQL
	Audit       AuditSQL
	Retention   RetentionSQL
	Tasks       TaskSQL
	History     HistorySQL
	Passkeys    PasskeySQL
}

// all runs a read and scans each of its rows with scan, in the read's
// order.
func all[T any](ctx context.Context, d Dialect, scan func(Row) (T, error), query string, args Args) ([]T, error) {
	rows, err := d.Query(ctx, query, args)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return Collect(rows, func() (T, error) { return scan(rows) })
}

// txAll is all in a write transaction.
func txAll[T any](tx Tx, scan func(Row) (T, error), query string, args Args) ([]T, error) {
	rows, err := tx.Query(query, args)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return Collect(rows, func() (T, error) { return scan(rows) })
}

// noRows reports whether err says a statement yielded no row: pgx's
// ErrNoRows is sql.ErrNoRows too.
func noRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// check reports a statement missing from q: an empty field not tagged
// `sql:"optional"`.
func (q *Statements) check() error {
	concerns := reflect.ValueOf(q).Elem()
	for i := range concerns.NumField() {
		c := concerns.Field(i)
		for j := range c.NumField() {
			f := c.Type().Field(j)
			if f.Type.Kind() == reflect.String && c.Field(j).String() == "" && f.Tag.Get("sql") != "optional" {
				return fmt.Errorf("sqlcore: the dialect has no statement %s.%s", concerns.Type().Field(i).Name, f.Name)
			}
		}
	}
	if q.Notify.InsertDelivery == "" && q.Notify.InsertDeliveries == "" {
		return fmt.Errorf("sqlcore: the dialect has neither Notify.InsertDelivery nor Notify.InsertDeliveries")
	}
	if (q.Audit.InsertLeaf == "" && q.Audit.InsertLeaves == "") || (q.Audit.InsertHash == "" && q.Audit.InsertHashes == "") {
		return fmt.Errorf("sqlcore: the dialect lacks Audit.InsertLeaf(s) or Audit.InsertHash(es)")
	}
	return nil
}
