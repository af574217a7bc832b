package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WriteForTest runs fn in one of the store's write transactions, with its
// retries, so tests can break a transaction on purpose.
func (s *Store) WriteForTest(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.write(ctx, func(ctx context.Context, t *tx) error { return fn(ctx, t.Tx) })
}

// MaxAttempts is how many times a transient failure is tried in all.
const MaxAttempts = maxAttempts

// PoolForTest exposes the store's pool, so tests can check its settings.
func (s *Store) PoolForTest() *pgxpool.Pool { return s.pool }
