package postgres

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
)

// named are a query's arguments by name (@name in its text), as
// pgx.StrictNamedArgs: every name must be given and every argument used.
// pgx rewrites a named query to positional parameters by scanning its
// text on every call, which for Airlock's long queries cost as much CPU
// as the rest of the driver; named does it once per query text.
type named map[string]any

// positional is a named query rewritten: its text with $1, $2, … and the
// names those stand for.
type positional struct {
	sql   string
	names []string
}

var rewritten sync.Map // query text → *positional

// marker stands for an argument while pgx rewrites a query once, so the
// rewritten argument list names the parameters in order.
type marker string

// RewriteQuery implements pgx.QueryRewriter: the map's arguments are
// bound as a statement's sqlcore.Args are (bound), without a default @now.
func (na named) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	b := bound{args: make(sqlcore.Args, 0, len(na))}
	for name, v := range na {
		b.args = append(b.args, sqlcore.Arg{Name: name, Value: v})
	}
	return b.RewriteQuery(ctx, conn, sql, args)
}

// positionalOf returns sql rewritten, from its cache or by pgx once, with
// the names given (those sql may use); an error when sql uses another.
func positionalOf(ctx context.Context, conn *pgx.Conn, sql string, names iter.Seq[string]) (*positional, error) {
	if p, ok := rewritten.Load(sql); ok {
		return p.(*positional), nil
	}
	markers := pgx.NamedArgs{}
	for name := range names {
		markers[name] = marker(name)
	}
	newSQL, params, err := markers.RewriteQuery(ctx, conn, sql, nil)
	if err != nil {
		return nil, err
	}
	pos := &positional{sql: newSQL, names: make([]string, len(params))}
	for i, m := range params {
		name, ok := m.(marker)
		if !ok {
			return nil, fmt.Errorf("query names an argument not given (parameter $%d of %.60q)", i+1, sql)
		}
		pos.names[i] = string(name)
	}
	p, _ := rewritten.LoadOrStore(sql, pos)
	return p.(*positional), nil
}

// bound are a statement's sqlcore.Args as pgx sends them, with @now
// (sqlcore.Now) s's when not given: NULL, so that the statement reads
// clock_timestamp(), unless a test clock is set. With no s (the driver's
// own statements, named), a statement that names @now must be given it.
type bound struct {
	args sqlcore.Args
	s    *Store
}

// RewriteQuery implements pgx.QueryRewriter.
func (b *bound) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, _ []any) (string, []any, error) {
	pos, err := positionalOf(ctx, conn, sql, func(yield func(string) bool) {
		for _, a := range b.args {
			if !yield(a.Name) {
				return
			}
		}
		if b.s != nil {
			yield(sqlcore.Now)
		}
	})
	if err != nil {
		return "", nil, err
	}
	values := make([]any, len(pos.names))
	used := 0
	for i, name := range pos.names {
		v, ok := b.args.Lookup(name)
		switch {
		case ok:
			used++
		case name == sqlcore.Now && b.s != nil:
			v = b.s.now()
		default:
			return "", nil, fmt.Errorf("statement needs argument @%s: %.60q", name, sql)
		}
		values[i] = v
	}
	if used != len(b.args) {
		return "", nil, fmt.Errorf("statement takes arguments %v, got %d: %.60q", pos.names, len(b.args), sql)
	}
	return pos.sql, values, nil
}
