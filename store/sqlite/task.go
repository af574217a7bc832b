package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// MCP tasks (docs/mcp.md, "Tasks").

var taskSQL = sqlcore.TaskSQL{
	Insert: `INSERT INTO mcp_tasks (id, request_id, owner_id, kind, call, created_at)
SELECT @id, id, owner_id, @kind, @call, @now FROM requests WHERE id = @request_id AND owner_id = @owner
RETURNING created_at`,
	Get: `SELECT id, request_id, owner_id, kind, call, created_at FROM mcp_tasks WHERE id = @id`,
}
