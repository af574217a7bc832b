package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"
)

// maxStmts bounds how many prepared statements one pool keeps. The store's
// queries are a fixed set (ListRequests' filters make a few dozen); a query
// past the bound still runs, just parsed anew each time.
const maxStmts = 256

// pool is a *sql.DB whose queries run as prepared statements kept for the
// life of the store. modernc.org/sqlite parses a query's SQL on every
// unprepared call, and that parsing was most of the store's CPU time; a
// statement prepared once is parsed once per connection. The methods have
// the names and results of *sql.DB's, so call sites read the same.
type pool struct {
	*sql.DB

	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	// wanted holds queries first met inside a write transaction. They
	// cannot be prepared there (the write pool's one connection is the
	// transaction's), so they run unprepared once and are prepared by
	// prepareWanted once the connection is free again.
	wanted map[string]struct{}
}

func newPool(db *sql.DB) *pool {
	return &pool{DB: db, stmts: map[string]*sql.Stmt{}, wanted: map[string]struct{}{}}
}

// cached returns the statement prepared for query, or nil.
func (p *pool) cached(query string) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stmts[query]
}

// stmt returns the statement for query, preparing it on a free connection
// when it is new. It must not be called while this goroutine holds one of
// the pool's connections (an open transaction or unread rows): preparing
// waits for a free one. A nil statement means run the query unprepared.
func (p *pool) stmt(ctx context.Context, query string) *sql.Stmt {
	if st := p.cached(query); st != nil {
		return st
	}
	p.mu.Lock()
	full := len(p.stmts) >= maxStmts
	p.mu.Unlock()
	if full {
		return nil
	}
	st, err := p.DB.PrepareContext(ctx, query)
	if err != nil {
		return nil // the unprepared call reports the error
	}
	return p.keep(query, st)
}

// keep caches st for query and returns the statement to use: another
// goroutine may have prepared the same query first.
func (p *pool) keep(query string, st *sql.Stmt) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev := p.stmts[query]; prev != nil {
		st.Close()
		return prev
	}
	if len(p.stmts) >= maxStmts {
		st.Close()
		return nil
	}
	p.stmts[query] = st
	return st
}

// want notes a query met inside a transaction, for prepareWanted.
func (p *pool) want(query string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stmts)+len(p.wanted) < maxStmts {
		p.wanted[query] = struct{}{}
	}
}

// prepareWanted prepares the queries met inside transactions since the
// last call. Call it with none of the pool's connections held.
func (p *pool) prepareWanted(ctx context.Context) {
	p.mu.Lock()
	if len(p.wanted) == 0 {
		p.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(p.wanted))
	for q := range p.wanted {
		queries = append(queries, q)
	}
	clear(p.wanted)
	p.mu.Unlock()
	for _, q := range queries {
		if p.cached(q) != nil {
			continue
		}
		if st, err := p.DB.PrepareContext(ctx, q); err == nil {
			p.keep(q, st)
		}
	}
}

// ExecContext runs query as a prepared statement.
func (p *pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.DB.ExecContext(ctx, query, args...)
}

// QueryContext runs query as a prepared statement.
func (p *pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.DB.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query as a prepared statement.
func (p *pool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.DB.QueryRowContext(ctx, query, args...)
}

// Close closes the prepared statements, then the pool.
func (p *pool) Close() error {
	p.mu.Lock()
	var errs []error
	for q, st := range p.stmts {
		errs = append(errs, st.Close())
		delete(p.stmts, q)
	}
	p.mu.Unlock()
	return errors.Join(append(errs, p.DB.Close())...)
}

// txn is a write transaction whose queries reuse the pool's prepared
// statements: database/sql finds the statement already prepared on the
// transaction's connection and does not parse it again.
//
// Its statements run under ctx, the current operation's context without
// its cancellation, whatever context a call site passes: several callers'
// operations share one transaction (group commit), and a statement
// interrupted by one caller's cancellation could roll back all of them.
//
// It is also the sqlcore.Tx of a Core write (dialect.go), with the
// operation's now and what it changed.
type txn struct {
	*sql.Tx
	p   *pool
	ctx context.Context
	s   *Store

	// now is the current operation's (begin); nowArg is it as bound, once
	// a statement has named it.
	now    time.Time
	nowArg any
	// tokenChanged is whether the current operation changed a token.
	tokenChanged bool
	// appended is whether an operation of the transaction appended an
	// event (Store.WatchEvents).
	appended bool
}

// begin starts the transaction's next operation, at now.
func (t *txn) begin(now time.Time) {
	t.now, t.nowArg, t.tokenChanged = now, nil, false
}

// stmt returns the transaction's copy of query's prepared statement, or
// nil (run unprepared) when the query is new: it is then prepared after
// the transaction.
func (t *txn) stmt(query string) *sql.Stmt {
	st := t.p.cached(query)
	if st == nil {
		t.p.want(query)
		return nil
	}
	return t.Tx.StmtContext(t.ctx, st)
}

// ExecContext runs query in the transaction, prepared.
func (t *txn) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.stmt(query); st != nil {
		return st.ExecContext(t.ctx, args...)
	}
	return t.Tx.ExecContext(t.ctx, query, args...)
}

// QueryContext runs query in the transaction, prepared.
func (t *txn) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(query); st != nil {
		return st.QueryContext(t.ctx, args...)
	}
	return t.Tx.QueryContext(t.ctx, query, args...)
}

// QueryRowContext runs query in the transaction, prepared.
func (t *txn) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	if st := t.stmt(query); st != nil {
		return st.QueryRowContext(t.ctx, args...)
	}
	return t.Tx.QueryRowContext(t.ctx, query, args...)
}
