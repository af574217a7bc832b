package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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

// The raw consume baseline's table: one row per request whose token was
// used, as Airlock's approval_token_uses.
const rawSQLiteTokenUses = `CREATE TABLE IF NOT EXISTS raw_token_uses (
	request_id  TEXT PRIMARY KEY,
	jti         TEXT NOT NULL,
	consumed_at INTEGER NOT NULL
) STRICT`

const rawPostgresTokenUses = `CREATE TABLE raw_token_uses (
	request_id  text PRIMARY KEY,
	jti         text NOT NULL,
	consumed_at timestamptz NOT NULL
)`

const rawArguments = `{"payment_id":"pay_1","amount":4900,"currency":"GBP"}`

// rawStore is the raw baseline's durable work on one kind of store: its
// three statements, each a function, so that the same work can be driven
// directly (runRaw) and behind a minimal HTTP handler (runRawHTTP).
type rawStore struct {
	kind        string // sqlite or postgres
	connections int
	// clients is how many clients measure its ceiling: one for SQLite's
	// one connection, which serializes its statements (more clients only
	// queue for it, and measure slower).
	clients  int
	describe string
	insert   func(ctx context.Context, id, key, arguments string) error
	approve  func(ctx context.Context, id string) error
	read     func(ctx context.Context, id string) (rawRow, error)
	// consume records the one use of a request's token, its own commit:
	// errRawUsed when the request's token was used before.
	consume func(ctx context.Context, requestID, jti string) error
	close   func()
}

// errRawUsed is a raw consume of a request whose token was used before.
var errRawUsed = errors.New("already used")

// rawRow is a raw_requests row as read back. Times are what the store
// keeps: microseconds since the epoch on SQLite, timestamps on PostgreSQL.
type rawRow struct {
	ID             string          `json:"id"`
	OwnerID        string          `json:"owner_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	State          string          `json:"state"`
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	CreatedAt      any             `json:"created_at"`
	DeadlineAt     any             `json:"deadline_at"`
	DecidedAt      any             `json:"decided_at"`
	ExpiresAt      any             `json:"expires_at"`
}

// openRaw opens a fresh raw store of the kind cfg.DB names: SQLite (WAL,
// synchronous=FULL, one connection, as Airlock's writer) or PostgreSQL
// (one connection per client, in a schema of its own). name tells two
// raw stores of one run apart.
func openRaw(ctx context.Context, cfg Config, name string) (*rawStore, error) {
	if isPostgres(cfg.DB) {
		return openRawPostgres(ctx, cfg)
	}
	return openRawSQLite(ctx, cfg, name)
}

// runRaw runs the raw baseline: the lifecycle's three statements called
// directly.
func runRaw(ctx context.Context, cfg Config) (*RawReport, error) {
	rs, err := openRaw(ctx, cfg, "raw")
	if err != nil {
		return nil, err
	}
	defer rs.close()
	if cfg.explain != nil {
		if err := cfg.explain.start(ctx); err != nil {
			return nil, err
		}
	}
	run := randomHex(4)
	fmt.Fprintf(cfg.Progress, "raw: %s, %d clients, up to %s or %d lifecycles\n", rs.describe, rs.clients, cfg.Duration, cfg.Count)
	res, err := runLoad(ctx, rs.clients, cfg.Duration, cfg.Count, 0, nil, func(context.Context, int) (clientOp, func(), error) {
		return func(ctx context.Context, n int64) error {
			id := fmt.Sprintf("raw_%s_%d", run, n)
			if err := rs.insert(ctx, id, "key-"+id, rawArguments); err != nil {
				return err
			}
			if err := rs.approve(ctx, id); err != nil {
				return err
			}
			r, err := rs.read(ctx, id)
			if err == nil && r.State != "approved" {
				err = fmt.Errorf("read %s as %s, want approved", id, r.State)
			}
			return err
		}, nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("raw %s: %w", rs.kind, err)
	}
	if cfg.explain != nil {
		cfg.explain.setOps("raw", res.Ops)
	}
	return &RawReport{Store: rs.kind, Connections: rs.connections, Clients: rs.clients, Result: res}, nil
}

// rawSQLitePath returns where a raw SQLite store goes, and how to remove
// it.
func rawSQLitePath(cfg Config, name string) (string, func(), error) {
	db := cfg.DB
	if db != "" && (cfg.Scenario != Raw || name != "raw") {
		db += "." + name // beside the file --db names, which another run uses
	}
	return sqlitePath(db, name+".db")
}

func openRawSQLite(ctx context.Context, cfg Config, name string) (*rawStore, error) {
	path, remove, err := rawSQLitePath(cfg, name)
	if err != nil {
		return nil, err
	}
	rs, err := openRawSQLiteAt(ctx, path)
	if err != nil {
		remove()
		return nil, err
	}
	closeConn := rs.close
	rs.close = func() { closeConn(); remove() }
	return rs, nil
}

// openRawAt opens the raw store spec names, which the run made (and will
// remove): a SQLite file, or a schema in which it creates its table, with
// connections connections.
func openRawAt(ctx context.Context, spec storeSpec, connections int) (*rawStore, error) {
	if spec.Postgres != "" {
		return openRawPostgresIn(ctx, spec.Postgres, spec.Schema, connections)
	}
	return openRawSQLiteAt(ctx, spec.SQLite)
}

// openRawSQLiteAt opens the raw store at path; its close leaves the file.
func openRawSQLiteAt(ctx context.Context, path string) (_ *rawStore, err error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "journal_mode(WAL)")
	conn, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	conn.SetConnMaxLifetime(0)
	for _, schema := range []string{rawSQLiteSchema, rawSQLiteTokenUses} {
		if _, err := conn.ExecContext(ctx, schema); err != nil {
			return nil, fmt.Errorf("raw SQLite %s: %w", path, err)
		}
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
	sel, err := conn.PrepareContext(ctx, `SELECT `+rawCols+` FROM raw_requests WHERE id = ?`)
	if err != nil {
		return nil, err
	}
	use, err := conn.PrepareContext(ctx, `INSERT INTO raw_token_uses (request_id, jti, consumed_at) VALUES (?, ?, ?)
ON CONFLICT (request_id) DO NOTHING`)
	if err != nil {
		return nil, err
	}
	return &rawStore{
		kind: "sqlite", connections: 1, clients: 1,
		describe: "SQLite WAL synchronous=FULL, 1 connection",
		insert: func(ctx context.Context, id, key, arguments string) error {
			now := time.Now().UnixMicro()
			_, err := ins.ExecContext(ctx, id, key, arguments, now, now+3_600_000_000)
			return err
		},
		approve: func(ctx context.Context, id string) error {
			r, err := upd.ExecContext(ctx, time.Now().UnixMicro(), id)
			if err != nil {
				return err
			}
			n, err := r.RowsAffected()
			return updated(n, err)
		},
		read: func(ctx context.Context, id string) (rawRow, error) {
			return scanRaw(sel.QueryRowContext(ctx, id))
		},
		consume: func(ctx context.Context, requestID, jti string) error {
			r, err := use.ExecContext(ctx, requestID, jti, time.Now().UnixMicro())
			if err != nil {
				return err
			}
			n, err := r.RowsAffected()
			return firstUse(n, err)
		},
		close: func() { conn.Close() },
	}, nil
}

// rawCols are the columns a raw read returns, in rawRow's order.
const rawCols = `id, owner_id, idempotency_key, state, tool, arguments, created_at, deadline_at, decided_at, expires_at`

// scanRaw reads one row of rawCols.
func scanRaw(row interface{ Scan(...any) error }) (rawRow, error) {
	var (
		r    rawRow
		args string
	)
	err := row.Scan(&r.ID, &r.OwnerID, &r.IdempotencyKey, &r.State, &r.Tool, &args, &r.CreatedAt, &r.DeadlineAt, &r.DecidedAt, &r.ExpiresAt)
	r.Arguments = json.RawMessage(args)
	return r, err
}

// updated checks that the conditional update changed its one row.
func updated(n int64, err error) error {
	if err == nil && n != 1 {
		err = fmt.Errorf("conditional update changed %d rows, want 1", n)
	}
	return err
}

// firstUse tells a consume's insert that recorded the use (one row) from
// one that found it recorded (none).
func firstUse(n int64, err error) error {
	if err == nil && n == 0 {
		err = errRawUsed
	}
	return err
}

// createRawSchema creates a fresh schema for a raw PostgreSQL store, and
// returns it with how to drop it.
func createRawSchema(ctx context.Context, cfg Config) (string, func(), error) {
	schema := "airlock_bench_raw_" + randomHex(6)
	admin, err := connectAdmin(ctx, cfg.DB)
	if err != nil {
		return "", nil, fmt.Errorf("raw PostgreSQL: connect: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("raw PostgreSQL: create schema %s: %w", schema, err)
	}
	return schema, func() { dropSchema(context.WithoutCancel(ctx), cfg.DB, schema, cfg.Progress) }, nil
}

func openRawPostgres(ctx context.Context, cfg Config) (*rawStore, error) {
	schema, drop, err := createRawSchema(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rs, err := openRawPostgresIn(ctx, cfg.DB, schema, cfg.Clients)
	if err != nil {
		drop()
		return nil, err
	}
	closePool := rs.close
	rs.close = func() {
		closePool()
		if cfg.explain != nil {
			cfg.explain.finish(context.WithoutCancel(ctx), "raw", schema)
		}
		drop()
	}
	return rs, nil
}

// openRawPostgresIn opens a raw store of connections connections in
// schema, which exists, and creates its table; its close leaves the
// schema.
func openRawPostgresIn(ctx context.Context, db, schema string, connections int) (*rawStore, error) {
	pc, err := pgxpool.ParseConfig(db)
	if err != nil {
		return nil, fmt.Errorf("raw PostgreSQL: read the URL: %w", err)
	}
	pc.MaxConns = int32(connections)
	pc.MinConns = int32(connections)
	pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("raw PostgreSQL: %w", err)
	}
	for _, schema := range []string{rawPostgresSchema, rawPostgresTokenUses} {
		if _, err := pool.Exec(ctx, schema); err != nil {
			pool.Close()
			return nil, fmt.Errorf("raw PostgreSQL: %w", err)
		}
	}
	return &rawStore{
		kind: "postgres", connections: connections, clients: connections,
		describe: fmt.Sprintf("PostgreSQL, %d connections", connections),
		insert: func(ctx context.Context, id, key, arguments string) error {
			_, err := pool.Exec(ctx, `INSERT INTO raw_requests (id, owner_id, idempotency_key, state, tool, arguments, created_at, deadline_at)
VALUES ($1, 'tok_raw', $2, 'pending', 'payments.refund', $3, clock_timestamp(), clock_timestamp() + interval '1 hour')`,
				id, key, arguments)
			return err
		},
		approve: func(ctx context.Context, id string) error {
			tag, err := pool.Exec(ctx, `UPDATE raw_requests SET state = 'approved', decided_at = clock_timestamp(), expires_at = clock_timestamp() + interval '5 minutes'
WHERE id = $1 AND state = 'pending' AND deadline_at > clock_timestamp()`, id)
			return updated(tag.RowsAffected(), err)
		},
		read: func(ctx context.Context, id string) (rawRow, error) {
			return scanRaw(pool.QueryRow(ctx, `SELECT `+rawCols+` FROM raw_requests WHERE id = $1`, id))
		},
		consume: func(ctx context.Context, requestID, jti string) error {
			tag, err := pool.Exec(ctx, `INSERT INTO raw_token_uses (request_id, jti, consumed_at) VALUES ($1, $2, clock_timestamp())
ON CONFLICT (request_id) DO NOTHING`, requestID, jti)
			return firstUse(tag.RowsAffected(), err)
		},
		close: func() { pool.Close() },
	}, nil
}
