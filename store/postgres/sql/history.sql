-- The history of decisions (sqlcore.HistorySQL): the window of approvals
-- and denials by decision time, read by the index requests_decided
-- (migration 0028), whose state term is repeated as written.

-- name: History.Times
{{tick}}
SELECT r.decided_by, r.state, r.created_at, r.decided_at, octet_length(r.arguments) FROM requests r, tick
WHERE r.state IN ('approved', 'denied') AND r.decided_at > tick.now - @age::interval

-- name: History.TimesBy
{{tick}}
SELECT r.decided_by, r.state, r.created_at, r.decided_at, octet_length(r.arguments) FROM requests r, tick
WHERE r.state IN ('approved', 'denied') AND r.decided_at > tick.now - @age::interval AND r.decided_by = @decided_by::text

-- name: History.Calls
{{tick}}
SELECT r.id, r.instance_id, r.tool, r.state, r.decided_by, r.arguments FROM requests r, tick
WHERE r.state IN ('approved', 'denied') AND r.decided_at > tick.now - @age::interval
	AND (r.state = 'denied' OR (r.decided_by NOT LIKE 'policy:%' AND r.decided_by NOT LIKE 'grant:%' AND r.decided_by NOT LIKE 'system:%'))
	AND r.kind = 'tool_call' AND r.question IS NULL AND r.command_method IS NULL
