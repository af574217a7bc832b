package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// historyWindowSQL is the window of History's reads, with the table unaliased:
// its state term is the partial index requests_decided's (migration
// 0028), which the query planner uses only when it appears as written.
const historyWindowSQL = `state IN ('approved', 'denied') AND decided_at > @now - @age`

// peopleSQL leaves out the approvals no person made, by terms on the
// index's decided_by, so that their rows are never read.
const peopleSQL = `(state = 'denied' OR (decided_by NOT LIKE 'policy:%' AND decided_by NOT LIKE 'grant:%' AND decided_by NOT LIKE 'system:%'))`

// historySQL reads the history of decisions (sqlcore.HistorySQL). The
// statistics read only columns the index holds, octet_length(arguments)
// among them, so they never read a row.
var historySQL = sqlcore.HistorySQL{
	Times: `SELECT decided_by, state, created_at, decided_at, octet_length(arguments) FROM requests
WHERE ` + historyWindowSQL,
	TimesBy: `SELECT decided_by, state, created_at, decided_at, octet_length(arguments) FROM requests
WHERE ` + historyWindowSQL + ` AND decided_by = @decided_by`,
	Calls: `SELECT id, instance_id, tool, state, decided_by, arguments FROM requests
WHERE ` + historyWindowSQL + ` AND ` + peopleSQL + `
	AND kind = 'tool_call' AND question IS NULL AND command_method IS NULL AND (state = 'denied' OR derived_from = '')`,
}
