package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// --explain-store counts what a lifecycle asks of PostgreSQL, beside what
// the raw baseline's lifecycle asks (docs/performance.md): transactions,
// rows and index entries written, WAL, and — when the database has
// pg_stat_statements — statements, their execution time and their WAL. It
// reads PostgreSQL's cumulative statistics before a phase and after its
// connections have closed (a backend reports its counters when it exits),
// and divides by the phase's lifecycles. Rows and index entries are counted in the phase's
// own schema; transactions and statements are the database's, WAL the
// cluster's, so anything else running there at the same time counts too.

// StoreCosts is the explain report: Airlock's lifecycle and the raw
// baseline's, each per lifecycle.
type StoreCosts struct {
	Airlock *StoreCost `json:"airlock"`
	Raw     *StoreCost `json:"raw,omitempty"`
	// Note says what was not counted, and why.
	Note string `json:"note,omitempty"`
}

// StoreCost is what one lifecycle asked of PostgreSQL, on average.
type StoreCost struct {
	Lifecycles   int64   `json:"lifecycles"`
	Transactions float64 `json:"transactions"`
	RowsInserted float64 `json:"rows_inserted"`
	RowsUpdated  float64 `json:"rows_updated"`
	// HOTUpdates are the updates that wrote no index entry (heap-only).
	HOTUpdates  float64 `json:"hot_updates"`
	RowsDeleted float64 `json:"rows_deleted"`
	// IndexEntries bounds the index entries written: each insert and each
	// update that is not heap-only writes one into every index of its
	// table whose predicate the row meets (a partial index skips the rest,
	// which PostgreSQL does not count; this counts every index).
	IndexEntries float64 `json:"index_entries"`
	WALRecords   float64 `json:"wal_records"`
	WALBytes     float64 `json:"wal_bytes"`
	WALFullPages float64 `json:"wal_full_pages"`
	// Statements is from pg_stat_statements (0 when it is not there).
	Statements float64 `json:"statements,omitempty"`
	// ExecMicros is the time PostgreSQL spent executing the statements
	// (pg_stat_statements' total_exec_time): not parsing, planning, commit
	// or the wire, so less than its CPU. NotifyMicros and SequencerMicros
	// are the shares of the change notifications (pg_notify; the queue is
	// written at their commit, which is not counted) and of the audit log's
	// sequencer (statements on the audit_ tables, the leases among them).
	ExecMicros      float64 `json:"exec_us,omitempty"`
	NotifyMicros    float64 `json:"notify_exec_us,omitempty"`
	SequencerMicros float64 `json:"sequencer_exec_us,omitempty"`
	// SettleMicros is the share of the settlings of event IDs (the events
	// lock taken exclusively, store/postgres/event.go), by the sequencer
	// and the change feed's catch-up.
	SettleMicros float64 `json:"settle_exec_us,omitempty"`
	// StatementWALRecords and StatementWALBytes are the WAL the statements
	// wrote (pg_stat_statements): this database's alone, so a busy cluster
	// does not count, but without the commit records.
	StatementWALRecords float64 `json:"statement_wal_records,omitempty"`
	StatementWALBytes   float64 `json:"statement_wal_bytes,omitempty"`
	// Tables is the same per table that was written, by name.
	Tables []TableCost `json:"tables"`
	// TopStatements are the statements PostgreSQL spent most time on, with
	// their calls and time per lifecycle, when pg_stat_statements is there.
	TopStatements []StatementCost `json:"top_statements,omitempty"`
}

// TableCost is one table's writes per lifecycle.
type TableCost struct {
	Table    string  `json:"table"`
	Indexes  int     `json:"indexes"`
	Inserted float64 `json:"inserted"`
	Updated  float64 `json:"updated"`
	HOT      float64 `json:"hot"`
	Deleted  float64 `json:"deleted"`
}

// StatementCost is one statement's calls and execution time per
// lifecycle.
type StatementCost struct {
	Query      string  `json:"query"`
	Calls      float64 `json:"calls"`
	ExecMicros float64 `json:"exec_us"`
}

// explainer takes the snapshots of one run: start before a phase, finish
// from the cleanup that runs after the phase's connections have closed and
// before its schema is dropped.
type explainer struct {
	db string

	mu     sync.Mutex
	before pgCounters
	costs  map[string]*StoreCost // by phase: "airlock" or "raw"
	ops    map[string]int64
	errs   []string
	noPSS  bool
}

func newExplainer(db string) *explainer {
	return &explainer{db: db, costs: map[string]*StoreCost{}, ops: map[string]int64{}}
}

// pgCounters is one snapshot of the statistics the report needs.
type pgCounters struct {
	xacts                        int64
	walRecords, walFPI, walBytes int64
	tables                       map[string]tableCounters
	statements                   map[int64]statementCounter
	statementsOK                 bool
}

type tableCounters struct {
	indexes            int
	ins, upd, hot, del int64
}

type statementCounter struct {
	query                string
	calls                int64
	execMs               float64
	walRecords, walBytes int64
}

// start snapshots the database before a phase.
func (e *explainer) start(ctx context.Context) error {
	c, err := e.read(ctx, "")
	if err != nil {
		return fmt.Errorf("--explain-store: read PostgreSQL's statistics: %w", err)
	}
	e.mu.Lock()
	e.before = c
	e.mu.Unlock()
	return nil
}

// setOps records how many lifecycles a phase ran.
func (e *explainer) setOps(phase string, ops int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ops[phase] = ops
	if c := e.costs[phase]; c != nil {
		c.scale(ops)
	}
}

// finish snapshots the phase's schema once its backends have reported
// their counters, and keeps the difference. Errors are kept for the
// report: the cleanup that calls it must go on to drop the schema.
func (e *explainer) finish(ctx context.Context, phase, schema string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// A backend reports its counters as it exits, a moment after its
	// client hangs up: read until two reads 100 ms apart agree on the
	// schema's tables, which nothing else writes, and show its writes.
	// The database's own counters move with anything else running there,
	// so they are not waited for.
	var after pgCounters
	var err error
	settled := false
	for i := 0; i < 50 && !settled; i++ {
		var c pgCounters
		if c, err = e.read(ctx, schema); err != nil {
			break
		}
		settled = i > 0 && sameTables(c.tables, after.tables) && inserted(c.tables) > 0
		after = c
		if settled {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if err != nil {
			break
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil && after.tables == nil {
		e.errs = append(e.errs, fmt.Sprintf("%s: %v", phase, err))
		return
	}
	if !settled {
		e.errs = append(e.errs, fmt.Sprintf("%s: PostgreSQL's counters had not settled after 10 s; its figures may be short", phase))
	}
	cost := diff(e.before, after)
	e.noPSS = e.noPSS || !after.statementsOK
	e.costs[phase] = cost
	if ops := e.ops[phase]; ops > 0 {
		cost.scale(ops)
	}
}

// report returns the costs of the phases that finished.
func (e *explainer) report() *StoreCosts {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := &StoreCosts{Airlock: e.costs["airlock"], Raw: e.costs["raw"]}
	var notes []string
	if e.noPSS {
		notes = append(notes, "no statement counts: create the pg_stat_statements extension in the database, with pg_stat_statements in shared_preload_libraries")
	}
	notes = append(notes, e.errs...)
	r.Note = strings.Join(notes, "; ")
	return r
}

// read takes a snapshot: the database's and cluster's counters, and the
// tables of schema when it is given.
func (e *explainer) read(ctx context.Context, schema string) (pgCounters, error) {
	conn, err := connectAdmin(ctx, e.db)
	if err != nil {
		return pgCounters{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var c pgCounters
	if err := conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.xacts); err != nil {
		return c, err
	}
	if err := conn.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::bigint FROM pg_stat_wal`).Scan(&c.walRecords, &c.walFPI, &c.walBytes); err != nil {
		return c, err
	}
	if schema != "" {
		rows, _ := conn.Query(ctx, `SELECT t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del,
	(SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid)
FROM pg_stat_user_tables t WHERE t.schemaname = $1`, schema)
		c.tables = map[string]tableCounters{}
		var name string
		var tc tableCounters
		if _, err := pgx.ForEachRow(rows, []any{&name, &tc.ins, &tc.upd, &tc.hot, &tc.del, &tc.indexes}, func() error {
			c.tables[name] = tc
			return nil
		}); err != nil {
			return c, err
		}
	}
	// pg_stat_statements is optional: without it (or its extension in
	// this database) the read fails, and the report says so.
	rows, _ := conn.Query(ctx, `SELECT queryid, query, calls, total_exec_time, wal_records, wal_bytes::bigint FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	c.statements = map[int64]statementCounter{}
	var id int64
	var sc statementCounter
	_, err = pgx.ForEachRow(rows, []any{&id, &sc.query, &sc.calls, &sc.execMs, &sc.walRecords, &sc.walBytes}, func() error {
		c.statements[id] = sc
		return nil
	})
	c.statementsOK = err == nil
	return c, nil
}

// inserted is the rows inserted in all of tables.
func inserted(tables map[string]tableCounters) int64 {
	var n int64
	for _, t := range tables {
		n += t.ins
	}
	return n
}

func sameTables(a, b map[string]tableCounters) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// diff is after − before, as totals (scale divides them).
func diff(before, after pgCounters) *StoreCost {
	c := &StoreCost{
		Transactions: float64(after.xacts - before.xacts),
		WALRecords:   float64(after.walRecords - before.walRecords),
		WALBytes:     float64(after.walBytes - before.walBytes),
		WALFullPages: float64(after.walFPI - before.walFPI),
	}
	// The phase's schema is fresh: its tables' counters are all its own.
	for name, t := range after.tables {
		if t.ins+t.upd+t.del == 0 {
			continue
		}
		c.Tables = append(c.Tables, TableCost{Table: name, Indexes: t.indexes,
			Inserted: float64(t.ins), Updated: float64(t.upd), HOT: float64(t.hot), Deleted: float64(t.del)})
		c.RowsInserted += float64(t.ins)
		c.RowsUpdated += float64(t.upd)
		c.HOTUpdates += float64(t.hot)
		c.RowsDeleted += float64(t.del)
		c.IndexEntries += float64((t.ins + t.upd - t.hot) * int64(t.indexes))
	}
	slices.SortFunc(c.Tables, func(a, b TableCost) int { return strings.Compare(a.Table, b.Table) })
	if after.statementsOK && before.statementsOK {
		for id, s := range after.statements {
			n := s.calls - before.statements[id].calls
			if n <= 0 {
				continue
			}
			b := before.statements[id]
			us := (s.execMs - b.execMs) * 1000
			c.Statements += float64(n)
			c.ExecMicros += us
			c.StatementWALRecords += float64(s.walRecords - b.walRecords)
			c.StatementWALBytes += float64(s.walBytes - b.walBytes)
			switch statementShare(s.query) {
			case "notify":
				c.NotifyMicros += us
			case "sequencer":
				c.SequencerMicros += us
			case "settle":
				c.SettleMicros += us
			}
			c.TopStatements = append(c.TopStatements, StatementCost{Query: oneLine(s.query), Calls: float64(n), ExecMicros: us})
		}
		slices.SortFunc(c.TopStatements, func(a, b StatementCost) int {
			if a.ExecMicros != b.ExecMicros {
				return cmp.Compare(b.ExecMicros, a.ExecMicros)
			}
			return strings.Compare(a.Query, b.Query)
		})
		if len(c.TopStatements) > 15 {
			c.TopStatements = c.TopStatements[:15]
		}
	}
	return c
}

// statementShare tells whose a statement is: "notify" for the change
// notifications, "sequencer" for the audit log's sequencer, "settle" for
// the settlings of event IDs, "" for the rest. It goes by the statement's
// text, which is all pg_stat_statements keeps: a settling is the
// exclusive events lock and the largest event ID (which the sequencer
// also reads, once a round, unlocked).
func statementShare(q string) string {
	switch {
	case strings.Contains(q, "pg_notify"):
		return "notify"
	case strings.Contains(q, "audit_"):
		return "sequencer"
	case strings.HasPrefix(q, "SELECT pg_advisory_xact_lock("), strings.HasPrefix(q, "SET LOCAL lock_timeout"),
		strings.HasPrefix(q, "SELECT coalesce(max(id), $1) FROM events"):
		return "settle"
	}
	return ""
}

// scale turns totals into per-lifecycle figures.
func (c *StoreCost) scale(ops int64) {
	if ops <= 0 || c.Lifecycles != 0 {
		return
	}
	c.Lifecycles = ops
	n := float64(ops)
	for _, f := range []*float64{&c.Transactions, &c.RowsInserted, &c.RowsUpdated, &c.HOTUpdates, &c.RowsDeleted,
		&c.IndexEntries, &c.WALRecords, &c.WALBytes, &c.WALFullPages, &c.Statements,
		&c.ExecMicros, &c.NotifyMicros, &c.SequencerMicros, &c.SettleMicros,
		&c.StatementWALRecords, &c.StatementWALBytes} {
		*f = round(*f/n, 2)
	}
	for i := range c.Tables {
		t := &c.Tables[i]
		t.Inserted, t.Updated, t.HOT, t.Deleted = round(t.Inserted/n, 2), round(t.Updated/n, 2), round(t.HOT/n, 2), round(t.Deleted/n, 2)
	}
	for i := range c.TopStatements {
		st := &c.TopStatements[i]
		st.Calls, st.ExecMicros = round(st.Calls/n, 2), round(st.ExecMicros/n, 1)
	}
}

func oneLine(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 100 {
		q = q[:97] + "..."
	}
	return q
}

// writeStoreCosts prints the explain report.
func writeStoreCosts(w io.Writer, s *StoreCosts) {
	if s == nil || s.Airlock == nil {
		if s != nil && s.Note != "" {
			fmt.Fprintf(w, "\nStore cost: not measured (%s)\n", s.Note)
		}
		return
	}
	fmt.Fprintf(w, "\nWhat one lifecycle asks of PostgreSQL (transactions and statements are the database's, WAL the cluster's: run it quiet)\n")
	raw := s.Raw
	if raw == nil {
		raw = &StoreCost{}
	}
	fmt.Fprintf(w, "  %-28s %10s %10s\n", "", "airlock", "raw")
	for _, row := range []struct {
		name string
		a, r float64
	}{
		{"lifecycles measured", float64(s.Airlock.Lifecycles), float64(raw.Lifecycles)},
		{"statements", s.Airlock.Statements, raw.Statements},
		{"  their execution, µs", s.Airlock.ExecMicros, raw.ExecMicros},
		{"    notifications, µs", s.Airlock.NotifyMicros, raw.NotifyMicros},
		{"    sequencer, µs", s.Airlock.SequencerMicros, raw.SequencerMicros},
		{"    settling event IDs, µs", s.Airlock.SettleMicros, raw.SettleMicros},
		{"  their WAL records", s.Airlock.StatementWALRecords, raw.StatementWALRecords},
		{"  their WAL bytes", s.Airlock.StatementWALBytes, raw.StatementWALBytes},
		{"transactions", s.Airlock.Transactions, raw.Transactions},
		{"rows inserted", s.Airlock.RowsInserted, raw.RowsInserted},
		{"rows updated", s.Airlock.RowsUpdated, raw.RowsUpdated},
		{"  of which heap-only", s.Airlock.HOTUpdates, raw.HOTUpdates},
		{"rows deleted", s.Airlock.RowsDeleted, raw.RowsDeleted},
		{"index entries, at most", s.Airlock.IndexEntries, raw.IndexEntries},
		{"WAL records", s.Airlock.WALRecords, raw.WALRecords},
		{"WAL bytes", s.Airlock.WALBytes, raw.WALBytes},
		{"WAL full-page images", s.Airlock.WALFullPages, raw.WALFullPages},
	} {
		fmt.Fprintf(w, "  %-28s %10.2f %10.2f\n", row.name, row.a, row.r)
	}
	fmt.Fprintf(w, "  Airlock's tables (per lifecycle: inserted, updated, heap-only, deleted; indexes):\n")
	for _, t := range s.Airlock.Tables {
		if t.Inserted+t.Updated+t.Deleted == 0 {
			continue // written only while setting up
		}
		fmt.Fprintf(w, "    %-28s %6.2f %6.2f %6.2f %6.2f  %d\n", t.Table, t.Inserted, t.Updated, t.HOT, t.Deleted, t.Indexes)
	}
	if len(s.Airlock.TopStatements) > 0 {
		fmt.Fprintf(w, "  Airlock's statements by execution time (per lifecycle: calls, µs):\n")
		for _, st := range s.Airlock.TopStatements {
			fmt.Fprintf(w, "    %6.2f %8.1f  %s\n", st.Calls, st.ExecMicros, st.Query)
		}
	}
	if s.Note != "" {
		fmt.Fprintf(w, "  Note: %s\n", s.Note)
	}
}
