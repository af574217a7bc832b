-- Instances and MCP sessions, and the sessions' instructions
-- (sqlcore.InstanceSQL).

-- name: instanceCols
-- instanceCols selects an instance with its count of pending requests,
-- counted from the entries of requests_instance_pending (migration 0032).
i.id, i.owner_id, i.name, i.metadata, i.created_at,
	(SELECT count(*) FROM requests r WHERE r.instance_id = i.id AND r.state = 'pending'),
	i.kind, i.last_seen_at, i.deleted_at, i.token_audience

-- name: instructionCols
-- instructionCols is the column list every instruction query returns.
n.seq, n.id, n.session_id, n.request_id, n.status, n.note, n.answer, n.created_at

-- name: Instances.Create
{{tick}}
INSERT INTO instances (id, owner_id, name, metadata, created_at, kind, token_audience)
SELECT @id::text, @owner::text, @name::text, @metadata::text, tick.now, @kind::text, @audience::text FROM tick
RETURNING created_at

-- name: Instances.Audience
SELECT token_audience FROM instances WHERE id = @id

-- name: Instances.Live
SELECT {{instanceCols}} FROM instances i WHERE i.id = @id AND i.deleted_at IS NULL

-- name: Instances.List
SELECT {{instanceCols}} FROM instances i
WHERE i.deleted_at IS NULL AND (@owner::text = '' OR i.owner_id = @owner::text) ORDER BY i.seq DESC

-- name: Instances.Lock
-- A create of a request locks its instance FOR SHARE (Requests.Create),
-- so a create and a delete of one instance take turns: either the create
-- commits first and the delete cancels the new request, or the delete
-- commits first and the create finds no live instance.
--
-- The lock is FOR NO KEY UPDATE, not FOR UPDATE: it must conflict with a
-- create's FOR SHARE, but not with the KEY SHARE lock that a decision
-- takes on a session row when it stores the session's instruction (the
-- instructions' foreign key) while holding its request's row lock. A FOR
-- UPDATE here, followed by the request locks (LockPending), would
-- deadlock with it.
SELECT id FROM instances WHERE id = @id AND deleted_at IS NULL FOR NO KEY UPDATE

-- name: Instances.LockPending
SELECT 1 FROM requests WHERE instance_id = @id AND state = 'pending' FOR UPDATE

-- name: Instances.Close
UPDATE instances SET deleted_at = coalesce(@now::timestamptz, clock_timestamp())
WHERE id = @id AND deleted_at IS NULL RETURNING deleted_at

-- name: Instances.ExpirePending
UPDATE requests r
SET state = 'expired', decided_at = r.deadline_at, decided_by = @actor
WHERE r.instance_id = @id AND r.state = 'pending' AND r.deadline_at <= @now
RETURNING {{expiredCols}}

-- name: Instances.CancelPending
UPDATE requests r
SET state = 'cancelled', decided_at = @now, decided_by = @actor
WHERE r.instance_id = @id AND r.state = 'pending' AND r.deadline_at > @now
RETURNING {{expiredCols}}

-- name: Instances.Session
SELECT {{instanceCols}} FROM instances i WHERE i.id = @id AND i.kind = 'session'

-- name: Instances.Sessions
SELECT {{instanceCols}} FROM instances i
WHERE i.kind = 'session' AND (@owner::text = '' OR i.owner_id = @owner::text) ORDER BY i.seq DESC LIMIT @limit

-- name: Instances.SessionState
SELECT kind, deleted_at FROM instances WHERE id = @id FOR NO KEY UPDATE

-- name: Instances.Heartbeat
-- It locks the session row first and reads the clock after, so heartbeats
-- of one session queue on that lock (and their stamps grow in that
-- order), and a close that committed while it waited leaves nothing to
-- stamp. Under READ COMMITTED, a second heartbeat's TakeInstructions then
-- reads the first's deliveries as committed.
WITH locked AS MATERIALIZED (
	SELECT l.id FROM instances l WHERE l.id = @id AND l.kind = 'session' AND l.deleted_at IS NULL FOR NO KEY UPDATE
),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM locked)
UPDATE instances i SET last_seen_at = tick.now
FROM tick
WHERE i.id = @id AND i.kind = 'session' AND i.deleted_at IS NULL
RETURNING tick.now

-- name: Instances.TakeInstructions
UPDATE instructions n SET delivered_at = @now
WHERE n.session_id = @id AND n.delivered_at IS NULL RETURNING {{instructionCols}}

-- name: Instances.Instance
SELECT {{instanceCols}} FROM instances i WHERE i.id = @id

-- name: Instances.CreateMCP
-- Under READ COMMITTED a loser's INSERT waits for the winner's to commit,
-- then does nothing, and MCP (a new snapshot) reads the winner's row.
{{tick}}
INSERT INTO instances (id, owner_id, name, created_at, kind, mcp_default)
SELECT @id::text, @owner::text, 'mcp', tick.now, 'adapter', true FROM tick
ON CONFLICT (owner_id) WHERE mcp_default AND deleted_at IS NULL DO NOTHING
RETURNING created_at

-- name: Instances.MCP
SELECT {{instanceCols}} FROM instances i
WHERE i.owner_id = @owner AND i.mcp_default AND i.deleted_at IS NULL
