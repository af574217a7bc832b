-- The purge of old payloads (sqlcore.RetentionSQL).

-- name: purgeDue
-- purgeDue is what makes request r purge-due at tick.now. Its first two
-- terms are those of the partial index requests_purge_due (migration
-- 0023).
r.purged_at IS NULL AND r.decided_at IS NOT NULL AND r.decided_at <= tick.now - @age::interval
	AND r.state <> 'pending' AND (r.state <> 'approved' OR r.claimed_at IS NOT NULL OR r.expires_at <= tick.now)

-- name: Retention.Due
-- The rows are not locked: Purge repeats the condition on the row it
-- locks, and purgers take turns on an advisory lock anyway.
{{tick}}
SELECT r.id, r.tool, r.arguments, r.agent_reasoning, r.context FROM requests r, tick
WHERE {{purgeDue}}
ORDER BY r.decided_at LIMIT @limit::int

-- name: Retention.Purge
{{tick}}
UPDATE requests r
SET arguments = NULL, agent_reasoning = '', context = NULL, preview_type = '', preview_content = '', purged_at = tick.now,
	arguments_digest = @arguments_digest::text, reasoning_digest = @reasoning_digest::text, context_digest = @context_digest::text
FROM tick
WHERE r.id = @id::text AND {{purgeDue}}
RETURNING r.instance_id, r.state, tick.now
