package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// applyMigrations applies every migration the database lacks, in order, one
// transaction each, and records each in schema_migrations. Each transaction
// starts with BEGIN IMMEDIATE (the write pool's DSN) and re-checks the
// version inside it, so two processes opening one new file at once apply
// each migration exactly once. A file already up to date is only read.
func applyMigrations(ctx context.Context, db *sql.DB, now func() time.Time) error {
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var newest, applied int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0), COUNT(*) FROM schema_migrations`).Scan(&newest, &applied); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if newest > len(ms) {
		// A newer binary migrated this file; running old queries on a schema
		// they do not know could corrupt it.
		return fmt.Errorf("database schema version %d is newer than this build knows (%d); upgrade airlock", newest, len(ms))
	}
	if applied == len(ms) {
		// Up to date (versions are unique and none is newer): opening takes no write lock, so a second process
		// opens the file however busy the first one's writer is.
		return nil
	}
	for _, m := range ms {
		if err := apply(ctx, db, m, now); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, m migrate.Migration, now func() time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var done bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)`, m.Version).Scan(&done); err != nil {
		return err
	}
	if done {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, now().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}
