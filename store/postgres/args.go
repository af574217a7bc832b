package postgres

import (
	"context"
	"fmt"
	"sync"

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

// RewriteQuery implements pgx.QueryRewriter.
func (na named) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	p, ok := rewritten.Load(sql)
	if !ok {
		markers := make(pgx.StrictNamedArgs, len(na))
		for name := range na {
			markers[name] = marker(name)
		}
		newSQL, params, err := markers.RewriteQuery(ctx, conn, sql, args)
		if err != nil {
			return "", nil, err
		}
		pos := &positional{sql: newSQL, names: make([]string, len(params))}
		for i, m := range params {
			pos.names[i] = string(m.(marker))
		}
		p, _ = rewritten.LoadOrStore(sql, pos)
	}
	pos := p.(*positional)
	if len(na) != len(pos.names) {
		return "", nil, fmt.Errorf("query takes %d named arguments (%v), got %d", len(pos.names), pos.names, len(na))
	}
	values := make([]any, len(pos.names))
	for i, name := range pos.names {
		v, ok := na[name]
		if !ok {
			return "", nil, fmt.Errorf("argument %s missing", name)
		}
		values[i] = v
	}
	return pos.sql, values, nil
}
