-- MCP tasks (docs/mcp.md, "Tasks"; sqlcore.TaskSQL).

-- name: Tasks.Insert
{{tick}}
INSERT INTO mcp_tasks (id, request_id, owner_id, kind, call, created_at)
SELECT @id::text, r.id, r.owner_id, @kind::text, @call::text, tick.now FROM requests r, tick
WHERE r.id = @request_id::text AND r.owner_id = @owner::text
RETURNING created_at

-- name: Tasks.Get
SELECT t.id, t.request_id, t.owner_id, t.kind, t.call, t.created_at FROM mcp_tasks t WHERE t.id = @id::text

-- name: Tasks.Sweep
-- Rows another sweep holds are skipped, for a later sweep.
{{tick}}
DELETE FROM mcp_tasks WHERE id IN (
	SELECT t.id FROM mcp_tasks t JOIN requests r ON r.id = t.request_id, tick
	WHERE greatest(r.deadline_at, r.decided_at) + @keep::interval <= tick.now
	LIMIT @limit FOR UPDATE OF t SKIP LOCKED)
