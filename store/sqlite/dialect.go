package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
)

// Query implements sqlcore.Dialect with the read pool.
func (d dialect) Query(ctx context.Context, query string, args sqlcore.Args) (sqlcore.Rows, error) {
	q, values, err := d.s.bind(query, args, nil)
	if err != nil {
		return nil, err
	}
	rows, err := d.s.read.QueryContext(ctx, q, values...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// QueryRow implements sqlcore.Dialect with the read pool. A caller that
// has given up gets its context's error; one that gives up while the
// statement runs does not interrupt it. A statement that reads one row
// ends within about as long as noticing would take, and watching a
// context that can end costs two goroutines a statement (one in
// database/sql, one in modernc.org/sqlite), started and woken on the path
// of every read: the one read of a lifecycle (create, approve, read).
func (d dialect) QueryRow(ctx context.Context, query string, args sqlcore.Args) sqlcore.Row {
	if err := ctx.Err(); err != nil {
		return errRow{err}
	}
	q, values, err := d.s.bind(query, args, nil)
	if err != nil {
		return errRow{err}
	}
	return d.s.read.QueryRowContext(context.WithoutCancel(ctx), q, values...)
}

// Translate implements sqlcore.Dialect.
func (dialect) Translate(err error, what, id string) error { return translate(err, what, id) }

// Violates implements sqlcore.Dialect: the one writer never races another.
func (dialect) Violates(error, string) bool { return false }

// Settle implements sqlcore.Dialect: the one writer commits event IDs in
// the order it draws them, so every visible one is settled.
func (dialect) Settle(_ context.Context, last int64) (int64, bool, error) { return last, false, nil }

// SettleLately implements sqlcore.Dialect as Settle does.
func (dialect) SettleLately(_ context.Context, last int64) (int64, error) { return last, nil }

// dialect is the store as sqlcore.Core sees it: the one writer (inTx) and
// the read pool, times kept as int64 microseconds, and translate.
type dialect struct{ s *Store }

// Write implements sqlcore.Dialect: fn runs as one operation of the one
// writer (inTx), and a token it changed moves the token stamp once its
// transaction has committed.
func (d dialect) Write(ctx context.Context, fn func(sqlcore.Tx) error) error {
	r := d.s.submit(ctx, &op{ctx: ctx, core: fn})
	if r.err == nil && r.tokenChanged {
		return d.s.bumpTokenStamp()
	}
	return r.err
}

// Exec implements sqlcore.Tx.
func (t *txn) Exec(query string, args sqlcore.Args) (int64, error) {
	q, values, err := t.s.bind(query, args, t)
	if err != nil {
		return 0, err
	}
	res, err := t.ExecContext(t.ctx, q, values...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QueryRow implements sqlcore.Tx.
func (t *txn) QueryRow(query string, args sqlcore.Args) sqlcore.Row {
	q, values, err := t.s.bind(query, args, t)
	if err != nil {
		return errRow{err}
	}
	return t.QueryRowContext(t.ctx, q, values...)
}

// Query implements sqlcore.Tx.
func (t *txn) Query(query string, args sqlcore.Args) (sqlcore.Rows, error) {
	q, values, err := t.s.bind(query, args, t)
	if err != nil {
		return nil, err
	}
	rows, err := t.QueryContext(t.ctx, q, values...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// Lock implements sqlcore.Tx: the one writer's operations take turns.
func (t *txn) Lock(string) error { return nil }

// Event implements sqlcore.Tx: the event is inserted at once.
func (t *txn) Event(e airlock.Event) error {
	if e.At.IsZero() {
		e.At = t.now
	}
	return insertEvent(t.ctx, t, e.At, e)
}

// StateEvents implements sqlcore.Tx, in one INSERT (appendStateEvents).
func (t *txn) StateEvents(actor string, at time.Time, rs []airlock.Request) error {
	return appendStateEvents(t.ctx, t, at, actor, rs)
}

// RequestEvent implements sqlcore.Tx: the event is inserted at once, and
// the instruction stored (appendRequestEvent).
func (t *txn) RequestEvent(e airlock.Event, r airlock.Request) error {
	if e.At.IsZero() {
		e.At = t.now
	}
	return appendRequestEvent(t.ctx, t, e.At, e, r)
}

// Instructions implements sqlcore.Tx. It follows the events a sweep
// appended by a statement of its own (RequestSQL.ExpireDueEvents), one for
// each of rs: they are appended events too (Store.WatchEvents).
func (t *txn) Instructions(at time.Time, rs []airlock.Request) error {
	if len(rs) > 0 {
		t.appended = true
	}
	return recordInstructions(t.ctx, t, at, rs)
}

// Last implements sqlcore.Tx: the statement runs at once.
func (t *txn) Last(query string, args sqlcore.Args, scan func(sqlcore.Row) error) error {
	return scan(t.QueryRow(query, args))
}

// Changed implements sqlcore.Tx: a token's change moves the token stamp
// once the operation has committed (Write); no one else hears of a
// request's, since one process serves the file.
func (t *txn) Changed(id string) {
	if strings.HasPrefix(id, airlock.PrefixToken) {
		t.tokenChanged = true
	}
}

// sqlRows are *sql.Rows as sqlcore.Rows, whose Close reports nothing: an
// error closing rows read to the end is the one Err reported.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

// errRow is a row whose statement could not be sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// bind readies a statement of sqlcore's for modernc.org/sqlite: its @name
// parameters become numbered ones (?1, ?2, …; a statement's text is
// rewritten once), and its arguments are passed by number, as SQLite
// keeps them (value). @now, when not given, is t's operation's now, or in
// a read (t nil) the clock's. Binding by number spares modernc.org/sqlite
// looking each name up, and database/sql a sql.NamedArg per argument.
func (s *Store) bind(query string, args sqlcore.Args, t *txn) (string, []any, error) {
	p, err := numbered(query)
	if err != nil {
		return "", nil, err
	}
	values := make([]any, len(p.names))
	used := 0
	for i, name := range p.names {
		// Arguments given in the order the text names them (a
		// multi-row INSERT's hundreds) are found without a search.
		var (
			v  any
			ok bool
		)
		if i < len(args) && args[i].Name == name {
			v, ok = args[i].Value, true
		} else {
			v, ok = args.Lookup(name)
		}
		switch {
		case ok:
			used++
			values[i] = value(v)
		case name != sqlcore.Now:
			return "", nil, fmt.Errorf("sqlite: statement needs argument @%s: %.60q", name, query)
		case t != nil:
			if t.nowArg == nil {
				t.nowArg = micros(t.now)
			}
			values[i] = t.nowArg
		default:
			values[i] = micros(s.now())
		}
	}
	if used != len(args) {
		return "", nil, fmt.Errorf("sqlite: statement takes arguments %v, got %d: %.60q", p.names, len(args), query)
	}
	return p.sql, values, nil
}

// value is v as SQLite keeps it: times and durations as int64
// microseconds, a list of strings or integers as JSON text.
func value(v any) any {
	switch v := v.(type) {
	case time.Time:
		return micros(v)
	case *time.Time:
		if v == nil {
			return nil
		}
		return micros(*v)
	case time.Duration:
		return v.Microseconds()
	case []string:
		if v == nil {
			v = []string{}
		}
		js, _ := json.Marshal(v) // a []string always encodes
		return string(js)
	case []int64:
		if v == nil {
			v = []int64{}
		}
		js, _ := json.Marshal(v) // a []int64 always encodes
		return string(js)
	}
	return v
}

// numberedStmt is a statement with its @name parameters numbered, and the
// names in the order of their numbers.
type numberedStmt struct {
	sql   string
	names []string
}

var numberedStmts sync.Map // statement text → *numberedStmt

// numbered returns query with its @name parameters numbered: the first
// name met is ?1 wherever it recurs, the next new one ?2, and so on.
// Quoted text and comments are left as they are; a ? parameter is
// refused, since its number would clash.
func numbered(query string) (*numberedStmt, error) {
	if p, ok := numberedStmts.Load(query); ok {
		return p.(*numberedStmt), nil
	}
	var (
		b     strings.Builder
		names []string
		index = map[string]int{}
	)
	for i := 0; i < len(query); {
		c := query[i]
		end := i + 1
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := strings.IndexByte(query[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("sqlite: unterminated quote in %.60q", query)
			}
			end = i + 2 + j
		case strings.HasPrefix(query[i:], "--"):
			end = len(query)
			if j := strings.IndexByte(query[i:], '\n'); j >= 0 {
				end = i + j
			}
		case strings.HasPrefix(query[i:], "/*"):
			j := strings.Index(query[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("sqlite: unterminated comment in %.60q", query)
			}
			end = i + 4 + j
		case c == '?':
			return nil, fmt.Errorf("sqlite: a statement of sqlcore's names its parameters (@name), not ?: %.60q", query)
		case c == '@' && i+1 < len(query) && identStart(query[i+1]):
			for end = i + 2; end < len(query) && identPart(query[end]); end++ {
			}
			name := query[i+1 : end]
			n, ok := index[name]
			if !ok {
				names = append(names, name)
				n = len(names)
				index[name] = n
			}
			b.WriteString("?")
			b.WriteString(strconv.Itoa(n))
			i = end
			continue
		}
		b.WriteString(query[i:end])
		i = end
	}
	p, _ := numberedStmts.LoadOrStore(query, &numberedStmt{sql: b.String(), names: names})
	return p.(*numberedStmt), nil
}

func identStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func identPart(c byte) bool  { return identStart(c) || '0' <= c && c <= '9' }

// Time implements sqlcore.Values.
func (dialect) Time(p *time.Time) any { return (*microsTime)(p) }

// NullTime implements sqlcore.Values.
func (dialect) NullTime(p *sqlcore.NullTime) any { return (*nullMicrosTime)(p) }

// Duration implements sqlcore.Values.
func (dialect) Duration(p *time.Duration) any { return (*microsDuration)(p) }

// Strings implements sqlcore.Values.
func (dialect) Strings(p *[]string) any { return (*jsonStrings)(p) }

// microsTime scans a time stored as int64 microseconds.
type microsTime time.Time

func (t *microsTime) Scan(src any) error {
	v, ok := src.(int64)
	if !ok {
		return fmt.Errorf("a time column holds %T, want int64 microseconds", src)
	}
	*t = microsTime(fromMicros(v))
	return nil
}

// nullMicrosTime scans a nullable time stored as int64 microseconds.
type nullMicrosTime sqlcore.NullTime

func (t *nullMicrosTime) Scan(src any) error {
	if src == nil {
		*t = nullMicrosTime{}
		return nil
	}
	t.Valid = true
	return (*microsTime)(&t.Time).Scan(src)
}

// microsDuration scans a duration stored as int64 microseconds.
type microsDuration time.Duration

func (d *microsDuration) Scan(src any) error {
	v, ok := src.(int64)
	if !ok {
		return fmt.Errorf("a duration column holds %T, want int64 microseconds", src)
	}
	*d = microsDuration(time.Duration(v) * time.Microsecond)
	return nil
}

// jsonStrings scans a list of strings stored as JSON text; an empty list
// reads as nil.
type jsonStrings []string

func (l *jsonStrings) Scan(src any) error {
	var raw []byte
	switch v := src.(type) {
	case string:
		raw = []byte(v)
	case []byte:
		raw = v
	default:
		return fmt.Errorf("a list column holds %T, want JSON text", src)
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("stored list: %w", err)
	}
	if len(out) == 0 {
		out = nil
	}
	*l = out
	return nil
}
