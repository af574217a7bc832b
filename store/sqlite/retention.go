package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// purgeDueSQL is what makes a request purge-due (sqlcore.RetentionSQL),
// with the table unaliased. Its first two terms are those of the partial
// index requests_purge_due (migration 0023), which the query planner uses
// only when they appear as written.
const purgeDueSQL = `purged_at IS NULL AND decided_at IS NOT NULL AND decided_at <= @now - @age
	AND state <> 'pending' AND (state <> 'approved' OR claimed_at IS NOT NULL OR expires_at <= @now)`

// retentionSQL purges old payloads (sqlcore.RetentionSQL).
var retentionSQL = sqlcore.RetentionSQL{
	Due: `SELECT id, tool, arguments, agent_reasoning, context FROM requests
WHERE ` + purgeDueSQL + `
ORDER BY decided_at LIMIT @limit`,
	Purge: `UPDATE requests
SET arguments = NULL, agent_reasoning = '', context = NULL, preview_type = '', preview_content = '', purged_at = @now,
	arguments_digest = @arguments_digest, reasoning_digest = @reasoning_digest, context_digest = @context_digest
WHERE id = @id AND ` + purgeDueSQL + `
RETURNING instance_id, state, @now`,
}
