-- The work board (sqlcore.BoardSQL).

-- name: workItemCols
-- workItemCols is the column list every work item query selects or
-- returns, in the order sqlcore scans an item.
w.id, w.title, w.column_key, w.version, w.created_at, w.updated_at

-- name: Board.Board
SELECT c.column_key, c.name, c.position, w.id, w.title, w.column_key, w.version, w.created_at, w.updated_at
FROM board_columns c LEFT JOIN work_items w ON w.column_key = c.column_key
ORDER BY c.position, c.seq, w.seq

-- name: Board.CreateColumn
{{tick}}
INSERT INTO board_columns (column_key, name, position, created_at)
SELECT @key::text, @name::text, (SELECT coalesce(max(position), 0) + 1 FROM board_columns), tick.now FROM tick
ON CONFLICT (column_key) DO NOTHING
RETURNING column_key, name, position, created_at

-- name: Board.CreateItem
{{tick}}
INSERT INTO work_items AS w (id, title, column_key, version, created_at, updated_at)
SELECT @id::text, @title::text, c.column_key, 1, tick.now, tick.now FROM board_columns c, tick WHERE c.column_key = @column
RETURNING {{workItemCols}}

-- name: Board.UpdateItem
-- It locks the item first and reads the clock after (so updated_at grows
-- with the version); the UPDATE then re-checks the version against the
-- row as the last writer left it, so of concurrent updates at one
-- if_version exactly one wins, and the loser's read of the item sees what
-- the compare-and-set judged.
WITH locked AS MATERIALIZED (SELECT l.id FROM work_items l WHERE l.id = @id FOR NO KEY UPDATE),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM locked)
UPDATE work_items w
SET title = coalesce(@title::text, w.title), column_key = coalesce(@column::text, w.column_key),
	version = w.version + 1, updated_at = tick.now
FROM tick
WHERE w.id = @id AND (@if_version::integer = 0 OR w.version = @if_version::integer)
  AND (@column::text IS NULL OR EXISTS (SELECT 1 FROM board_columns c WHERE c.column_key = @column::text))
RETURNING {{workItemCols}}

-- name: Board.Item
SELECT {{workItemCols}} FROM work_items w WHERE w.id = @id
