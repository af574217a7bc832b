package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The raw baseline is a lifecycle's durable work with nothing between the
// clients and the database: insert the request row with its unique
// (owner, idempotency key), approve it with one conditional UPDATE on
// state and deadline (each its own durable commit), and read it back. It
// is the ceiling Airlock's own lifecycle is measured against.

const rawSQLiteSchema = `CREATE TABLE IF NOT EXISTS raw_requests (
	id              TEXT PRIMARY KEY,
	owner_id        TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	state           TEXT NOT NULL,
	tool            TEXT NOT NULL,
	arguments       TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	deadline_at     INTEGER NOT NULL,
	decided_at      INTEGER,
	expires_at      INTEGER,
	UNIQUE (owner_id, idempotency_key)
) STRICT`

const rawPostgresSchema = `CREATE TABLE raw_requests (
	id              text PRIMARY KEY,
	owner_id        text NOT NULL,
	idempotency_key text NOT NULL,
	state           text NOT NULL,
	tool            text NOT NULL,
	arguments       jsonb NOT NULL,
	created_at      timestamptz NOT NULL,
	deadline_at     timestamptz NOT NULL,
	decided_at      timestamptz,
	expires_at      timestamptz,
	UNIQUE (owner_id, idempotency_key)
)`

const rawArguments = `{"payment_id":"pay_1","amount":4900,"currency":"GBP"}`

// runRaw runs the raw baseline on the kind of store cfg.DB names: SQLite
// (WAL, synchronous=FULL, one connection, as Airlock's writer) or
// PostgreSQL (one connection per client).
func runRaw(ctx context.Context, cfg Config) (*RawReport, error) {
	if isPostgres(cfg.DB) {
		return rawPostgres(ctx, cfg)
	}
	return rawSQLite(ctx, cfg)
}

func rawSQLite(ctx context.Context, cfg Config) (*RawReport, error) {
	db := cfg.DB
	if db != "" && cfg.Scenario != Raw {
		db += ".raw" // beside the in-process server's file
	}
	path, remove, err := sqlitePath(db, "raw.db")
	if err != nil {
		return nil, err
	}
	defer remove()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "journal_mode(WAL)")
	conn, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	conn.SetConnMaxLifetime(0)
	if _, err := conn.ExecContext(ctx, rawSQLiteSchema); err != nil {
		return nil, fmt.Errorf("raw SQLite %s: %w", path, err)
	}
	ins, err := conn.PrepareContext(ctx, `INSERT INTO raw_requests (id, owner_id, idempotency_key, state, tool, arguments, created_at, deadline_at)
VALUES (?, 'tok_raw', ?, 'pending', 'payments.refund', ?, ?, ?)`)
	if err != nil {
		return nil, err
	}
	upd, err := conn.PrepareContext(ctx, `UPDATE raw_requests SET state = 'approved', decided_at = ?1, expires_at = ?1 + 300000000
WHERE id = ?2 AND state = 'pending' AND deadline_at > ?1`)
	if err != nil {
		return nil, err
	}
	sel, err := conn.PrepareContext(ctx, `SELECT id, owner_id, idempotency_key, state, tool, arguments, created_at, deadline_at, decided_at, expires_at
FROM raw_requests WHERE id = ?`)
	if err != nil {
		return nil, err
	}
	// One connection serializes its statements: more clients only queue
	// for it (and measure slower), so the ceiling is one client's.
	run := randomHex(4)
	fmt.Fprintf(cfg.Progress, "raw: SQLite WAL synchronous=FULL, 1 connection, 1 client, up to %s or %d lifecycles\n", cfg.Duration, cfg.Count)
	res, err := runLoad(ctx, 1, cfg.Duration, cfg.Count, 0, func(context.Context, int) (clientOp, func(), error) {
		return func(ctx context.Context, n int64) error {
			id := fmt.Sprintf("raw_%s_%d", run, n)
			now := time.Now().UnixMicro()
			if _, err := ins.ExecContext(ctx, id, "key-"+id, rawArguments, now, now+3_600_000_000); err != nil {
				return err
			}
			r, err := upd.ExecContext(ctx, time.Now().UnixMicro(), id)
			if err != nil {
				return err
			}
			if n, err := r.RowsAffected(); err != nil || n != 1 {
				return fmt.Errorf("conditional update changed %d rows (%v), want 1", n, err)
			}
			return readRaw(sel.QueryRowContext(ctx, id))
		}, nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("raw SQLite: %w", err)
	}
	return &RawReport{Store: "sqlite", Connections: 1, Clients: 1, Result: res}, nil
}

// readRaw scans a read row and checks it is approved.
func readRaw(row interface{ Scan(...any) error }) error {
	var (
		id, owner, key, state, tool string
		args                        any
		created, deadline           any
		decided, expires            any
	)
	if err := row.Scan(&id, &owner, &key, &state, &tool, &args, &created, &deadline, &decided, &expires); err != nil {
		return err
	}
	if state != "approved" {
		return fmt.Errorf("read %s as %s, want approved", id, state)
	}
	return nil
}

func rawPostgres(ctx context.Context, cfg Config) (*RawReport, error) {
	schema := "airlock_bench_raw_" + randomHex(6)
	pc, err := pgxpool.ParseConfig(cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("raw PostgreSQL: read the URL: %w", err)
	}
	pc.MaxConns = int32(cfg.Clients)
	pc.MinConns = int32(cfg.Clients)
	pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	admin, err := connectAdmin(ctx, cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("raw PostgreSQL: connect: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return nil, fmt.Errorf("raw PostgreSQL: create schema %s: %w", schema, err)
	}
	defer admin.Exec(context.WithoutCancel(ctx), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("raw PostgreSQL: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, rawPostgresSchema); err != nil {
		return nil, fmt.Errorf("raw PostgreSQL: %w", err)
	}
	run := randomHex(4)
	fmt.Fprintf(cfg.Progress, "raw: PostgreSQL, %d connections, up to %s or %d lifecycles\n", cfg.Clients, cfg.Duration, cfg.Count)
	res, err := runLoad(ctx, cfg.Clients, cfg.Duration, cfg.Count, 0, func(context.Context, int) (clientOp, func(), error) {
		return func(ctx context.Context, n int64) error {
			id := fmt.Sprintf("raw_%s_%d", run, n)
			if _, err := pool.Exec(ctx, `INSERT INTO raw_requests (id, owner_id, idempotency_key, state, tool, arguments, created_at, deadline_at)
VALUES ($1, 'tok_raw', $2, 'pending', 'payments.refund', $3, clock_timestamp(), clock_timestamp() + interval '1 hour')`,
				id, "key-"+id, rawArguments); err != nil {
				return err
			}
			tag, err := pool.Exec(ctx, `UPDATE raw_requests SET state = 'approved', decided_at = clock_timestamp(), expires_at = clock_timestamp() + interval '5 minutes'
WHERE id = $1 AND state = 'pending' AND deadline_at > clock_timestamp()`, id)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("conditional update changed %d rows, want 1", tag.RowsAffected())
			}
			return readRaw(pool.QueryRow(ctx, `SELECT id, owner_id, idempotency_key, state, tool, arguments, created_at, deadline_at, decided_at, expires_at
FROM raw_requests WHERE id = $1`, id))
		}, nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("raw PostgreSQL: %w", err)
	}
	return &RawReport{Store: "postgres", Connections: cfg.Clients, Clients: cfg.Clients, Result: res}, nil
}
