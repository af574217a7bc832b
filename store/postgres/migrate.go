package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/airlockhq/airlock/internal/migrate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// applyMigrations applies every migration the schema lacks, in order, one
// transaction each, and records each in schema_migrations. Every
// transaction first takes the schema's migration advisory lock (held until
// it ends) and only then reads the version, so replicas starting together
// apply each migration exactly once: the others wait, then find it done.
// create makes the schema itself when it is missing.
func applyMigrations(ctx context.Context, pool *pgxpool.Pool, schema string, create bool, now func() any) error {
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := apply(ctx, pool, schema, create, m, len(ms), now); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, pool *pgxpool.Pool, schema string, create bool, m migrate.Migration, known int, now func() any) error {
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
		if newest >= m.Version {
			return nil
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at)
VALUES (@version, @name, coalesce(@now::timestamptz, clock_timestamp()))`,
			named{"version": m.Version, "name": m.Name, "now": now()})
		return err
	})
}
