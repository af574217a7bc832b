-- Requests, their votes and commands, the sweeps of their deadlines, and
-- the audit log (sqlcore.RequestSQL).

-- name: requestCols
-- requestCols is the column list every request query selects or returns,
-- in the order sqlcore scans a request.
r.seq, r.id, r.instance_id, r.owner_id, r.state, r.kind, r.tool, r.arguments, r.timeout,
	r.agent_reasoning, r.context, r.created_at, r.deadline_at,
	r.decided_at, r.decided_by, r.note, r.answer, r.expires_at,
	r.claimed_at, r.claimed_by, r.exec_status, r.finished_at, r.exec_detail,
	r.idempotency_key, r.fingerprint, r.title, r.description, r.target_type, r.target_id, r.session_id,
	r.proposal_mode, r.command_method, r.command_input, r.question,
	r.command_observed, r.command_status, r.command_detail, r.command_applied_at,
	r.reviewers, r.approvals, r.escalate_to, r.escalate_after, r.escalated_at,
	r.purged_at, r.replaced_by, r.derived_from, r.preview_type, r.preview_content, r.reversibility, r.decision_review,
	{{namesCols}}

-- name: namesCols
-- namesCols are the names people read a request by, looked up with it
-- (each by primary key): its instance's, its creator token's and its
-- deciding token's, or for a decider with no token (an OIDC reviewer) its
-- name in the reviewer directory. Every query that selects requestCols
-- names the table r.
(SELECT i.name FROM instances i WHERE i.id = r.instance_id) AS instance_name,
	(SELECT t.name FROM tokens t WHERE t.id = r.owner_id) AS owner_name,
	coalesce((SELECT t.name FROM tokens t WHERE t.id = r.decided_by),
		(SELECT p.name FROM reviewer_profiles p WHERE p.principal = r.decided_by)) AS decided_by_name

-- The compare-and-set writes of the lifecycle. Each changes a row only if
-- it is still in the state the change starts from, judged against the
-- statement's one reading of the clock (tick.now), and returns the row and
-- that instant; zero rows means another change won (or the request does
-- not exist), and the caller reads what holds.

-- name: Requests.Decide
-- Decide returns, after the instant, the principal of the token that
-- created the request, for DecideParams.Check.
{{lockedTick}}
UPDATE requests r
SET {{voteSet}}
FROM tick
WHERE r.id = @id AND r.state = 'pending' AND r.deadline_at > tick.now
RETURNING {{requestCols}}, tick.now, {{creatorPrincipal}}

-- name: Requests.ApprovePlain
-- ApprovePlain is Decide for a request that proposes no command
-- (command_method never changes): it locks the row only then, so that for
-- a command proposal it takes no lock and changes nothing, and the
-- command's locks (CommandToken, CommandItem) can still come first.
WITH locked AS MATERIALIZED (SELECT l.id FROM requests l WHERE l.id = @id AND l.command_method IS NULL FOR UPDATE),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM locked)
UPDATE requests r
SET {{voteSet}}
FROM tick
WHERE r.id = @id AND r.state = 'pending' AND r.deadline_at > tick.now
RETURNING {{requestCols}}, tick.now, {{creatorPrincipal}}

-- name: Requests.DecideOnce
-- DecideOnce decides a request that needs nothing besides its decision:
-- no command to apply, no question to answer, no session to instruct, and
-- not created by a token of the deciding reviewer's principal (what
-- DecideParams.Check refuses, checked here in SQL). It appends the
-- decision's event in the same statement, taking the events lock after
-- the row's lock as CreatePending does, so such a decision is one
-- pipeline, [BEGIN, DecideOnce, COMMIT], one round trip. Any other
-- request it leaves as it is, for Decide's general path, which also says
-- why a decision is refused.
{{lockedTick}}
, upd AS (UPDATE requests r
SET state = @state, decided_at = tick.now, decided_by = @actor, note = @note, answer = '',
	expires_at = tick.now + @validity::interval, decision_review = @review
FROM tick
WHERE r.id = @id AND r.state = 'pending' AND r.deadline_at > tick.now AND coalesce(r.session_id, '') = ''
	AND r.reviewers = '' AND r.approvals <= 1
	AND (@state::text = 'denied' OR (r.question IS NULL AND r.command_method IS NULL))
	AND (@principal::text = '' OR coalesce({{creatorPrincipal}}, '') <> @principal::text)
RETURNING {{requestCols}}, tick.now AS decided_now),
gate AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared({{eventsLock}}) FROM upd),
ev AS (INSERT INTO events (type, at, actor, request_id, instance_id, state, trace_id, span_id)
	SELECT @event::text, upd.decided_now, @actor::text, upd.id, upd.instance_id, upd.state, @trace_id::text, @span_id::text FROM upd, gate)
SELECT * FROM upd

-- name: voteSet
-- voteSet is the SET of Decide and ApprovePlain. It counts an approval
-- (approved_votes) and ends the request only when the decision decides
-- (decides): a denial, or the approval that completes the approvals
-- needed (1 for most requests). Otherwise the decision is one more vote
-- and the request stays pending. SET reads the row as the last writer
-- left it (the row is locked first), so votes on any replica are counted
-- one after the other.
approved_votes = r.approved_votes + CASE WHEN @state::text = 'approved' AND r.approvals > 1 THEN 1 ELSE 0 END,
	state = CASE WHEN {{decides}} THEN @state::text ELSE r.state END,
	decided_at = CASE WHEN {{decides}} THEN tick.now END,
	decided_by = CASE WHEN {{decides}} THEN @actor::text END,
	note = CASE WHEN {{decides}} THEN @note::text ELSE r.note END,
	answer = CASE WHEN {{decides}} THEN @answer::text ELSE r.answer END,
	expires_at = CASE WHEN {{decides}} THEN tick.now + @validity::interval END,
	decision_review = CASE WHEN {{decides}} THEN @review::text ELSE r.decision_review END

-- name: decides
-- decides tells, in voteSet, whether a decision ends the request.
(@state::text = 'denied' OR r.approved_votes + 1 >= r.approvals)

-- name: Requests.Rebind
-- Rebind names, on the original of an edit (just denied in the same
-- transaction, which holds its row lock), the request that replaced it.
UPDATE requests SET replaced_by = @replaced_by WHERE id = @id AND state = 'denied' AND replaced_by = ''

-- name: Requests.Derive
-- Derive names, on the request an edit has just created, its original.
UPDATE requests SET derived_from = @derived_from WHERE id = @id AND state = 'pending' AND derived_from = ''

-- name: Requests.InsertVote
-- InsertVote records a vote; a principal's second vote on a request
-- inserts nothing. It runs after the decision's write, which holds the
-- request's row lock, so one request's votes are inserted one at a time.
INSERT INTO votes (request_id, principal, actor, status, note, at, review)
VALUES (@id, @principal, @actor, @state, @note, @now, @review)
ON CONFLICT (request_id, principal) DO NOTHING

-- name: Requests.Votes
-- Votes reads a request's votes in the order they were cast, with the
-- names of the tokens they came through.
SELECT {{voteCols}} FROM votes v WHERE v.request_id = @id ORDER BY v.seq

-- name: Requests.VotesOf
SELECT v.request_id, {{voteCols}} FROM votes v WHERE v.request_id = ANY(@ids) ORDER BY v.seq

-- name: voteCols
-- voteCols are a vote's columns, with the name of the token it came
-- through, or of the actor's profile.
v.principal, v.actor, coalesce((SELECT t.name FROM tokens t WHERE t.id = v.actor),
	(SELECT p.name FROM reviewer_profiles p WHERE p.principal = v.actor)), v.status, v.note, v.at, v.review

-- name: creatorPrincipal
-- creatorPrincipal is the principal of the token that created r, NULL
-- when that token is unknown.
(SELECT t.principal FROM tokens t WHERE t.id = r.owner_id)

-- name: Requests.Cancel
{{lockedTick}}
UPDATE requests r
SET state = 'cancelled', decided_at = tick.now, decided_by = @actor
FROM tick
WHERE r.id = @id AND r.owner_id = @actor AND r.state = 'pending' AND r.deadline_at > tick.now
RETURNING {{requestCols}}, tick.now

-- name: Requests.ExpireOne
-- An expired request's decision is dated at its deadline, not at
-- whenever the store noticed: "expired" means no decision came before
-- then, and the date does not depend on the scheduler's latency.
{{lockedTick}}
UPDATE requests r
SET state = 'expired', decided_at = r.deadline_at, decided_by = @actor
FROM tick
WHERE r.id = @id AND r.state = 'pending' AND r.deadline_at <= tick.now
RETURNING {{requestCols}}, tick.now

-- name: Requests.ExpireDue
-- ExpireDue locks the due rows it picks with SKIP LOCKED: replicas
-- sweeping at once take disjoint rows and never wait for each other, and
-- a row a decision is writing right now is left to that decision (it
-- re-checks the deadline itself). The outer WHERE repeats the condition
-- on the locked row. It returns only expiredCols.
--
-- It takes the earliest second of deadlines first, and within one second
-- the requests in creation order (requests_pending_by_second, migration
-- 0003), so that the rows a sweep rewrites are neighbours in the heap.
-- The first condition on the deadline is the index's range, the second
-- picks the due entries of the current second.
{{tick}}
, due AS (
	SELECT d.seq FROM requests d
	WHERE d.state = 'pending'
		AND {{deadlineSecond}} <= date_trunc('second', (SELECT now FROM tick) AT TIME ZONE 'UTC')
		AND d.deadline_at <= (SELECT now FROM tick)
	ORDER BY {{deadlineSecond}}, d.seq
	LIMIT @limit
	FOR UPDATE SKIP LOCKED
)
UPDATE requests r
SET state = 'expired', decided_at = r.deadline_at, decided_by = @actor
FROM due, tick
WHERE r.seq = due.seq AND r.state = 'pending' AND r.deadline_at <= tick.now
RETURNING {{expiredCols}}, tick.now

-- name: Requests.ExpireByID
-- ExpireByID is ExpireDue for the due requests among @ids
-- (ExpireRequests). It waits for rows another transaction holds (a
-- sweep's, a decision's) rather than skipping them, so that once it
-- returns each of them is settled; it locks them in seq order, so two
-- such expiries never deadlock.
{{tick}}
, due AS (
	SELECT d.seq FROM requests d
	WHERE d.id = ANY(@ids) AND d.state = 'pending' AND d.deadline_at <= (SELECT now FROM tick)
	ORDER BY d.seq
	FOR UPDATE
)
UPDATE requests r
SET state = 'expired', decided_at = r.deadline_at, decided_by = @actor
FROM due, tick
WHERE r.seq = due.seq AND r.state = 'pending' AND r.deadline_at <= tick.now
RETURNING {{expiredCols}}, tick.now

-- name: deadlineSecond
-- deadlineSecond is the UTC second of d's deadline, the first column of
-- requests_pending_by_second (the expression must match it).
date_trunc('second', d.deadline_at AT TIME ZONE 'UTC')

-- name: Requests.NextDeadline
-- NextDeadline finds the earliest second with a pending deadline (the
-- first entry of requests_pending_by_second), then the earliest deadline
-- among that second's entries, reading @probe of them at most: past
-- @exact it answers the second's start instead (store.NextDeadlineExact).
WITH first AS MATERIALIZED (
	SELECT {{deadlineSecond}} AS second FROM requests d WHERE d.state = 'pending' ORDER BY 1 LIMIT 1
), due AS MATERIALIZED (
	SELECT d.deadline_at FROM requests d, first
	WHERE d.state = 'pending' AND {{deadlineSecond}} = first.second
	LIMIT @probe
)
SELECT CASE WHEN (SELECT count(*) FROM due) > @exact THEN (SELECT second AT TIME ZONE 'UTC' FROM first)
	ELSE (SELECT min(deadline_at) FROM due) END

-- name: expiredCols
-- expiredCols is what an expiry returns of each request it expired, in
-- the order sqlcore scans it: its identity, deadline and decision.
r.seq, r.id, r.instance_id, r.owner_id, r.session_id, r.state, r.deadline_at, r.decided_at, r.decided_by

-- name: Requests.Claim
{{lockedTick}}
UPDATE requests r
SET claimed_at = tick.now, claimed_by = @actor, exec_status = 'claimed'
FROM tick
WHERE r.id = @id AND r.owner_id = @actor AND r.state = 'approved' AND r.claimed_at IS NULL AND r.expires_at > tick.now
RETURNING {{requestCols}}, tick.now

-- name: Requests.Report
{{lockedTick}}
UPDATE requests r
SET exec_status = @status, finished_at = tick.now, exec_detail = @detail
FROM tick
WHERE r.id = @id AND r.owner_id = @actor AND r.exec_status = 'claimed'
RETURNING {{requestCols}}, tick.now

-- name: Requests.Get
SELECT {{requestCols}} FROM requests r WHERE r.id = @id

-- name: Requests.GetMany
SELECT {{requestCols}} FROM requests r WHERE r.id = ANY(@ids)

-- name: Requests.Create
-- Create inserts a request for a live instance of its owner, or yields to
-- an existing row with the same owner and key. It locks the instance row
-- FOR SHARE, and reads the clock after that lock. DeleteInstance locks
-- that row FOR NO KEY UPDATE first (Instances.Lock), so a create and a
-- delete of one instance serialize: either the create commits first and
-- the delete (whose later statements see it) cancels the new request, or
-- the delete commits first and the create, which re-checks deleted_at
-- after waiting, finds no live instance. The foreign key alone takes only
-- a KEY SHARE lock, which does not conflict with the delete's UPDATE, and
-- would let a pending request be born on a deleted instance.
{{createInsertBefore}}
	CASE WHEN @decided_by::text IS NULL THEN NULL ELSE tick.now END, @decided_by::text,
	@note::text, tick.now + @validity::interval{{createInsertAfter}}
{{created}}

-- name: created
-- created is what a create returns: seq, the instant and the names.
RETURNING r.seq, r.created_at, {{namesCols}}

-- name: Requests.CreatePending
-- CreatePending is Create for a pending request, with its "created" event
-- appended by the same statement, so that a create is one pipeline,
-- [BEGIN, CreatePending, COMMIT], one round trip. The events lock is
-- taken from the inserted row (gate reads ins), so after the statement's
-- row locks (the instance's, the idempotency key's), as the events a
-- transaction appends take it after its other statements; and the
-- event's ID is drawn once it is held (ev reads gate). A conflict inserts
-- nothing, so no event.
WITH ins AS ({{createInsertBefore}}
	NULL, NULL, '', NULL{{createInsertAfter}}
{{created}},
	r.id, r.instance_id, r.state),
gate AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared({{eventsLock}}) FROM ins),
ev AS (INSERT INTO events (type, at, actor, request_id, instance_id, state, trace_id, span_id)
	SELECT @event::text, ins.created_at, @actor::text, ins.id, ins.instance_id, ins.state, @trace_id::text, @span_id::text FROM ins, gate)
SELECT ins.seq, ins.created_at, ins.instance_name, ins.owner_name, ins.decided_by_name FROM ins

-- name: createInsertBefore
-- createInsertBefore and createInsertAfter are an insert of a request but
-- for its decided_at, decided_by, note and expires_at.
WITH inst AS MATERIALIZED (
	SELECT i.id, i.owner_id FROM instances i
	WHERE i.id = @instance AND i.owner_id = @owner AND i.deleted_at IS NULL
	FOR SHARE
),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM inst)
INSERT INTO requests AS r (
	id, instance_id, owner_id, state, kind, tool, arguments, timeout, agent_reasoning, context,
	created_at, deadline_at, decided_at, decided_by, note, expires_at,
	idempotency_key, fingerprint, title, description, target_type, target_id, session_id,
	proposal_mode, command_method, command_input, question, command_observed, reviewers, approvals, escalate_to, escalate_after,
	preview_type, preview_content, reversibility)
SELECT @id::text, inst.id, inst.owner_id, @state::text, @kind::text, @tool::text, @arguments::text, @timeout::text,
	@reasoning::text, @context::text,
	tick.now, tick.now + @window::interval,

-- name: createInsertAfter
,
	@key::text, @fingerprint::text, @title::text, @description::text, @target_type::text, @target_id::text, @session_id::text,
	@mode::text, @method::text, @input::text, @question::text, @observed::text, @reviewers::text, @approvals::integer,
	@escalate_to::text, @escalate_after::interval, @preview_type::text, @preview_content::text, @reversibility::text
FROM inst, tick
WHERE @unless_granted::text IS NULL OR NOT EXISTS ({{grantMayCover}})
ON CONFLICT (owner_id, idempotency_key) DO NOTHING

-- name: storedBytes
-- storedBytes is airlock.Request.StoredBytes in SQL. octet_length of a
-- text reads the size its TOAST pointer records, never the value, so a
-- page's sizes cost nothing to add up.
coalesce(octet_length(r.arguments), 0) + coalesce(octet_length(r.context), 0) +
	octet_length(r.agent_reasoning) + octet_length(r.description) +
	coalesce(octet_length(r.command_input), 0) + coalesce(octet_length(r.command_observed), 0)

-- name: Requests.Summaries
-- A summary reads one character of the arguments more than it keeps
-- (airlock.ArgumentsHeadLen, 200), to tell whether more follow.
SELECT r.seq, r.id, r.instance_id, r.owner_id, r.state, r.kind, r.tool, r.title, r.session_id,
	r.created_at, r.deadline_at, r.decided_at, r.decided_by, r.note, r.answer, r.expires_at, r.question, r.command_method,
	left(r.arguments, 201), r.reviewers, r.approvals, r.approved_votes, r.purged_at IS NOT NULL, {{namesCols}} FROM requests r/*where*/ ORDER BY r.seq DESC LIMIT @candidates

-- name: Requests.Escalate
-- Escalate widens the due requests it locks (SKIP LOCKED: replicas
-- sweeping at once take disjoint rows, and a row a decision is writing is
-- left for the next sweep) to their escalation groups, once: the outer
-- WHERE repeats the condition on the locked row.
{{tick}}
, due AS (
	SELECT d.seq FROM requests d, tick
	WHERE d.state = 'pending' AND d.escalate_to <> '' AND d.escalated_at IS NULL
		AND d.created_at + d.escalate_after <= tick.now AND d.deadline_at > tick.now
	ORDER BY d.seq LIMIT @limit
	FOR UPDATE OF d SKIP LOCKED
)
UPDATE requests r
SET reviewers = r.reviewers || E'\n' || r.escalate_to, escalated_at = tick.now
FROM due, tick
WHERE r.seq = due.seq AND r.state = 'pending' AND r.escalated_at IS NULL
RETURNING r.id, r.instance_id, tick.now

-- name: Requests.ByKey
SELECT {{requestCols}} FROM requests r WHERE r.owner_id = @owner AND r.idempotency_key = @key

-- name: Requests.InstanceLive
SELECT EXISTS (SELECT 1 FROM instances
WHERE id = @instance AND owner_id = @owner AND deleted_at IS NULL)

-- name: Requests.List
WITH page AS (
	SELECT r.seq, {{storedBytes}} AS size FROM requests r/*where*/ ORDER BY r.seq DESC LIMIT @candidates
), cut AS (
	SELECT seq, row_number() OVER w AS n,
		coalesce(sum(size) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
	FROM page WINDOW w AS (ORDER BY seq DESC)
)
SELECT {{requestCols}}, (SELECT count(*) FROM page) FROM cut JOIN requests r ON r.seq = cut.seq
WHERE cut.n <= @limit AND cut.before < @budget
ORDER BY r.seq DESC

-- name: Requests.CommandOf
SELECT r.owner_id, r.command_method, r.command_input FROM requests r WHERE r.id = @id AND r.state = 'pending'

-- name: Requests.CommandToken
-- The requesting token FOR SHARE, so a revocation or a change of scopes
-- waits for the approval or goes first.
SELECT {{tokenCols}} FROM tokens t WHERE t.id = @id FOR SHARE

-- name: Requests.CommandItem
-- The command's target (for work_move, the item) FOR NO KEY UPDATE, so a
-- concurrent move waits or goes first.
SELECT {{workItemCols}} FROM work_items w WHERE w.id = @id FOR NO KEY UPDATE

-- name: Requests.MoveItem
UPDATE work_items w
SET column_key = @to, version = w.version + 1, updated_at = @now
WHERE w.id = @id AND w.column_key = @from
  AND EXISTS (SELECT 1 FROM board_columns c WHERE c.column_key = @to)
RETURNING {{workItemCols}}

-- name: Requests.ApplyCommand
UPDATE requests r
SET command_status = @status, command_detail = @detail, command_applied_at = @now
WHERE r.id = @id AND r.state = 'approved' AND r.command_status IS NULL
RETURNING {{requestCols}}

-- name: Requests.CountPending
SELECT count(*) FROM requests WHERE state = 'pending'

-- name: Requests.Events
SELECT id, type, at, actor, request_id, instance_id, token_id, state, subject, policy_hash, uid, trace_id, span_id
FROM events WHERE id > @after AND id <= @upto ORDER BY id LIMIT @limit

-- name: Requests.CreatedEvent
SELECT id, type, at, actor, request_id, instance_id, token_id, state, subject, policy_hash, uid, trace_id, span_id
FROM events WHERE request_id = @id AND request_id <> '' AND type = 'request.created' ORDER BY id LIMIT 1
