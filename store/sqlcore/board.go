package sqlcore

import (
	"context"
	"database/sql"
	"time"

	"github.com/airlockhq/airlock"
)

// BoardSQL are the statements of store.Board. A work item is read as its
// id, title, column_key, version, created_at and updated_at.
type BoardSQL struct {
	// Board selects every column (column_key, name, position) in position
	// order, each followed by its items oldest first (the item's columns,
	// NULL for a column without items): one statement, so that columns
	// and items agree.
	Board string
	// CreateColumn appends column @key (@name) after the last one, dated
	// @now, unless the key is taken: then no row. It returns column_key,
	// name, position and created_at.
	CreateColumn string
	// CreateItem stores item @id (@title) in column @column at version 1,
	// dated @now, if the column exists (else no row), and returns it.
	CreateItem string
	// UpdateItem is the compare-and-set of a patch: item @id, at version
	// @if_version unless it is 0, gets @title and @column unless NULL, if
	// the column exists, a version more and updated_at @now; it returns
	// the item, or no row.
	UpdateItem string
	// Item selects item @id.
	Item string
}

func (c *Core) scanWorkItem(row Row) (airlock.WorkItem, error) {
	var w airlock.WorkItem
	if err := row.Scan(&w.ID, &w.Title, &w.ColumnKey, &w.Version, c.d.Time(&w.CreatedAt), c.d.Time(&w.UpdatedAt)); err != nil {
		return airlock.WorkItem{}, err
	}
	return w, nil
}

// Board returns every column in position order, each with its items
// oldest first.
func (c *Core) Board(ctx context.Context) ([]airlock.Column, error) {
	rows, err := c.d.Query(ctx, c.q.Board.Board, nil)
	if err != nil {
		return nil, c.d.Translate(err, "board", "read")
	}
	defer rows.Close()
	var cols []airlock.Column
	for rows.Next() {
		var (
			col                     airlock.Column
			id, title, key          sql.NullString
			version                 sql.NullInt64
			created, updated        NullTime
			createdDest, updateDest = c.d.NullTime(&created), c.d.NullTime(&updated)
		)
		if err := rows.Scan(&col.Key, &col.Name, &col.Position, &id, &title, &key, &version, createdDest, updateDest); err != nil {
			return nil, c.d.Translate(err, "board", "read")
		}
		if n := len(cols); n == 0 || cols[n-1].Key != col.Key {
			cols = append(cols, col)
		}
		if id.Valid {
			last := &cols[len(cols)-1]
			last.Items = append(last.Items, airlock.WorkItem{ID: id.String, Title: title.String, ColumnKey: key.String,
				Version: int(version.Int64), CreatedAt: created.Time, UpdatedAt: updated.Time})
		}
	}
	return cols, c.d.Translate(rows.Err(), "board", "read")
}

// CreateColumn appends a column after the last one, in one INSERT that
// yields to an existing key.
func (c *Core) CreateColumn(ctx context.Context, col airlock.Column, actor string) (airlock.Column, error) {
	if err := col.Validate(); err != nil {
		return airlock.Column{}, err
	}
	q := &c.q.Board
	var out airlock.Column
	err := c.d.Write(ctx, func(tx Tx) error {
		// Concurrent creates each read the last position: they take
		// turns, so that each reads the one its predecessor wrote.
		if err := tx.Lock("board_columns"); err != nil {
			return err
		}
		var at time.Time
		err := tx.QueryRow(q.CreateColumn, Args{{"key", col.Key}, {"name", col.Name}}).Scan(&out.Key, &out.Name, &out.Position, c.d.Time(&at))
		if noRows(err) {
			return airlock.ColumnTaken(col.Key)
		}
		if err != nil {
			return err
		}
		return tx.Event(airlock.Event{Type: airlock.EventColumnCreated, At: at, Actor: actor, Subject: out.Key})
	})
	if err != nil {
		return airlock.Column{}, c.d.Translate(err, "column", col.Key)
	}
	return out, nil
}

// CreateWorkItem stores a new item at version 1, in one INSERT … SELECT
// that finds its column.
func (c *Core) CreateWorkItem(ctx context.Context, w airlock.WorkItem, actor string) (airlock.WorkItem, error) {
	if err := w.Validate(); err != nil {
		return airlock.WorkItem{}, err
	}
	w = w.WithDefaults()
	var out airlock.WorkItem
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		out, err = c.scanWorkItem(tx.QueryRow(c.q.Board.CreateItem, Args{{"id", w.ID}, {"title", w.Title}, {"column", w.ColumnKey}}))
		if noRows(err) {
			return airlock.NoColumn(w.ColumnKey)
		}
		if err != nil {
			return err
		}
		return tx.Event(airlock.Event{Type: airlock.EventWorkItemCreated, At: out.CreatedAt, Actor: actor, Subject: out.ID})
	})
	if err != nil {
		return airlock.WorkItem{}, c.d.Translate(err, "work item", w.ID)
	}
	return out, nil
}

// UpdateWorkItem applies a patch with one compare-and-set on the item (and
// on its version when IfVersion is set) that also requires the destination
// column to exist. Zero rows are told apart by reading the item in the
// same transaction, after the compare-and-set: what it judged.
func (c *Core) UpdateWorkItem(ctx context.Context, p airlock.WorkItemPatch, actor string) (airlock.WorkItem, error) {
	if err := p.Validate(); err != nil {
		return airlock.WorkItem{}, err
	}
	q := &c.q.Board
	var out airlock.WorkItem
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		out, err = c.scanWorkItem(tx.QueryRow(q.UpdateItem, Args{{"id", p.ID}, {"title", Value(p.Title)},
			{"column", Value(p.ColumnKey)}, {"if_version", p.IfVersion}}))
		if noRows(err) {
			cur, err := c.scanWorkItem(tx.QueryRow(q.Item, Args{{"id", p.ID}}))
			if err != nil {
				return err // sql.ErrNoRows: not_found
			}
			return p.Lost(cur)
		}
		if err != nil {
			return err
		}
		return tx.Event(airlock.Event{Type: airlock.EventWorkItemUpdated, At: out.UpdatedAt, Actor: actor, Subject: out.ID})
	})
	if err != nil {
		return airlock.WorkItem{}, c.d.Translate(err, "work item", p.ID)
	}
	return out, nil
}

// GetWorkItem reads one item.
func (c *Core) GetWorkItem(ctx context.Context, id string) (airlock.WorkItem, error) {
	w, err := c.scanWorkItem(c.d.QueryRow(ctx, c.q.Board.Item, Args{{"id", id}}))
	return w, c.d.Translate(err, "work item", id)
}
