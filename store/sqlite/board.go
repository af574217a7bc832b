package sqlite

import (
	"github.com/airlockhq/airlock/store/sqlcore"
)

// workItemCols is the column list every work item query selects or
// returns, in the order scanWorkItem reads.
const workItemCols = `id, title, column_key, version, created_at, updated_at`

var boardSQL = sqlcore.BoardSQL{
	Board: `SELECT c.column_key, c.name, c.position, w.id, w.title, w.column_key, w.version, w.created_at, w.updated_at
FROM board_columns c LEFT JOIN work_items w ON w.column_key = c.column_key
ORDER BY c.position, c.seq, w.seq`,
	CreateColumn: `INSERT INTO board_columns (column_key, name, position, created_at)
SELECT @key, @name, coalesce(max(position), 0) + 1, @now FROM board_columns
WHERE true
ON CONFLICT (column_key) DO NOTHING
RETURNING column_key, name, position, created_at`,
	CreateItem: `INSERT INTO work_items (id, title, column_key, version, created_at, updated_at)
SELECT @id, @title, column_key, 1, @now, @now FROM board_columns WHERE column_key = @column
RETURNING ` + workItemCols,
	UpdateItem: `UPDATE work_items
SET title = coalesce(@title, title), column_key = coalesce(@column, column_key),
	version = version + 1, updated_at = @now
WHERE id = @id AND (@if_version = 0 OR version = @if_version)
  AND (@column IS NULL OR EXISTS (SELECT 1 FROM board_columns WHERE column_key = @column))
RETURNING ` + workItemCols,
	Item: `SELECT ` + workItemCols + ` FROM work_items WHERE id = @id`,
}
