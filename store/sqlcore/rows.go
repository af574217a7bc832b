package sqlcore

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// rowChunks are the row counts of the multi-row statements manyRows runs,
// largest first: a batch goes in as chunks of these, so that a driver
// prepares three statements, not one per batch size. In modernc.org/sqlite
// a statement's run costs several times what one more row of it costs
// (database/sql, binding, the VDBE's setup), so 1,000 leaves in 66 runs
// instead of 1,000 cost a fraction of the CPU (docs/performance.md).
var rowChunks = []int{16, 4, 1}

// rowsStmt is a statement whose VALUES row is repeated n times, and the
// names of its parameters in the order the text first names them.
type rowsStmt struct {
	sql   string
	names []string
}

type rowsKey struct {
	query string
	n     int
}

var rowsStmts sync.Map // rowsKey → *rowsStmt

// repeatRows returns query, an INSERT whose one VALUES row names its
// parameters (VALUES (@a, @b)), with that row repeated n times, each
// copy's names suffixed with its number (VALUES (@a_0, @b_0), (@a_1,
// @b_1), …), and the row's names.
func repeatRows(query string, n int) (*rowsStmt, error) {
	key := rowsKey{query, n}
	if s, ok := rowsStmts.Load(key); ok {
		return s.(*rowsStmt), nil
	}
	v := strings.Index(query, "VALUES")
	open := strings.IndexByte(query[max(v, 0):], '(')
	if v < 0 || open < 0 {
		return nil, fmt.Errorf("sqlcore: no VALUES row in %.60q", query)
	}
	open += v
	closing := strings.IndexByte(query[open:], ')')
	if closing < 0 {
		return nil, fmt.Errorf("sqlcore: unterminated VALUES row in %.60q", query)
	}
	closing += open
	row := query[open : closing+1]
	var cols []string
	for _, f := range strings.Split(row[1:len(row)-1], ",") {
		f = strings.TrimSpace(f)
		if !strings.HasPrefix(f, "@") || strings.ContainsAny(f[1:], " ()@") {
			return nil, fmt.Errorf("sqlcore: a VALUES row of parameters only (@name), not %q, in %.60q", f, query)
		}
		cols = append(cols, f[1:])
	}
	var b strings.Builder
	b.WriteString(query[:open])
	names := make([]string, 0, n*len(cols))
	for k := range n {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j, c := range cols {
			if j > 0 {
				b.WriteString(", ")
			}
			name := c + "_" + strconv.Itoa(k)
			names = append(names, name)
			b.WriteString("@" + name)
		}
		b.WriteByte(')')
	}
	b.WriteString(query[closing+1:])
	s, _ := rowsStmts.LoadOrStore(key, &rowsStmt{sql: b.String(), names: names})
	return s.(*rowsStmt), nil
}

// manyRows runs query, an INSERT of one VALUES row (repeatRows), for rows
// rows, in chunks of rowChunks rows; row(i, vals) fills vals with row i's
// values in the order of the row's parameters. It returns how many rows
// the statements changed.
func manyRows(tx Tx, query string, rows int, row func(i int, vals []any)) (int64, error) {
	var (
		changed int64
		args    Args
	)
	for done := 0; done < rows; {
		n := rowChunks[len(rowChunks)-1]
		for _, c := range rowChunks {
			if rows-done >= c {
				n = c
				break
			}
		}
		st, err := repeatRows(query, n)
		if err != nil {
			return changed, err
		}
		per := len(st.names) / n
		args = args[:0]
		vals := make([]any, per)
		for k := range n {
			row(done+k, vals)
			for j, v := range vals {
				args = append(args, Arg{st.names[k*per+j], v})
			}
		}
		one, err := tx.Exec(st.sql, args)
		if err != nil {
			return changed, err
		}
		changed += one
		done += n
	}
	return changed, nil
}
