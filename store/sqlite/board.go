package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
)

// workItemCols is the column list every work item query selects or
// returns, in the order scanWorkItem reads.
const workItemCols = `id, title, column_key, version, created_at, updated_at`

func scanWorkItem(sc scanner) (airlock.WorkItem, error) {
	var (
		w                airlock.WorkItem
		created, updated int64
	)
	if err := sc.Scan(&w.ID, &w.Title, &w.ColumnKey, &w.Version, &created, &updated); err != nil {
		return airlock.WorkItem{}, err
	}
	w.CreatedAt, w.UpdatedAt = fromMicros(created), fromMicros(updated)
	return w, nil
}

// Board returns every column in position order, each with its items
// oldest first, read in one transaction so columns and items agree.
func (s *Store) Board(ctx context.Context) ([]airlock.Column, error) {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, translate(err, "board", "read")
	}
	defer tx.Rollback()
	cols, err := func() ([]airlock.Column, error) {
		rows, err := tx.QueryContext(ctx, `SELECT column_key, name, position FROM board_columns ORDER BY position, seq`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var cols []airlock.Column
		for rows.Next() {
			var c airlock.Column
			if err := rows.Scan(&c.Key, &c.Name, &c.Position); err != nil {
				return nil, err
			}
			cols = append(cols, c)
		}
		return cols, rows.Err()
	}()
	if err != nil {
		return nil, translate(err, "board", "columns")
	}
	index := make(map[string]int, len(cols))
	for i, c := range cols {
		index[c.Key] = i
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+workItemCols+` FROM work_items ORDER BY seq`)
	if err != nil {
		return nil, translate(err, "board", "items")
	}
	defer rows.Close()
	for rows.Next() {
		w, err := scanWorkItem(rows)
		if err != nil {
			return nil, translate(err, "board", "items")
		}
		if i, ok := index[w.ColumnKey]; ok {
			cols[i].Items = append(cols[i].Items, w)
		}
	}
	return cols, translate(rows.Err(), "board", "items")
}

// CreateColumn appends a column after the last one, in one INSERT that
// yields to an existing key.
func (s *Store) CreateColumn(ctx context.Context, c airlock.Column, actor string) (airlock.Column, error) {
	if err := c.Validate(); err != nil {
		return airlock.Column{}, err
	}
	var out airlock.Column
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		err := tx.QueryRowContext(ctx, `INSERT INTO board_columns (column_key, name, position, created_at)
SELECT @key, @name, COALESCE(MAX(position), 0) + 1, @now FROM board_columns
WHERE true
ON CONFLICT (column_key) DO NOTHING
RETURNING column_key, name, position`, sql.Named("key", c.Key), sql.Named("name", c.Name), sql.Named("now", micros(now))).
			Scan(&out.Key, &out.Name, &out.Position)
		if errors.Is(err, sql.ErrNoRows) {
			return airlock.ColumnTaken(c.Key)
		}
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventColumnCreated, Actor: actor, Subject: out.Key})
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
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		var err error
		out, err = scanWorkItem(tx.QueryRowContext(ctx, `INSERT INTO work_items (id, title, column_key, version, created_at, updated_at)
SELECT @id, @title, column_key, 1, @now, @now FROM board_columns WHERE column_key = @column
RETURNING `+workItemCols, sql.Named("id", w.ID), sql.Named("title", w.Title), sql.Named("column", w.ColumnKey), sql.Named("now", micros(now))))
		if errors.Is(err, sql.ErrNoRows) {
			return airlock.NoColumn(w.ColumnKey)
		}
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventWorkItemCreated, Actor: actor, Subject: out.ID})
	})
	if err != nil {
		return airlock.WorkItem{}, translate(err, "work item", w.ID)
	}
	return out, nil
}

// UpdateWorkItem applies a patch with one compare-and-set on the item (and
// on its version when IfVersion is set) that also requires the destination
// column to exist. Zero rows are told apart by reading in the same
// transaction.
func (s *Store) UpdateWorkItem(ctx context.Context, p airlock.WorkItemPatch, actor string) (airlock.WorkItem, error) {
	if err := p.Validate(); err != nil {
		return airlock.WorkItem{}, err
	}
	title, column := sqlcore.Value(p.Title), sqlcore.Value(p.ColumnKey)
	var out airlock.WorkItem
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		var err error
		out, err = scanWorkItem(tx.QueryRowContext(ctx, `UPDATE work_items
SET title = COALESCE(@title, title), column_key = COALESCE(@column, column_key),
	version = version + 1, updated_at = @now
WHERE id = @id AND (@if_version = 0 OR version = @if_version)
  AND (@column IS NULL OR EXISTS (SELECT 1 FROM board_columns WHERE column_key = @column))
RETURNING `+workItemCols, sql.Named("id", p.ID), sql.Named("title", title), sql.Named("column", column),
			sql.Named("if_version", p.IfVersion), sql.Named("now", micros(now))))
		if errors.Is(err, sql.ErrNoRows) {
			cur, err := scanWorkItem(tx.QueryRowContext(ctx, `SELECT `+workItemCols+` FROM work_items WHERE id = ?`, p.ID))
			if err != nil {
				return err // sql.ErrNoRows: not_found
			}
			return p.Lost(cur)
		}
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventWorkItemUpdated, Actor: actor, Subject: out.ID})
	})
	if err != nil {
		return airlock.WorkItem{}, translate(err, "work item", p.ID)
	}
	return out, nil
}

// GetWorkItem reads one item.
func (s *Store) GetWorkItem(ctx context.Context, id string) (airlock.WorkItem, error) {
	w, err := scanWorkItem(s.read.QueryRowContext(ctx, `SELECT `+workItemCols+` FROM work_items WHERE id = ?`, id))
	return w, translate(err, "work item", id)
}
