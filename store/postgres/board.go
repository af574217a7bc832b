package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
)

// workItemCols is the column list every work item query selects or
// returns, in the order scanWorkItem reads.
const workItemCols = `w.id, w.title, w.column_key, w.version, w.created_at, w.updated_at`

func scanWorkItem(row pgx.Row) (airlock.WorkItem, error) {
	var w airlock.WorkItem
	if err := row.Scan(&w.ID, &w.Title, &w.ColumnKey, &w.Version, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return airlock.WorkItem{}, err
	}
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return w, nil
}

// Board returns every column in position order, each with its items
// oldest first, read by one statement (one snapshot), so columns and items
// agree.
func (s *Store) Board(ctx context.Context) ([]airlock.Column, error) {
	rows, err := s.query(ctx, `SELECT c.column_key, c.name, c.position, w.id, w.title, w.column_key, w.version, w.created_at, w.updated_at
FROM board_columns c LEFT JOIN work_items w ON w.column_key = c.column_key
ORDER BY c.position, c.seq, w.seq`)
	if err != nil {
		return nil, translate(err, "board", "read")
	}
	defer rows.Close()
	var cols []airlock.Column
	for rows.Next() {
		var (
			c                airlock.Column
			id, title, key   *string
			version          *int
			created, updated *time.Time
		)
		if err := rows.Scan(&c.Key, &c.Name, &c.Position, &id, &title, &key, &version, &created, &updated); err != nil {
			return nil, translate(err, "board", "read")
		}
		if n := len(cols); n == 0 || cols[n-1].Key != c.Key {
			cols = append(cols, c)
		}
		if id != nil {
			last := &cols[len(cols)-1]
			last.Items = append(last.Items, airlock.WorkItem{ID: *id, Title: *title, ColumnKey: *key, Version: *version,
				CreatedAt: created.UTC(), UpdatedAt: updated.UTC()})
		}
	}
	return cols, translate(rows.Err(), "board", "read")
}

// CreateColumn appends a column after the last one, in one INSERT that
// yields to an existing key. Concurrent creates would both read the same
// last position under READ COMMITTED, so each first takes the schema's
// columns advisory lock (held until commit), in a statement of its own:
// the INSERT's snapshot is then taken after the previous holder committed,
// and sees its column.
func (s *Store) CreateColumn(ctx context.Context, c airlock.Column, actor string) (airlock.Column, error) {
	if err := c.Validate(); err != nil {
		return airlock.Column{}, err
	}
	var out airlock.Column
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		if _, err := t.Exec(ctx, `SELECT pg_advisory_xact_lock(@class, @key)`,
			named{"class": advisoryClass, "key": s.columnsLock}); err != nil {
			return err
		}
		var at time.Time
		err := t.QueryRow(ctx, tickCTE+`INSERT INTO board_columns (column_key, name, position, created_at)
SELECT @key::text, @name::text, (SELECT coalesce(max(position), 0) + 1 FROM board_columns), tick.now FROM tick
ON CONFLICT (column_key) DO NOTHING
RETURNING column_key, name, position, created_at`, named{"now": s.now(), "key": c.Key, "name": c.Name}).
			Scan(&out.Key, &out.Name, &out.Position, &at)
		if errors.Is(err, pgx.ErrNoRows) {
			return airlock.ColumnTaken(c.Key)
		}
		if err != nil {
			return err
		}
		t.event(airlock.Event{Type: airlock.EventColumnCreated, At: at.UTC(), Actor: actor, Subject: out.Key})
		return nil
	})
	if err != nil {
		return airlock.Column{}, translate(err, "column", c.Key)
	}
	return out, nil
}

// CreateWorkItem stores a new item at version 1, in one INSERT … SELECT
// that finds its column.
func (s *Store) CreateWorkItem(ctx context.Context, w airlock.WorkItem, actor string) (airlock.WorkItem, error) {
	if err := w.Validate(); err != nil {
		return airlock.WorkItem{}, err
	}
	w = w.WithDefaults()
	var out airlock.WorkItem
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var err error
		out, err = scanWorkItem(t.QueryRow(ctx, tickCTE+`INSERT INTO work_items AS w (id, title, column_key, version, created_at, updated_at)
SELECT @id::text, @title::text, c.column_key, 1, tick.now, tick.now FROM board_columns c, tick WHERE c.column_key = @column
RETURNING `+workItemCols, named{"now": s.now(), "id": w.ID, "title": w.Title, "column": w.ColumnKey}))
		if errors.Is(err, pgx.ErrNoRows) {
			return airlock.NoColumn(w.ColumnKey)
		}
		if err != nil {
			return err
		}
		t.event(airlock.Event{Type: airlock.EventWorkItemCreated, At: out.CreatedAt, Actor: actor, Subject: out.ID})
		return nil
	})
	if err != nil {
		return airlock.WorkItem{}, translate(err, "work item", w.ID)
	}
	return out, nil
}

// updateWorkItemSQL is the compare-and-set of UpdateWorkItem. It locks the
// item first and reads the clock after (so updated_at grows with the
// version); the UPDATE then re-checks the version against the row as the
// last writer left it, so of concurrent updates at one if_version exactly
// one wins.
const updateWorkItemSQL = `WITH locked AS MATERIALIZED (SELECT l.id FROM work_items l WHERE l.id = @id FOR NO KEY UPDATE),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM locked)
UPDATE work_items w
SET title = coalesce(@title::text, w.title), column_key = coalesce(@column::text, w.column_key),
	version = w.version + 1, updated_at = tick.now
FROM tick
WHERE w.id = @id AND (@if_version::integer = 0 OR w.version = @if_version::integer)
  AND (@column::text IS NULL OR EXISTS (SELECT 1 FROM board_columns c WHERE c.column_key = @column::text))
RETURNING ` + workItemCols

// UpdateWorkItem applies a patch with one compare-and-set on the item (and
// on its version when IfVersion is set) that also requires the destination
// column to exist. Zero rows are told apart by reading the item in the same
// transaction, which holds its lock, so the read sees what the
// compare-and-set judged.
func (s *Store) UpdateWorkItem(ctx context.Context, p airlock.WorkItemPatch, actor string) (airlock.WorkItem, error) {
	if err := p.Validate(); err != nil {
		return airlock.WorkItem{}, err
	}
	title, column := sqlcore.Value(p.Title), sqlcore.Value(p.ColumnKey)
	var out airlock.WorkItem
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var err error
		out, err = scanWorkItem(t.QueryRow(ctx, updateWorkItemSQL, named{
			"now": s.now(), "id": p.ID, "title": title, "column": column, "if_version": p.IfVersion}))
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err := scanWorkItem(t.QueryRow(ctx, `SELECT `+workItemCols+` FROM work_items w WHERE w.id = @id`, named{"id": p.ID}))
			if err != nil {
				return err // pgx.ErrNoRows: not_found
			}
			return p.Lost(cur)
		}
		if err != nil {
			return err
		}
		t.event(airlock.Event{Type: airlock.EventWorkItemUpdated, At: out.UpdatedAt, Actor: actor, Subject: out.ID})
		return nil
	})
	if err != nil {
		return airlock.WorkItem{}, translate(err, "work item", p.ID)
	}
	return out, nil
}

// GetWorkItem reads one item.
func (s *Store) GetWorkItem(ctx context.Context, id string) (airlock.WorkItem, error) {
	w, err := scanWorkItem(s.queryRow(ctx, `SELECT `+workItemCols+` FROM work_items w WHERE w.id = @id`, named{"id": id}))
	return w, translate(err, "work item", id)
}
