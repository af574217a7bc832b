package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// instanceCols selects an instance with its count of pending requests,
// counted from the entries of requests_instance_pending (migration 0034).
const instanceCols = `i.id, i.owner_id, i.name, i.metadata, i.created_at,
	(SELECT count(*) FROM requests r WHERE r.instance_id = i.id AND r.state = 'pending'),
	i.kind, i.last_seen_at, i.deleted_at, i.token_audience`

// instructionCols is the column list every instruction query returns.
const instructionCols = `seq, id, session_id, request_id, status, note, answer, created_at`

var instanceSQL = sqlcore.InstanceSQL{
	Create: `INSERT INTO instances (id, owner_id, name, metadata, created_at, kind, token_audience) VALUES (@id, @owner, @name, @metadata, @now, @kind, @audience)
RETURNING @now`,
	Audience: `SELECT token_audience FROM instances WHERE id = @id`,
	Live:     `SELECT ` + instanceCols + ` FROM instances i WHERE i.id = @id AND i.deleted_at IS NULL`,
	List: `SELECT ` + instanceCols + ` FROM instances i
WHERE i.deleted_at IS NULL AND (@owner = '' OR i.owner_id = @owner) ORDER BY i.seq DESC`,
	Close: `UPDATE instances SET deleted_at = @now WHERE id = @id AND deleted_at IS NULL RETURNING @now`,
	ExpirePending: `UPDATE requests
SET state = 'expired', decided_at = deadline_at, decided_by = @actor
WHERE instance_id = @id AND state = 'pending' AND deadline_at <= @now
RETURNING ` + expiredCols,
	CancelPending: `UPDATE requests
SET state = 'cancelled', decided_at = @now, decided_by = @actor
WHERE instance_id = @id AND state = 'pending' AND deadline_at > @now
RETURNING ` + expiredCols,

	Session: `SELECT ` + instanceCols + ` FROM instances i WHERE i.id = @id AND i.kind = 'session'`,
	Sessions: `SELECT ` + instanceCols + ` FROM instances i
WHERE i.kind = 'session' AND (@owner = '' OR i.owner_id = @owner) ORDER BY i.seq DESC LIMIT @limit`,
	SessionState: `SELECT kind, deleted_at FROM instances WHERE id = @id`,
	Heartbeat: `UPDATE instances SET last_seen_at = @now
WHERE id = @id AND kind = 'session' AND deleted_at IS NULL RETURNING @now`,
	TakeInstructions: `UPDATE instructions SET delivered_at = @now
WHERE session_id = @id AND delivered_at IS NULL RETURNING ` + instructionCols,
	Instance: `SELECT ` + instanceCols + ` FROM instances i WHERE i.id = @id`,
	CreateMCP: `INSERT INTO instances (id, owner_id, name, created_at, kind, mcp_default)
VALUES (@id, @owner, 'mcp', @now, 'adapter', 1)
ON CONFLICT (owner_id) WHERE mcp_default = 1 AND deleted_at IS NULL DO NOTHING
RETURNING @now`,
	MCP: `SELECT ` + instanceCols + ` FROM instances i
WHERE i.owner_id = @owner AND i.mcp_default = 1 AND i.deleted_at IS NULL`,
}
