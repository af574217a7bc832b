-- The history of decisions (sqlcore.HistorySQL): the window of approvals
-- and denials by decision time, read by the index requests_decided
-- (migration 0028), whose state term is repeated as written.
--
-- The window's start is coalesce(@now, now()) - @age, not the tick of the
-- statements that change rows: now() is stable, so the planner folds it
-- and estimates the window from the index's statistics, where the tick's
-- clock_timestamp() would leave it guessing a third of the table and
-- scanning all of it (TestHistoryPlans). A read needs no later instant
-- than its transaction's start.

-- name: History.Times
SELECT r.decided_by, r.state, r.created_at, r.decided_at, octet_length(r.arguments) FROM requests r
WHERE r.state IN ('approved', 'denied') AND r.decided_at > coalesce(@now::timestamptz, now()) - @age::interval

-- name: History.TimesBy
SELECT r.decided_by, r.state, r.created_at, r.decided_at, octet_length(r.arguments) FROM requests r
WHERE r.state IN ('approved', 'denied') AND r.decided_at > coalesce(@now::timestamptz, now()) - @age::interval
	AND r.decided_by = @decided_by::text

-- name: History.Calls
SELECT r.id, r.instance_id, r.tool, r.state, r.decided_by, r.arguments FROM requests r
WHERE r.state IN ('approved', 'denied') AND r.decided_at > coalesce(@now::timestamptz, now()) - @age::interval
	AND (r.state = 'denied' OR (r.decided_by NOT LIKE 'policy:%' AND r.decided_by NOT LIKE 'grant:%' AND r.decided_by NOT LIKE 'system:%'))
	AND r.kind = 'tool_call' AND r.question IS NULL AND r.command_method IS NULL AND (r.state = 'denied' OR r.derived_from = '')
