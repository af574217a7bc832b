package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered SQL file from migrations/.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded files in version order. A file is named
// NNNN_what.sql; versions must run 1, 2, 3… without gaps or repeats, so that
// a mis-numbered file fails every test rather than silently reordering.
func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must look like 0001_what.sql", base)
		}
		body, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(body)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// migrate applies every migration the schema lacks, in order, one
// transaction each, and records each in schema_migrations. Every
// transaction first takes the schema's migration advisory lock (held until
// it ends) and only then reads the version, so replicas starting together
// apply each migration exactly once: the others wait, then find it done.
// create makes the schema itself when it is missing.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, create bool, now func() any) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := apply(ctx, pool, schema, create, m, len(ms), now); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, pool *pgxpool.Pool, schema string, create bool, m migration, known int, now func() any) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, advisoryClass, lockKey(schema, "migrate")); err != nil {
			return err
		}
		if create {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer     PRIMARY KEY,
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL
)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var newest int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if newest > known {
			// A newer binary migrated this schema; running old queries on a
			// schema they do not know could corrupt it.
			return fmt.Errorf("database schema version %d is newer than this build knows (%d); upgrade airlock on every replica", newest, known)
		}
		if newest >= m.version {
			return nil
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at)
VALUES (@version, @name, coalesce(@now::timestamptz, clock_timestamp()))`,
			named{"version": m.version, "name": m.name, "now": now()})
		return err
	})
}
