package postgres

import (
	"context"

	"github.com/airlockhq/airlock"
	"github.com/jackc/pgx/v5"
)

// Bounds for ListEvents, as in the SQLite driver.
const (
	defaultEventLimit = 100
	maxEventLimit     = 1000
)

// ListEvents returns up to limit events with ID > after, oldest first
// (default 100, at most 1000). Event IDs are handed out in commit order
// (see appendSQL), so resuming after an ID never skips a later commit.
func (s *Store) ListEvents(ctx context.Context, after int64, limit int) ([]airlock.Event, error) {
	if limit <= 0 {
		limit = defaultEventLimit
	}
	limit = min(limit, maxEventLimit)
	rows, err := s.pool.Query(ctx, `SELECT id, type, at, actor, request_id, instance_id, token_id, state, subject
FROM events WHERE id > @after ORDER BY id LIMIT @limit`, pgx.StrictNamedArgs{"after": after, "limit": limit})
	if err != nil {
		return nil, translate(err, "events", "list")
	}
	defer rows.Close()
	var out []airlock.Event
	for rows.Next() {
		var (
			e          airlock.Event
			typ, state string
		)
		if err := rows.Scan(&e.ID, &typ, &e.At, &e.Actor, &e.RequestID, &e.InstanceID, &e.TokenID, &state, &e.Subject); err != nil {
			return nil, translate(err, "events", "list")
		}
		e.Type, e.State, e.At = airlock.EventType(typ), airlock.State(state), e.At.UTC()
		out = append(out, e)
	}
	return out, translate(rows.Err(), "events", "list")
}
