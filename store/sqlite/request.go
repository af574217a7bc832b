package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// requestCols is the column list every request query selects or returns,
// in the order scanRequest reads.
const requestCols = `seq, id, instance_id, owner_id, state, kind, tool, arguments, timeout,
	agent_reasoning, context, created_at, deadline_at,
	decided_at, decided_by, note, answer, expires_at,
	claimed_at, claimed_by, exec_status, finished_at, exec_detail,
	idempotency_key, fingerprint, title, description, target_type, target_id, session_id,
	proposal_mode, command_method, command_input, question,
	command_observed, command_status, command_detail, command_applied_at,
	reviewers, approvals, escalate_to, escalate_after, escalated_at,
	purged_at, replaced_by, derived_from, preview_type, preview_content, reversibility, decision_review,
	` + namesCols

// namesCols are the names people read a request by, looked up with it
// (each by primary key): its instance's, its creator token's and its
// deciding token's, or for a decider with no token (an OIDC reviewer) its
// name in the reviewer directory. Every query that selects requestCols has the table
// unaliased as requests, so the lookups can name it.
const namesCols = `(SELECT i.name FROM instances i WHERE i.id = requests.instance_id),
	(SELECT t.name FROM tokens t WHERE t.id = requests.owner_id),
	coalesce((SELECT t.name FROM tokens t WHERE t.id = requests.decided_by),
		(SELECT p.name FROM reviewer_profiles p WHERE p.principal = requests.decided_by))`

// The compare-and-set writes of the lifecycle. Each changes a row only if
// it is still in the state the change starts from, judged against @now;
// zero rows means another change won, and the caller reads what holds.
const (
	// decideSQL returns, after the request and the instant, the
	// principal of the token that created it (NULL for an unknown token),
	// for DecideParams.Check.
	decideSQL = `UPDATE requests
SET approved_votes = approved_votes + (@state = 'approved' AND approvals > 1),
	state = CASE WHEN ` + decidesSQL + ` THEN @state ELSE state END,
	decided_at = CASE WHEN ` + decidesSQL + ` THEN @now END,
	decided_by = CASE WHEN ` + decidesSQL + ` THEN @actor END,
	note = CASE WHEN ` + decidesSQL + ` THEN @note ELSE note END,
	answer = CASE WHEN ` + decidesSQL + ` THEN @answer ELSE answer END,
	expires_at = CASE WHEN ` + decidesSQL + ` THEN @now + @validity END,
	decision_review = CASE WHEN ` + decidesSQL + ` THEN @review ELSE decision_review END
WHERE id = @id AND state = 'pending' AND deadline_at > @now`

	// decidedSQL is what decideSQL returns.
	decidedSQL = `
RETURNING ` + requestCols + `, @now,
	(SELECT t.principal FROM tokens t WHERE t.id = requests.owner_id)`

	// decidesSQL tells, in decideSQL's SET (which reads the row as it was),
	// whether the decision ends the request: a denial does, and so does
	// the approval that completes the approvals needed (1 for most
	// requests). Otherwise the decision is one more vote on a request that
	// stays pending.
	decidesSQL = `(@state = 'denied' OR approved_votes + 1 >= approvals)`

	cancelSQL = `UPDATE requests
SET state = 'cancelled', decided_at = @now, decided_by = @actor
WHERE id = @id AND owner_id = @actor AND state = 'pending' AND deadline_at > @now
RETURNING ` + requestCols + `, @now`

	// An expired request's decision is dated at its deadline, not at
	// whenever the store noticed: "expired" means no decision came before
	// then, and the date does not depend on the scheduler's latency.
	expireOneSQL = `UPDATE requests
SET state = 'expired', decided_at = deadline_at, decided_by = @actor
WHERE id = @id AND state = 'pending' AND deadline_at <= @now
RETURNING ` + requestCols + `, @now`

	// expireDueSQL picks the due requests from the partial index of
	// pending ones (requests_pending_by_second, in its order: by the
	// second of the deadline, then by seq, so that the rows a sweep
	// rewrites are neighbours; migration 0005) and returns only what a
	// sweep's caller needs (expiredCols): returning every column of a
	// thousand rows was half of a sweep's time in the writer. The first
	// condition on the deadline is the index's range, the second picks the
	// due entries of the current second.
	// expiredEventsSQL appends the expiry events of the rows expireDueSQL
	// is about to expire: the same selection, in the same order.
	expiredEventsSQL = `INSERT INTO events (type, at, actor, request_id, instance_id, state, uid, trace_id, span_id)
SELECT @event, @now, @actor, id, instance_id, 'expired', lower(hex(randomblob(16))), @trace_id, @span_id FROM requests
WHERE state = 'pending' AND deadline_at / 1000000 <= @now / 1000000 AND deadline_at <= @now
ORDER BY deadline_at / 1000000, seq
LIMIT @limit`

	expireDueSQL = `UPDATE requests
SET state = 'expired', decided_at = deadline_at, decided_by = @actor
WHERE seq IN (
	SELECT seq FROM requests
	WHERE state = 'pending' AND deadline_at / 1000000 <= @now / 1000000 AND deadline_at <= @now
	ORDER BY deadline_at / 1000000, seq
	LIMIT @limit
) AND state = 'pending' AND deadline_at <= @now
RETURNING ` + expiredCols + `, @now`

	// expiredByIDEventsSQL and expireByIDSQL are expiredEventsSQL and
	// expireDueSQL for the due requests among a JSON array of IDs
	// (ExpireRequests), rather than the earliest due. The CROSS JOIN makes
	// SQLite look each ID up (the IDs are few) instead of walking every
	// pending request by state and filtering; DISTINCT, since two readers
	// of one request put its ID in twice, and it has one event.
	expiredByIDEventsSQL = `INSERT INTO events (type, at, actor, request_id, instance_id, state, uid, trace_id, span_id)
SELECT @event, @now, @actor, r.id, r.instance_id, 'expired', lower(hex(randomblob(16))), @trace_id, @span_id
FROM (SELECT DISTINCT value AS id FROM json_each(@ids)) AS j CROSS JOIN requests AS r ON r.id = j.id
WHERE r.state = 'pending' AND r.deadline_at <= @now
ORDER BY r.deadline_at / 1000000, r.seq`

	expireByIDSQL = `UPDATE requests
SET state = 'expired', decided_at = deadline_at, decided_by = @actor
WHERE seq IN (
	SELECT r.seq FROM json_each(@ids) AS j CROSS JOIN requests AS r ON r.id = j.value
	WHERE r.state = 'pending' AND r.deadline_at <= @now
) AND state = 'pending' AND deadline_at <= @now
RETURNING ` + expiredCols + `, @now`

	claimSQL = `UPDATE requests
SET claimed_at = @now, claimed_by = @actor, exec_status = 'claimed'
WHERE id = @id AND owner_id = @actor AND state = 'approved' AND claimed_at IS NULL AND expires_at > @now
RETURNING ` + requestCols + `, @now`

	reportSQL = `UPDATE requests
SET exec_status = @status, finished_at = @now, exec_detail = @detail
WHERE id = @id AND owner_id = @actor AND exec_status = 'claimed'
RETURNING ` + requestCols + `, @now`

	selectRequestSQL = `SELECT ` + requestCols + ` FROM requests WHERE id = @id`
)

// voteCols are a vote's columns, with the name of the token it came
// through, or else of the actor's profile.
const voteCols = `v.principal, v.actor,
	coalesce((SELECT t.name FROM tokens t WHERE t.id = v.actor), (SELECT p.name FROM reviewer_profiles p WHERE p.principal = v.actor)),
	v.status, v.note, v.at, v.review`

// storedBytesSQL is airlock.Request.StoredBytes in SQL. octet_length
// reads a value's length from its record's header, never the value, so a
// page's sizes cost nothing to add up.
const storedBytesSQL = `coalesce(octet_length(arguments), 0) + coalesce(octet_length(context), 0) +
	octet_length(agent_reasoning) + octet_length(description) +
	coalesce(octet_length(command_input), 0) + coalesce(octet_length(command_observed), 0)`

// summaryCols is the column list of a request summary, in the order
// scanSummary reads.
// It reads one character of the arguments more than a summary keeps
// (airlock.ArgumentsHeadLen, 200), to tell whether more follow.
const summaryCols = `seq, id, instance_id, owner_id, state, kind, tool, title, session_id, created_at, deadline_at,
	decided_at, decided_by, note, answer, expires_at, question, command_method, substr(arguments, 1, 201),
	reviewers, approvals, approved_votes, purged_at IS NOT NULL,
	` + namesCols

// expiredCols is what ExpireDue returns of each request it expired, in
// the order scanExpired reads: its identity, deadline and decision.
const expiredCols = `seq, id, instance_id, owner_id, session_id, state, deadline_at, decided_at, decided_by`

// nextDeadlineSQL finds the earliest second with a pending deadline (the
// first entry of requests_pending_by_second), then the earliest deadline
// among that second's entries, where a plain MIN(deadline_at) would read
// every pending request's. It reads @probe of them at most: past @exact
// it answers the second's start instead (store.NextDeadlineExact).
const nextDeadlineSQL = `WITH first AS MATERIALIZED (
	SELECT deadline_at / 1000000 AS second FROM requests WHERE state = 'pending' ORDER BY deadline_at / 1000000 LIMIT 1
), due AS MATERIALIZED (
	SELECT r.deadline_at FROM requests r, first
	WHERE r.state = 'pending' AND r.deadline_at / 1000000 = first.second
	LIMIT @probe
)
SELECT CASE WHEN (SELECT count(*) FROM due) > @exact THEN (SELECT second * 1000000 FROM first)
	ELSE (SELECT min(deadline_at) FROM due) END`

var requestSQL = sqlcore.RequestSQL{
	Create: `INSERT INTO requests (
	id, instance_id, owner_id, state, kind, tool, arguments, timeout, agent_reasoning, context,
	created_at, deadline_at, decided_at, decided_by, note, expires_at,
	idempotency_key, fingerprint, title, description, target_type, target_id, session_id,
	proposal_mode, command_method, command_input, question, command_observed, reviewers, approvals, escalate_to, escalate_after,
	preview_type, preview_content, reversibility)
SELECT @id, i.id, i.owner_id, @state, @kind, @tool, @arguments, @timeout, @reasoning, @context,
	@now, @now + @window, CASE WHEN @decided_by IS NULL THEN NULL ELSE @now END, @decided_by, @note, @now + @validity,
	@key, @fingerprint, @title, @description, @target_type, @target_id, @session_id,
	@mode, @method, @input, @question, @observed, @reviewers, @approvals, @escalate_to, @escalate_after,
	@preview_type, @preview_content, @reversibility
FROM instances i
WHERE i.id = @instance AND i.owner_id = @owner AND i.deleted_at IS NULL
	AND (@unless_granted IS NULL OR NOT EXISTS (` + grantMayCoverSQL + `))
ON CONFLICT (owner_id, idempotency_key) DO NOTHING
RETURNING seq, @now, ` + namesCols,
	ByKey: `SELECT ` + requestCols + ` FROM requests WHERE owner_id = @owner AND idempotency_key = @key`,
	InstanceLive: `SELECT EXISTS (SELECT 1 FROM instances
WHERE id = @instance AND owner_id = @owner AND deleted_at IS NULL)`,
	UseGrant: useGrantSQL,
	Get:      selectRequestSQL,
	GetMany:  `SELECT ` + requestCols + ` FROM requests WHERE id IN (SELECT value FROM json_each(@ids))`,
	Votes:    `SELECT ` + voteCols + ` FROM votes v WHERE v.request_id = @id ORDER BY v.seq`,
	VotesOf:  `SELECT v.request_id, ` + voteCols + ` FROM votes v WHERE v.request_id IN (SELECT value FROM json_each(@ids)) ORDER BY v.seq`,
	List: `WITH page AS (
	SELECT seq, ` + storedBytesSQL + ` AS size FROM requests/*where*/ ORDER BY seq DESC LIMIT @candidates
), cut AS (
	SELECT seq, row_number() OVER w AS n,
		coalesce(sum(size) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
	FROM page WINDOW w AS (ORDER BY seq DESC)
)
SELECT ` + requestCols + `, (SELECT count(*) FROM page) FROM requests
WHERE seq IN (SELECT seq FROM cut WHERE n <= @limit AND before < @budget)
ORDER BY seq DESC`,
	Summaries: `SELECT ` + summaryCols + ` FROM requests/*where*/ ORDER BY seq DESC LIMIT @candidates`,

	Claim:        claimSQL,
	Report:       reportSQL,
	Cancel:       cancelSQL,
	ExpireOne:    expireOneSQL,
	Decide:       decideSQL + decidedSQL,
	ApprovePlain: decideSQL + ` AND command_method IS NULL` + decidedSQL,
	Rebind:       `UPDATE requests SET replaced_by = @replaced_by WHERE id = @id AND state = 'denied' AND replaced_by = ''`,
	Derive:       `UPDATE requests SET derived_from = @derived_from WHERE id = @id AND state = 'pending' AND derived_from = ''`,
	InsertVote: `INSERT INTO votes (request_id, principal, actor, status, note, at, review) VALUES (@id, @principal, @actor, @state, @note, @now, @review)
ON CONFLICT (request_id, principal) DO NOTHING`,
	CommandOf:    `SELECT owner_id, command_method, command_input FROM requests WHERE id = @id AND state = 'pending'`,
	CommandToken: `SELECT ` + tokenCols + ` FROM tokens WHERE id = @id`,
	CommandItem:  `SELECT ` + workItemCols + ` FROM work_items WHERE id = @id`,
	MoveItem: `UPDATE work_items
SET column_key = @to, version = version + 1, updated_at = @now
WHERE id = @id AND column_key = @from
  AND EXISTS (SELECT 1 FROM board_columns WHERE column_key = @to)
RETURNING ` + workItemCols,
	ApplyCommand: `UPDATE requests
SET command_status = @status, command_detail = @detail, command_applied_at = @now
WHERE id = @id AND state = 'approved' AND command_status IS NULL
RETURNING ` + requestCols,
	ExpireDue:        expireDueSQL,
	ExpireByID:       expireByIDSQL,
	ExpireDueEvents:  expiredEventsSQL,
	ExpireByIDEvents: expiredByIDEventsSQL,
	Escalate: `UPDATE requests
SET reviewers = reviewers || char(10) || escalate_to, escalated_at = @now
WHERE seq IN (SELECT seq FROM requests
	WHERE state = 'pending' AND escalate_to <> '' AND escalated_at IS NULL
		AND created_at + escalate_after <= @now AND deadline_at > @now
	ORDER BY seq LIMIT @limit)
RETURNING id, instance_id, @now`,
	NextDeadline: nextDeadlineSQL,
	// One entry per pending request, of a partial index of pending
	// requests (migration 0034): about 1 ms a scrape of the pending
	// gauge during a backlog of 100,000 (BenchmarkPendingCounts), on a
	// reader, which no write waits for.
	CountPending: `SELECT count(*) FROM requests WHERE state = 'pending'`,
	Events: `SELECT id, type, at, actor, request_id, instance_id, token_id, state, subject, policy_hash, uid, trace_id, span_id
FROM events WHERE id > @after AND id <= @upto ORDER BY id LIMIT @limit`,
	CreatedEvent: `SELECT id, type, at, actor, request_id, instance_id, token_id, state, subject, policy_hash, uid, trace_id, span_id
FROM events WHERE request_id = @id AND request_id <> '' AND type = 'request.created' ORDER BY id LIMIT 1`,
}
