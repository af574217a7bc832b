package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
)

// requestCols is the column list every request query selects or returns,
// in the order scanRequest reads.
const requestCols = `r.seq, r.id, r.instance_id, r.owner_id, r.state, r.kind, r.tool, r.arguments, r.timeout,
	r.agent_reasoning, r.context, r.created_at, r.deadline_at,
	r.decided_at, r.decided_by, r.note, r.answer, r.expires_at,
	r.claimed_at, r.claimed_by, r.exec_status, r.finished_at, r.exec_detail,
	r.idempotency_key, r.fingerprint, r.title, r.description, r.target_type, r.target_id, r.session_id,
	r.proposal_mode, r.command_method, r.command_input, r.question,
	r.command_observed, r.command_status, r.command_detail, r.command_applied_at,
	r.reviewers, r.approvals, r.escalate_to, r.escalate_after, r.escalated_at,
	` + namesCols

// namesCols are the names people read a request by, looked up with it
// (each by primary key): its instance's, its creator token's and its
// deciding token's, or for a decider with no token (an OIDC reviewer) its
// name in the reviewer directory. Every query that selects requestCols names the table r.
const namesCols = `(SELECT i.name FROM instances i WHERE i.id = r.instance_id) AS instance_name,
	(SELECT t.name FROM tokens t WHERE t.id = r.owner_id) AS owner_name,
	coalesce((SELECT t.name FROM tokens t WHERE t.id = r.decided_by),
		(SELECT p.name FROM reviewer_profiles p WHERE p.principal = r.decided_by)) AS decided_by_name`

// lockedTickCTE starts a compare-and-set on the request @id: it locks the
// row, and only then reads the clock. Under READ COMMITTED an UPDATE that
// meets a row locked by another writer waits for it; a clock read before
// that wait could be stale by the wait, and a decision checked against it
// could commit after the deadline (say the other writer was a replica that
// froze mid-transaction and was rolled back a minute later). Read after the
// lock, the instant a change is judged and stamped by is at most the few
// statements before its COMMIT old. The UPDATE then re-checks its WHERE
// against the row as the last writer left it, so a loser finds the row no
// longer in the state it starts from.
const lockedTickCTE = `WITH locked AS MATERIALIZED (SELECT l.id FROM requests l WHERE l.id = @id FOR UPDATE),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM locked)
`

// The compare-and-set writes of the lifecycle. Each changes a row only if
// it is still in the state the change starts from, judged against the
// statement's one reading of the clock (tick.now), and returns the row and
// that instant; zero rows means another change won (or the request does
// not exist), and the caller reads what holds.
const (
	// decideSQL returns, after the instant, the principal of the token
	// that created the request, for DecideParams.Check.
	decideSQL = lockedTickCTE + `UPDATE requests r
SET ` + voteSetSQL + `
FROM tick
WHERE r.id = @id AND r.state = 'pending' AND r.deadline_at > tick.now
RETURNING ` + requestCols + `, tick.now, ` + creatorPrincipalCol

	// approvePlainSQL is decideSQL for a request that proposes no command
	// (command_method never changes): it locks the row only then, so that
	// for a command proposal it takes no lock and changes nothing, and
	// the command's locks (lockCommand) can still come first.
	approvePlainSQL = `WITH locked AS MATERIALIZED (SELECT l.id FROM requests l WHERE l.id = @id AND l.command_method IS NULL FOR UPDATE),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM locked)
UPDATE requests r
SET ` + voteSetSQL + `
FROM tick
WHERE r.id = @id AND r.state = 'pending' AND r.deadline_at > tick.now
RETURNING ` + requestCols + `, tick.now, ` + creatorPrincipalCol

	// decideOnceSQL decides a request that needs nothing besides its
	// decision: no command to apply, no question to answer, no session to
	// instruct, and not created by a token of the deciding reviewer's
	// principal (what DecideParams.Check refuses, checked here in SQL).
	// It appends the decision's event in the same statement, taking the
	// events lock after the row's lock as createPendingSQL does, so such a
	// decision is one pipeline, [BEGIN, decideOnceSQL, COMMIT], one round
	// trip (decideOnce). Any other request it leaves as it is, for
	// Decide's general path, which also says why a decision is refused.
	decideOnceSQL = lockedTickCTE + `, upd AS (UPDATE requests r
SET state = @state, decided_at = tick.now, decided_by = @actor, note = @note, answer = '',
	expires_at = tick.now + @validity::interval
FROM tick
WHERE r.id = @id AND r.state = 'pending' AND r.deadline_at > tick.now AND coalesce(r.session_id, '') = ''
	AND r.reviewers = '' AND r.approvals <= 1
	AND (@state::text = 'denied' OR (r.question IS NULL AND r.command_method IS NULL))
	AND (@principal::text = '' OR coalesce(` + creatorPrincipalCol + `, '') <> @principal::text)
RETURNING ` + requestCols + `, tick.now AS decided_now),
gate AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(@class, @lock) FROM upd),
ev AS (INSERT INTO events (type, at, actor, request_id, instance_id, state)
	SELECT @event::text, upd.decided_now, @actor::text, upd.id, upd.instance_id, upd.state FROM upd, gate)
SELECT * FROM upd`

	// voteSetSQL is the SET of decideSQL and approvePlainSQL. It counts an
	// approval (approved_votes) and ends the request only when the
	// decision decides (decidesSQL): a denial, or the approval that
	// completes the approvals needed (1 for most requests). Otherwise the
	// decision is one more vote and the request stays pending. SET reads
	// the row as the last writer left it (the row is locked first), so
	// votes on any replica are counted one after the other.
	voteSetSQL = `approved_votes = r.approved_votes + CASE WHEN @state::text = 'approved' AND r.approvals > 1 THEN 1 ELSE 0 END,
	state = CASE WHEN ` + decidesSQL + ` THEN @state::text ELSE r.state END,
	decided_at = CASE WHEN ` + decidesSQL + ` THEN tick.now END,
	decided_by = CASE WHEN ` + decidesSQL + ` THEN @actor::text END,
	note = CASE WHEN ` + decidesSQL + ` THEN @note::text ELSE r.note END,
	answer = CASE WHEN ` + decidesSQL + ` THEN @answer::text ELSE r.answer END,
	expires_at = CASE WHEN ` + decidesSQL + ` THEN tick.now + @validity::interval END`

	// decidesSQL tells, in voteSetSQL, whether a decision ends the request.
	decidesSQL = `(@state::text = 'denied' OR r.approved_votes + 1 >= r.approvals)`

	// insertVoteSQL records a vote; a principal's second vote on a request
	// inserts nothing. It runs after the decision's write, which holds the
	// request's row lock, so one request's votes are inserted one at a time.
	insertVoteSQL = `INSERT INTO votes (request_id, principal, actor, status, note, at)
VALUES (@id, @principal, @actor, @state, @note, @at)
ON CONFLICT (request_id, principal) DO NOTHING`

	// selectVotesSQL reads a request's votes in the order they were cast,
	// with the names of the tokens they came through.
	selectVotesSQL = `SELECT v.principal, v.actor, coalesce((SELECT t.name FROM tokens t WHERE t.id = v.actor), (SELECT p.name FROM reviewer_profiles p WHERE p.principal = v.actor)), v.status, v.note, v.at
FROM votes v WHERE v.request_id = $1 ORDER BY v.seq`

	// creatorPrincipalCol is the principal of the token that created r,
	// NULL when that token is unknown.
	creatorPrincipalCol = `(SELECT t.principal FROM tokens t WHERE t.id = r.owner_id)`

	cancelSQL = lockedTickCTE + `UPDATE requests r
SET state = 'cancelled', decided_at = tick.now, decided_by = @actor
FROM tick
WHERE r.id = @id AND r.owner_id = @actor AND r.state = 'pending' AND r.deadline_at > tick.now
RETURNING ` + requestCols + `, tick.now`

	// An expired request's decision is dated at its deadline, not at
	// whenever the store noticed: "expired" means no decision came before
	// then, and the date does not depend on the scheduler's latency.
	expireOneSQL = lockedTickCTE + `UPDATE requests r
SET state = 'expired', decided_at = r.deadline_at, decided_by = @actor
FROM tick
WHERE r.id = @id AND r.state = 'pending' AND r.deadline_at <= tick.now
RETURNING ` + requestCols + `, tick.now`

	// expireDueSQL locks the due rows it picks with SKIP LOCKED: replicas
	// sweeping at once take disjoint rows and never wait for each other,
	// and a row a decision is writing right now is left to that decision
	// (it re-checks the deadline itself). The outer WHERE repeats the
	// condition on the locked row. It returns only expiredCols.
	//
	// It takes the earliest second of deadlines first, and within one
	// second the requests in creation order (requests_pending_by_second,
	// migration 0003), so that the rows a sweep rewrites are neighbours in
	// the heap. The first condition on the deadline is the index's range,
	// the second picks the due entries of the current second.
	expireDueSQL = tickCTE + `, due AS (
	SELECT d.seq FROM requests d
	WHERE d.state = 'pending'
		AND ` + deadlineSecond + ` <= date_trunc('second', (SELECT now FROM tick) AT TIME ZONE 'UTC')
		AND d.deadline_at <= (SELECT now FROM tick)
	ORDER BY ` + deadlineSecond + `, d.seq
	LIMIT @limit
	FOR UPDATE SKIP LOCKED
)
UPDATE requests r
SET state = 'expired', decided_at = r.deadline_at, decided_by = @actor
FROM due, tick
WHERE r.seq = due.seq AND r.state = 'pending' AND r.deadline_at <= tick.now
RETURNING ` + expiredCols + `, tick.now`

	// expireByIDSQL is expireDueSQL for the due requests among @ids
	// (ExpireRequests). It waits for rows another transaction holds (a
	// sweep's, a decision's) rather than skipping them, so that once it
	// returns each of them is settled; it locks them in seq order, so two
	// such expiries never deadlock.
	expireByIDSQL = tickCTE + `, due AS (
	SELECT d.seq FROM requests d
	WHERE d.id = ANY(@ids) AND d.state = 'pending' AND d.deadline_at <= (SELECT now FROM tick)
	ORDER BY d.seq
	FOR UPDATE
)
UPDATE requests r
SET state = 'expired', decided_at = r.deadline_at, decided_by = @actor
FROM due, tick
WHERE r.seq = due.seq AND r.state = 'pending' AND r.deadline_at <= tick.now
RETURNING ` + expiredCols + `, tick.now`

	// deadlineSecond is the UTC second of d's deadline, the first column
	// of requests_pending_by_second (the expression must match it).
	deadlineSecond = `date_trunc('second', d.deadline_at AT TIME ZONE 'UTC')`

	// nextDeadlineSQL finds the earliest second with a pending deadline
	// (the first entry of requests_pending_by_second), then the earliest
	// deadline among that second's entries.
	nextDeadlineSQL = `SELECT min(d.deadline_at) FROM requests d
WHERE d.state = 'pending' AND ` + deadlineSecond + ` = (
	SELECT ` + deadlineSecond + ` FROM requests d WHERE d.state = 'pending' ORDER BY 1 LIMIT 1)`

	// expiredCols is what ExpireDue returns of each request it expired, in
	// the order scanExpired reads: its identity, deadline and decision.
	expiredCols = `r.seq, r.id, r.instance_id, r.owner_id, r.session_id, r.state, r.deadline_at, r.decided_at, r.decided_by`

	claimSQL = lockedTickCTE + `UPDATE requests r
SET claimed_at = tick.now, claimed_by = @actor, exec_status = 'claimed'
FROM tick
WHERE r.id = @id AND r.owner_id = @actor AND r.state = 'approved' AND r.claimed_at IS NULL AND r.expires_at > tick.now
RETURNING ` + requestCols + `, tick.now`

	reportSQL = lockedTickCTE + `UPDATE requests r
SET exec_status = @status, finished_at = tick.now, exec_detail = @detail
FROM tick
WHERE r.id = @id AND r.owner_id = @actor AND r.exec_status = 'claimed'
RETURNING ` + requestCols + `, tick.now`

	selectRequestSQL = `SELECT ` + requestCols + ` FROM requests r WHERE r.id = @id`

	// createSQL inserts a request for a live instance of its owner, or
	// yields to an existing row with the same owner and key. It locks the
	// instance row FOR SHARE, and reads the clock after that lock.
	// DeleteInstance locks that row FOR UPDATE first, so a create and a
	// delete of one instance serialize: either the create commits first and
	// the delete (whose later statements see it) cancels the new request, or
	// the delete commits first and the create, which re-checks deleted_at
	// after waiting, finds no live instance. The foreign key alone takes only
	// a KEY SHARE lock, which does not conflict with the delete's UPDATE, and
	// would let a pending request be born on a deleted instance.
	createSQL = createInsertSQL + `
RETURNING ` + requestCols

	// createPendingSQL is createSQL for a pending request, with its
	// "created" event appended by the same statement, so that a create is
	// one pipeline, [BEGIN, createPendingSQL, COMMIT], one round trip
	// (CreateRequest). The events lock is taken from the inserted row
	// (gate reads ins), so after the statement's row locks (the
	// instance's, the idempotency key's), as appendSQL takes it after a
	// transaction's; and the event's ID is drawn once it is held (ev reads
	// gate). A conflict inserts nothing, so no event.
	createPendingSQL = `WITH ins AS (` + createInsertSQL + `
RETURNING ` + requestCols + `),
gate AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(@class, @lock) FROM ins),
ev AS (INSERT INTO events (type, at, actor, request_id, instance_id, state)
	SELECT @event::text, ins.created_at, @actor::text, ins.id, ins.instance_id, ins.state FROM ins, gate)
SELECT * FROM ins`

	createInsertSQL = `WITH inst AS MATERIALIZED (
	SELECT i.id, i.owner_id FROM instances i
	WHERE i.id = @instance AND i.owner_id = @owner AND i.deleted_at IS NULL
	FOR SHARE
),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM inst)
INSERT INTO requests AS r (
	id, instance_id, owner_id, state, kind, tool, arguments, timeout, agent_reasoning, context,
	created_at, deadline_at, decided_at, decided_by, note, expires_at,
	idempotency_key, fingerprint, title, description, target_type, target_id, session_id,
	proposal_mode, command_method, command_input, question, command_observed, reviewers, approvals, escalate_to, escalate_after)
SELECT @id::text, inst.id, inst.owner_id, @state::text, @kind::text, @tool::text, @arguments::text, @timeout::text,
	@reasoning::text, @context::text,
	tick.now, tick.now + @window::interval,
	CASE WHEN @decided::boolean THEN tick.now END, @decided_by::text, @note::text, tick.now + @validity::interval,
	@key::text, @fingerprint::text, @title::text, @description::text, @target_type::text, @target_id::text, @session_id::text,
	@mode::text, @method::text, @input::text, @question::text, @observed::text, @reviewers::text, @approvals::integer,
	@escalate_to::text, @escalate_after::interval
FROM inst, tick
WHERE @unless_granted::text IS NULL OR NOT EXISTS (` + grantMayCoverSQL + `)
ON CONFLICT (owner_id, idempotency_key) DO NOTHING`
)

// scanRequest reads one row of requestCols, then into extra.
func scanRequest(row pgx.Row, extra ...any) (airlock.Request, error) {
	var (
		r                                           airlock.Request
		state, kind                                 string
		args, rctx, cmdInput, observed              []byte // read once into their final bytes: arguments reach a mebibyte
		decidedAt, expiresAt, claimedAt, finishedAt *time.Time
		decidedBy, claimedBy, execStatus, key       *string
		mode, method, question, cmdStatus           *string
		note, answer, detail, cmdDetail             string
		cmdAppliedAt                                *time.Time
		instName, ownerName, deciderName            *string
		reviewers, escalateTo                       string
		escalateAfter                               time.Duration
		escalatedAt                                 *time.Time
	)
	dest := []any{&r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &state, &kind, &r.Tool, &args, &r.Timeout,
		&r.AgentReasoning, &rctx, &r.CreatedAt, &r.DeadlineAt,
		&decidedAt, &decidedBy, &note, &answer, &expiresAt,
		&claimedAt, &claimedBy, &execStatus, &finishedAt, &detail,
		&key, &r.Fingerprint, &r.Title, &r.Description, &r.TargetType, &r.TargetID, &r.SessionID,
		&mode, &method, &cmdInput, &question,
		&observed, &cmdStatus, &cmdDetail, &cmdAppliedAt,
		&reviewers, &r.Approvals, &escalateTo, &escalateAfter, &escalatedAt,
		&instName, &ownerName, &deciderName}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return airlock.Request{}, err
	}
	r.State, r.Kind = airlock.State(state), airlock.Kind(kind)
	r.Arguments, r.Context = args, rctx
	r.CreatedAt, r.DeadlineAt = r.CreatedAt.UTC(), r.DeadlineAt.UTC()
	if key != nil {
		r.IdempotencyKey = *key
	}
	r.InstanceName, r.OwnerName = deref(instName), deref(ownerName)
	r.Reviewers = airlock.SplitGroups(reviewers)
	r.EscalateTo, r.EscalateAfter, r.EscalatedAt = airlock.SplitGroups(escalateTo), escalateAfter, utc(escalatedAt)
	if decidedAt != nil {
		r.Decision = sqlcore.Decision(r.State, note, answer, decidedAt.UTC(), deref(decidedBy), deref(deciderName), utc(expiresAt))
	}
	if claimedAt != nil {
		r.Execution = sqlcore.Execution(claimedAt.UTC(), deref(claimedBy), deref(execStatus), utc(finishedAt), detail)
	}
	r.Proposal = sqlcore.Proposal(deref(mode), mode != nil, deref(method), method != nil, cmdInput, observed)
	if cmdStatus != nil && cmdAppliedAt != nil {
		r.CommandResult = &airlock.CommandResult{Status: *cmdStatus, Detail: cmdDetail, AppliedAt: cmdAppliedAt.UTC()}
	}
	q, err := sqlcore.Question(r.ID, deref(question), question != nil)
	if err != nil {
		return airlock.Request{}, err
	}
	r.Question = q
	return r, nil
}

// scanStamped reads a write's RETURNING row: the request and the instant
// the statement judged it by.
func scanStamped(row pgx.Row) (airlock.Request, time.Time, error) {
	var at time.Time
	r, err := scanRequest(row, &at)
	return r, at.UTC(), err
}

// raw reads stored JSON text back as its exact bytes; NULL is absent (nil).
func raw(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// CreateRequest creates a request in one INSERT … SELECT (createSQL) that
// finds the instance and yields to an existing row with the same owner and
// idempotency key. Zero rows inserted then means a replay, a conflict or a
// missing instance, told apart by reading the key's row. An empty key makes
// no replay: the request is always new.
func (s *Store) CreateRequest(ctx context.Context, p store.NewRequestParams) (airlock.Request, bool, error) {
	p, cols, err := sqlcore.NewRequest("postgres", p)
	if err != nil {
		return airlock.Request{}, false, err
	}
	in := p.Request
	state, decided, decidedBy, note := airlock.StatePending, false, any(nil), ""
	var validity any
	if d := p.Initial; d != nil {
		state, decided, decidedBy, note = d.Status, true, d.DecidedBy, d.Note
		if d.Status == airlock.StateApproved {
			validity = d.Validity
		}
	}

	var (
		out     airlock.Request
		created bool
	)
	args := named{
		"now": s.now(), "id": in.ID, "instance": in.InstanceID, "owner": in.OwnerID,
		"state": string(state), "kind": string(in.Kind), "tool": in.Tool,
		"arguments": sqlcore.Text(in.Arguments), "timeout": in.Timeout,
		"reasoning": in.AgentReasoning, "context": sqlcore.Text(in.Context),
		"window": p.Window, "decided": decided, "decided_by": decidedBy, "note": note, "validity": validity,
		"key": sqlcore.NullString(in.IdempotencyKey), "fingerprint": in.Fingerprint,
		"title": in.Title, "description": in.Description,
		"target_type": in.TargetType, "target_id": in.TargetID, "session_id": in.SessionID,
		"mode": cols.Mode, "method": cols.Method, "input": cols.Input, "question": cols.Question, "observed": cols.Observed,
		"reviewers": airlock.JoinGroups(in.Reviewers), "approvals": in.Approvals,
		"escalate_to": airlock.JoinGroups(in.EscalateTo), "escalate_after": in.EscalateAfter,
		"unless_granted": nil,
	}
	if p.UnlessGranted != nil {
		args["unless_granted"] = p.UnlessGranted.Principal
	}
	if p.Initial == nil && p.Grant == nil {
		// A pending request: one round trip, the insert and its event sent
		// with COMMIT. Nothing inserted (a replay, a conflict, no such
		// instance) committed nothing, and is told apart below.
		args["class"], args["lock"] = advisoryClass, s.eventsLock
		args["event"], args["actor"] = string(airlock.EventRequestCreated), p.Actor
		err = s.write(ctx, func(ctx context.Context, t *tx) error {
			out, created = airlock.Request{}, false
			t.changed = append(t.changed, in.ID)
			t.last = &lastStatement{sql: createPendingSQL, args: args, scan: func(row pgx.Row) error {
				r, err := scanRequest(row)
				switch {
				case errors.Is(err, pgx.ErrNoRows):
					return nil
				case err != nil:
					return err
				}
				out, created = r, true
				return nil
			}}
			return nil
		})
	} else {
		err = s.write(ctx, func(ctx context.Context, t *tx) error {
			out, created = airlock.Request{}, false
			d, args := p.Initial, args
			if p.Grant != nil {
				var err error
				if d, err = s.useGrant(ctx, t, p.Grant, in); err != nil {
					return err
				}
				args = maps.Clone(args)
				if d != nil {
					args["state"], args["decided"], args["decided_by"], args["validity"] = string(d.Status), true, d.DecidedBy, d.Validity
				}
			}
			r, err := scanRequest(t.QueryRow(ctx, createSQL, args))
			switch {
			case err == nil:
				out, created = r, true
				t.requestEvent(airlock.EventRequestCreated, p.Actor, r.CreatedAt, r)
				if r.State.Terminal() {
					t.policyEvent(airlock.StateEvent(r.State), d, r)
				}
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
			if p.Grant != nil && d != nil {
				return errGrantUnused
			}
			return nil
		})
		if errors.Is(err, errGrantUnused) {
			err = nil
		}
	}
	switch {
	case err != nil:
		return airlock.Request{}, false, translate(err, "request", in.ID)
	case created:
		return out, true, nil
	}
	out, err = s.notCreated(ctx, p)
	return out, false, translate(err, "request", in.ID)
}

// notCreated tells why a create inserted nothing: an earlier request of
// the same owner and idempotency key exists, which is the answer when the
// call is the same (a replay) and idempotency_conflict when it is not; or
// there is no live instance of the owner's to create it in. A conflicting
// row the insert saw was committed, so this later read sees it too.
func (s *Store) notCreated(ctx context.Context, p store.NewRequestParams) (airlock.Request, error) {
	in := p.Request
	if in.IdempotencyKey != "" {
		prev, err := scanRequest(s.queryRow(ctx, `SELECT `+requestCols+` FROM requests r WHERE r.owner_id = @owner AND r.idempotency_key = @key`,
			named{"owner": in.OwnerID, "key": in.IdempotencyKey}))
		switch {
		case err == nil:
			return p.Replay(prev)
		case !errors.Is(err, pgx.ErrNoRows):
			return airlock.Request{}, err
		}
	}
	if p.UnlessGranted != nil {
		// The instance may be live: then a grant could cover the request.
		var live bool
		if err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM instances
WHERE id = @instance AND owner_id = @owner AND deleted_at IS NULL)`, named{"instance": in.InstanceID, "owner": in.OwnerID}).Scan(&live); err != nil {
			return airlock.Request{}, err
		}
		if live {
			return airlock.Request{}, store.ErrGrantMayCover
		}
	}
	return airlock.Request{}, airlock.NotFound("instance", in.InstanceID)
}

// GetRequest reads a request.
func (s *Store) GetRequest(ctx context.Context, id string) (airlock.Request, error) {
	r, err := scanRequest(s.queryRow(ctx, selectRequestSQL, named{"id": id}))
	if err == nil && r.NeedsQuorum() {
		r.Votes, err = s.readVotes(ctx, id)
	}
	return r, translate(err, "request", id)
}

// readVotes reads request id's votes, in the order they were cast.
func (s *Store) readVotes(ctx context.Context, id string) ([]airlock.Vote, error) {
	rows, err := s.query(ctx, selectVotesSQL, id)
	if err != nil {
		return nil, err
	}
	return scanVotes(rows)
}

// scanVotes reads the rows of selectVotesSQL and closes them.
func scanVotes(rows pgx.Rows) ([]airlock.Vote, error) {
	defer rows.Close()
	var out []airlock.Vote
	for rows.Next() {
		var (
			v      airlock.Vote
			name   *string
			status string
		)
		if err := rows.Scan(&v.Principal, &v.Actor, &name, &status, &v.Note, &v.At); err != nil {
			return nil, err
		}
		v.Status, v.Name, v.At = airlock.State(status), airlock.DeciderName(v.Actor, deref(name)), v.At.UTC()
		out = append(out, v)
	}
	return out, rows.Err()
}

// storedBytesSQL is airlock.Request.StoredBytes in SQL. octet_length of
// a text reads the size its TOAST pointer records, never the value, so a
// page's sizes cost nothing to add up.
const storedBytesSQL = `coalesce(octet_length(r.arguments), 0) + coalesce(octet_length(r.context), 0) +
	octet_length(r.agent_reasoning) + octet_length(r.description) +
	coalesce(octet_length(r.command_input), 0) + coalesce(octet_length(r.command_observed), 0)`

// summaryCols is the column list of a request summary, in the order
// scanSummary reads.
// It reads one character of the arguments more than a summary keeps
// (airlock.ArgumentsHeadLen, 200), to tell whether more follow.
const summaryCols = `r.seq, r.id, r.instance_id, r.owner_id, r.state, r.kind, r.tool, r.title, r.session_id,
	r.created_at, r.deadline_at, r.decided_at, r.decided_by, r.note, r.answer, r.expires_at, r.question, r.command_method,
	left(r.arguments, 201), r.reviewers, r.approvals, r.approved_votes, ` + namesCols

// ListRequests lists requests matching f, newest first. One statement
// picks the page by seq and the stored size of each candidate (cut), and
// reads the columns of only the requests that fit it: up to the limit and
// until the sizes before a request reach f.MaxBytes. It also counts the
// candidates, one more than the limit at most, to tell whether more follow.
func (s *Store) ListRequests(ctx context.Context, f store.RequestFilter) ([]airlock.Request, bool, error) {
	where, args, err := listWhere(f)
	if err != nil {
		return nil, false, err
	}
	limit := f.PageSize()
	args["limit"], args["candidates"], args["budget"] = limit, limit+1, int64(math.MaxInt64)
	if f.MaxBytes > 0 {
		args["budget"] = int64(f.MaxBytes)
	}
	q := `WITH page AS (
	SELECT r.seq, ` + storedBytesSQL + ` AS size FROM requests r` + where + ` ORDER BY r.seq DESC LIMIT @candidates
), cut AS (
	SELECT seq, row_number() OVER w AS n,
		coalesce(sum(size) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
	FROM page WINDOW w AS (ORDER BY seq DESC)
)
SELECT ` + requestCols + `, (SELECT count(*) FROM page) FROM cut JOIN requests r ON r.seq = cut.seq
WHERE cut.n <= @limit AND cut.before < @budget
ORDER BY r.seq DESC`
	rows, err := checked{s}.Query(ctx, q, args)
	if err != nil {
		return nil, false, translate(err, "requests", "list")
	}
	defer rows.Close()
	var (
		out   []airlock.Request
		found int64
	)
	for rows.Next() {
		r, err := scanRequest(rows, &found)
		if err != nil {
			return nil, false, translate(err, "requests", "list")
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, translate(err, "requests", "list")
	}
	rows.Close()
	if err := s.fillVotes(ctx, out); err != nil {
		return nil, false, translate(err, "votes", "list")
	}
	return out, found > int64(len(out)), nil
}

// fillVotes reads, in one query, the votes of those of rs that need
// several approvals.
func (s *Store) fillVotes(ctx context.Context, rs []airlock.Request) error {
	ids, at := airlock.QuorumRequests(rs)
	if len(ids) == 0 {
		return nil
	}
	rows, err := s.query(ctx, `SELECT v.request_id, v.principal, v.actor, coalesce((SELECT t.name FROM tokens t WHERE t.id = v.actor), (SELECT p.name FROM reviewer_profiles p WHERE p.principal = v.actor)), v.status, v.note, v.at
FROM votes v WHERE v.request_id = ANY($1) ORDER BY v.seq`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, status string
			v          airlock.Vote
			name       *string
		)
		if err := rows.Scan(&id, &v.Principal, &v.Actor, &name, &status, &v.Note, &v.At); err != nil {
			return err
		}
		v.Status, v.Name, v.At = airlock.State(status), airlock.DeciderName(v.Actor, deref(name)), v.At.UTC()
		rs[at[id]].Votes = append(rs[at[id]].Votes, v)
	}
	return rows.Err()
}

// ListRequestSummaries lists requests matching f as summaries, newest
// first, reading only summaryCols.
func (s *Store) ListRequestSummaries(ctx context.Context, f store.RequestFilter) ([]airlock.RequestSummary, bool, error) {
	where, args, err := listWhere(f)
	if err != nil {
		return nil, false, err
	}
	limit := f.PageSize()
	args["candidates"] = limit + 1
	out, err := queryAll(ctx, checked{s}, scanSummary, `SELECT `+summaryCols+` FROM requests r`+where+` ORDER BY r.seq DESC LIMIT @candidates`, args)
	if err != nil {
		return nil, false, translate(err, "requests", "list")
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// listWhere is the WHERE clause, with its named arguments, that selects
// f's requests (sqlcore.RequestFilterConds); empty when f selects every
// request.
func listWhere(f store.RequestFilter) (string, named, error) {
	if err := f.Validate(); err != nil {
		return "", nil, err
	}
	var (
		where strings.Builder
		sep   = ` WHERE `
	)
	args := named{}
	sqlcore.RequestFilterConds(f, func(column, op, name string, arg any) {
		for _, part := range [...]string{sep, "r.", column, " ", op, " @", name} {
			where.WriteString(part)
		}
		sep, args[name] = ` AND `, arg
	})
	return where.String(), args, nil
}

// scanSummary reads one row of summaryCols.
func scanSummary(row pgx.Row) (airlock.RequestSummary, error) {
	var (
		r                           airlock.RequestSummary
		state, kind                 string
		decidedAt, expiresAt        *time.Time
		decidedBy, question, method *string
		head                        *string
		names                       [3]*string
		note, answer, reviewers     string
	)
	if err := row.Scan(&r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &state, &kind, &r.Tool, &r.Title, &r.SessionID,
		&r.CreatedAt, &r.DeadlineAt, &decidedAt, &decidedBy, &note, &answer, &expiresAt, &question, &method,
		&head, &reviewers, &r.Approvals, &r.ApprovedVotes, &names[0], &names[1], &names[2]); err != nil {
		return airlock.RequestSummary{}, err
	}
	r.Reviewers = airlock.SplitGroups(reviewers)
	r.State, r.Kind = airlock.State(state), airlock.Kind(kind)
	r.CreatedAt, r.DeadlineAt = r.CreatedAt.UTC(), r.DeadlineAt.UTC()
	r.CommandMethod = deref(method)
	r.ArgumentsHead, r.ArgumentsCut = airlock.ArgumentsHead(deref(head))
	r.InstanceName, r.OwnerName = deref(names[0]), deref(names[1])
	if decidedAt != nil {
		r.Decision = sqlcore.Decision(r.State, note, answer, decidedAt.UTC(), deref(decidedBy), deref(names[2]), utc(expiresAt))
	}
	q, err := sqlcore.Question(r.ID, deref(question), question != nil)
	if err != nil {
		return airlock.RequestSummary{}, err
	}
	r.Question = q
	return r, nil
}

// Decide records a reviewer's decision with one compare-and-set.
func (s *Store) Decide(ctx context.Context, p store.DecideParams) (airlock.Request, error) {
	if err := p.Validate(); err != nil {
		return airlock.Request{}, err
	}
	var validity any
	if p.Status == airlock.StateApproved {
		validity = p.Validity
	}
	if p.Answer == "" {
		r, ok, err := s.decideOnce(ctx, p, validity)
		if err != nil || ok {
			return r, translate(err, "request", p.ID)
		}
	}
	st := step{check: p.Check, vote: func(ctx context.Context, t *tx, r airlock.Request, at time.Time) (airlock.Request, error) {
		if !r.NeedsQuorum() {
			return r, nil
		}
		tag, err := t.Exec(ctx, insertVoteSQL, named{"id": r.ID, "principal": p.VotePrincipal(), "actor": p.Actor,
			"state": string(p.Status), "note": p.Note, "at": at})
		if err != nil {
			return r, err
		}
		if tag.RowsAffected() == 0 {
			return r, r.DuplicateVote(p.VotePrincipal())
		}
		rows, err := t.Query(ctx, selectVotesSQL, r.ID)
		if err != nil {
			return r, err
		}
		r.Votes, err = scanVotes(rows)
		return r, err
	}}
	if p.Status == airlock.StateApproved {
		// An approval runs the request's command, if it proposes one, in
		// its transaction. Most requests propose none: approvePlainSQL
		// approves those in one statement, and the rest take the path
		// that locks the command's rows first.
		st.plain = approvePlainSQL
		var locked *lockedCommand
		st.lock = func(ctx context.Context, t *tx) (err error) {
			locked, err = s.lockCommand(ctx, t, p.ID)
			return err
		}
		st.then = func(ctx context.Context, t *tx, r airlock.Request, at time.Time) (airlock.Request, error) {
			return s.applyApprovedCommand(ctx, t, locked, r, at)
		}
	}
	return s.transitionThen(ctx, p.ID, p.Actor, airlock.StateEvent(p.Status), decideSQL, named{
		"id": p.ID, "state": string(p.Status), "actor": p.Actor, "note": p.Note, "answer": p.Answer, "validity": validity,
	}, st, airlock.Request.DecisionConflict)
}

// decideOnce tries decideOnceSQL, in one round trip. It reports whether it
// decided; when it did not, nothing changed, and the request needs
// Decide's general path. That costs a decision the fast path cannot take
// one more round trip, paid only by requests with a command, a question
// or a session, and by refusals.
func (s *Store) decideOnce(ctx context.Context, p store.DecideParams, validity any) (r airlock.Request, ok bool, err error) {
	args := named{
		"now": s.now(), "id": p.ID, "state": string(p.Status), "actor": p.Actor, "note": p.Note, "validity": validity,
		"principal": p.Principal, "class": advisoryClass, "lock": s.eventsLock, "event": string(airlock.StateEvent(p.Status)),
	}
	err = s.write(ctx, func(ctx context.Context, t *tx) error {
		r, ok = airlock.Request{}, false
		t.changed = append(t.changed, p.ID)
		t.last = &lastStatement{sql: decideOnceSQL, args: args, scan: func(row pgx.Row) error {
			got, _, err := scanStamped(row)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return nil
			case err != nil:
				return err
			}
			r, ok = got, true
			return nil
		}}
		return nil
	})
	return r, ok, err
}

// escalateDueSQL widens the due requests it locks (SKIP LOCKED: replicas
// sweeping at once take disjoint rows, and a row a decision is writing is
// left for the next sweep) to their escalation groups, once: the outer
// WHERE repeats the condition on the locked row.
const escalateDueSQL = tickCTE + `, due AS (
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
RETURNING r.id, r.instance_id, tick.now`

// EscalateDue widens the requests whose escalation is due, once across
// replicas, and appends request.escalated for each.
func (s *Store) EscalateDue(ctx context.Context, limit int) ([]string, error) {
	limit = store.Batch(limit)
	var ids []string
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		rows, err := t.Query(ctx, escalateDueSQL, named{"now": s.now(), "limit": limit})
		if err != nil {
			return err
		}
		ids, err = t.pendingEvents(rows, airlock.EventRequestEscalated, airlock.ActorEscalation)
		t.changed = append(t.changed, ids...)
		return err
	})
	return ids, translate(err, "requests", "escalate")
}

// pendingEvents appends an event of typ by actor for each row of rows —
// a pending request's ID, its instance's and the time — and returns the
// requests' IDs. It closes rows.
func (t *tx) pendingEvents(rows pgx.Rows, typ airlock.EventType, actor string) ([]string, error) {
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var (
			id, inst string
			at       time.Time
		)
		if err := rows.Scan(&id, &inst, &at); err != nil {
			return ids, err
		}
		t.event(airlock.Event{Type: typ, At: at.UTC(), Actor: actor, RequestID: id, InstanceID: inst, State: airlock.StatePending})
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Cancel withdraws a pending request with one compare-and-set.
func (s *Store) Cancel(ctx context.Context, id, actor string) (airlock.Request, error) {
	return s.transition(ctx, id, actor, airlock.EventRequestCancelled, cancelSQL,
		named{"id": id, "actor": actor}, airlock.OwnerOnly(actor, airlock.Request.DecisionConflict))
}

// ClaimExecution claims the one execution attempt with one compare-and-set.
func (s *Store) ClaimExecution(ctx context.Context, id, actor string) (airlock.Request, error) {
	return s.transition(ctx, id, actor, airlock.EventExecutionClaimed, claimSQL,
		named{"id": id, "actor": actor}, airlock.OwnerOnly(actor, airlock.Request.ClaimConflict))
}

// transition runs one compare-and-set (casSQL with args) on request id and
// appends an event of type event by actor. When it changes no row, another
// change won: transition settles the row (expiring it if it is pending past
// its deadline — itself a compare-and-set) and returns refuse's error for
// what holds. The settling commits even though the call is refused, so a
// request refused for its deadline is expired from then on.
func (s *Store) transition(ctx context.Context, id, actor string, event airlock.EventType,
	casSQL string, args named, refuse func(airlock.Request) *airlock.Error,
) (airlock.Request, error) {
	return s.transitionThen(ctx, id, actor, event, casSQL, args, step{}, refuse)
}

// step is work a transition does in its transaction besides its
// compare-and-set: lock, when set, runs before it, to take the row locks
// the change will need before the compare-and-set reads the clock; then,
// when set, runs after the compare-and-set won and its event was queued,
// with the request and the instant it was judged by (an approved
// command's effect). An error from either rolls the whole transaction
// back: the request stays as it was.
type step struct {
	lock func(ctx context.Context, t *tx) error
	then func(ctx context.Context, t *tx, r airlock.Request, at time.Time) (airlock.Request, error)
	// plain, when set, is tried first: a compare-and-set with the same
	// arguments that needs neither lock nor then. When it changes no row,
	// the transition goes on as without it.
	plain string
	// check, when set, judges the request a compare-and-set returned with
	// the principal of its creator (the cas SQL returns it after the
	// instant); an error rolls the transition back and is its answer.
	check func(r airlock.Request, creatorPrincipal string) error
	// vote, when set, runs right after a compare-and-set (plain or not)
	// that won and passed check: it records a decision's vote, when the
	// request takes votes. An error rolls the transition back.
	vote func(ctx context.Context, t *tx, r airlock.Request, at time.Time) (airlock.Request, error)
}

// won finishes a compare-and-set that changed request r at at: its vote,
// then its event, of type event unless the request stayed pending (the
// change was a vote that did not decide: request.voted).
func (st step) won(ctx context.Context, t *tx, event airlock.EventType, actor string, r airlock.Request, at time.Time) (airlock.Request, error) {
	if st.vote != nil {
		var err error
		if r, err = st.vote(ctx, t, r, at); err != nil {
			return r, err
		}
	}
	if r.State == airlock.StatePending {
		event = airlock.EventRequestVoted
	}
	t.requestEvent(event, actor, at, r)
	return r, nil
}

// scan reads a compare-and-set's RETURNING row and applies st.check.
func (st step) scan(row pgx.Row) (airlock.Request, time.Time, error) {
	if st.check == nil {
		return scanStamped(row)
	}
	var (
		at      time.Time
		creator *string
	)
	r, err := scanRequest(row, &at, &creator)
	if err != nil {
		return r, at, err
	}
	if creator == nil {
		creator = new(string)
	}
	return r, at.UTC(), st.check(r, *creator)
}

// transitionThen is transition with a step.
func (s *Store) transitionThen(ctx context.Context, id, actor string, event airlock.EventType,
	casSQL string, args named, st step, refuse func(airlock.Request) *airlock.Error,
) (airlock.Request, error) {
	var (
		out     airlock.Request
		refused *airlock.Error
	)
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		refused = nil
		if st.plain != "" {
			args["now"] = s.now()
			r, at, err := st.scan(t.QueryRow(ctx, st.plain, args))
			if err == nil {
				out, err = st.won(ctx, t, event, actor, r, at)
				return err
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if st.lock != nil {
			if err := st.lock(ctx, t); err != nil {
				return err
			}
		}
		args["now"] = s.now()
		r, at, err := st.scan(t.QueryRow(ctx, casSQL, args))
		if err == nil {
			if r, err = st.won(ctx, t, event, actor, r, at); err != nil {
				return err
			}
			out = r
			if st.then != nil {
				out, err = st.then(ctx, t, r, at)
			}
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		cur, err := s.settle(ctx, t, id)
		if err != nil {
			return err
		}
		refused = refuse(cur)
		return nil
	})
	if err != nil {
		return airlock.Request{}, translate(err, "request", id)
	}
	if refused != nil {
		return airlock.Request{}, refused
	}
	return out, nil
}

// settle returns request id as it holds now: a pending request whose
// deadline has come is expired first, by compare-and-set, with its event.
func (s *Store) settle(ctx context.Context, t *tx, id string) (airlock.Request, error) {
	r, at, err := scanStamped(t.QueryRow(ctx, expireOneSQL, named{"now": s.now(), "id": id, "actor": airlock.ActorExpiry}))
	if err == nil {
		t.requestEvent(airlock.EventRequestExpired, airlock.ActorExpiry, at, r)
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return airlock.Request{}, err
	}
	return scanRequest(t.QueryRow(ctx, selectRequestSQL, named{"id": id}))
}

// ReportExecution records a claimed execution's outcome with one
// compare-and-set on exec_status = 'claimed'. A repeated report of the same
// status returns the request as first reported, so a retried report is
// harmless; any other outcome after the first is already_executed.
func (s *Store) ReportExecution(ctx context.Context, id string, in airlock.ReportInput, actor string) (airlock.Request, error) {
	if err := in.Validate(); err != nil {
		return airlock.Request{}, err
	}
	var out airlock.Request
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		r, at, err := scanStamped(t.QueryRow(ctx, reportSQL, named{
			"now": s.now(), "id": id, "status": string(in.Status), "detail": in.Detail, "actor": actor}))
		if err == nil {
			out = r
			t.requestEvent(airlock.EventExecutionReported, actor, at, r)
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		cur, err := scanRequest(t.QueryRow(ctx, selectRequestSQL, named{"id": id}))
		if err != nil {
			return err
		}
		if err := cur.ReportConflict(actor, in.Status); err != nil {
			return err
		}
		out = cur
		return nil
	})
	if err != nil {
		return airlock.Request{}, translate(err, "request", id)
	}
	return out, nil
}

// scanExpired reads one row of expiredCols and the statement's instant
// into a request that has only those fields (store.Store.ExpireDue).
func scanExpired(row pgx.Row) (airlock.Request, time.Time, error) {
	var (
		r                     airlock.Request
		deadline, decided, at time.Time
		decidedBy             string
	)
	if err := row.Scan(&r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &r.SessionID, &r.State, &deadline, &decided, &decidedBy, &at); err != nil {
		return airlock.Request{}, time.Time{}, err
	}
	r.DeadlineAt = deadline.UTC()
	r.Decision = sqlcore.Decision(r.State, "", "", decided.UTC(), decidedBy, "", nil)
	return r, at.UTC(), nil
}

// ExpireDue expires, in one UPDATE, up to limit pending requests whose
// deadline is at or before now (store.DefaultExpireBatch when
// limit <= 0), earliest second of deadline first and in creation order
// within a second, and appends an event for each. Replicas sweeping at once
// split the due rows between them (expireDueSQL), so each request expires
// once and no sweeper waits for another. It returns each with the fields
// of expiredCols only.
func (s *Store) ExpireDue(ctx context.Context, limit int) ([]airlock.Request, error) {
	limit = store.Batch(limit)
	return s.expire(ctx, expireDueSQL, named{"now": s.now(), "limit": limit, "actor": airlock.ActorExpiry}, limit)
}

// ExpireRequests expires, in one UPDATE, those of ids that are pending and
// due, as ExpireDue would, and returns them likewise.
func (s *Store) ExpireRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.expire(ctx, expireByIDSQL, named{"now": s.now(), "ids": ids, "actor": airlock.ActorExpiry}, len(ids))
}

// expire runs an expiry statement (expireDueSQL, expireByIDSQL) and appends
// an event for each request it expired, in the order a sweep takes them.
func (s *Store) expire(ctx context.Context, query string, args named, size int) ([]airlock.Request, error) {
	var out []airlock.Request
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		rows, err := t.Query(ctx, query, args)
		if err != nil {
			return err
		}
		rs := make([]airlock.Request, 0, size)
		var at time.Time
		for rows.Next() {
			r, now, err := scanExpired(rows)
			if err != nil {
				rows.Close()
				return err
			}
			rs, at = append(rs, r), now
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		slices.SortFunc(rs, airlock.CompareSweepOrder)
		for _, r := range rs {
			t.requestEvent(airlock.EventRequestExpired, airlock.ActorExpiry, at, r)
		}
		out = rs
		return nil
	})
	return out, translate(err, "requests", "expire")
}

// NextDeadline returns the earliest deadline of a pending request, read
// from the partial index of pending requests (nextDeadlineSQL).
func (s *Store) NextDeadline(ctx context.Context) (time.Time, bool, error) {
	var next *time.Time
	err := s.queryRow(ctx, nextDeadlineSQL).Scan(&next)
	if err != nil || next == nil {
		return time.Time{}, false, translate(err, "requests", "next deadline")
	}
	return next.UTC(), true, nil
}

// CountPending returns how many requests are pending, for the pending gauge.
func (s *Store) CountPending(ctx context.Context) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT count(*) FROM requests WHERE state = 'pending'`).Scan(&n)
	return n, translate(err, "requests", "count pending")
}
