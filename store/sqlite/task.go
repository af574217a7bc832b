package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// MCP tasks (docs/mcp.md, "Tasks").

var taskSQL = sqlcore.TaskSQL{
	Insert: `INSERT INTO mcp_tasks (id, request_id, owner_id, kind, call, created_at)
SELECT @id, id, owner_id, @kind, @call, @now FROM requests WHERE id = @request_id AND owner_id = @owner
RETURNING created_at`,
	Get: `SELECT id, request_id, owner_id, kind, call, created_at FROM mcp_tasks WHERE id = @id`,
	Sweep: `DELETE FROM mcp_tasks WHERE id IN (
	SELECT t.id FROM mcp_tasks t JOIN requests r ON r.id = t.request_id
	WHERE max(r.deadline_at, coalesce(r.decided_at, r.deadline_at)) + @keep <= @now LIMIT @limit)`,
}
