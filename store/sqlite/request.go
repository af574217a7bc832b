package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
)

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
	// decideSQL returns, after the request, the principal of the token
	// that created it (NULL for an unknown token), for DecideParams.Check.
	decideSQL = `UPDATE requests
SET approved_votes = approved_votes + (@state = 'approved' AND approvals > 1),
	state = CASE WHEN ` + decidesSQL + ` THEN @state ELSE state END,
	decided_at = CASE WHEN ` + decidesSQL + ` THEN @now END,
	decided_by = CASE WHEN ` + decidesSQL + ` THEN @actor END,
	note = CASE WHEN ` + decidesSQL + ` THEN @note ELSE note END,
	answer = CASE WHEN ` + decidesSQL + ` THEN @answer ELSE answer END,
	expires_at = CASE WHEN ` + decidesSQL + ` THEN @expires END
WHERE id = @id AND state = 'pending' AND deadline_at > @now
RETURNING ` + requestCols + `,
	(SELECT t.principal FROM tokens t WHERE t.id = requests.owner_id)`

	// decidesSQL tells, in decideSQL's SET (which reads the row as it was),
	// whether the decision ends the request: a denial does, and so does
	// the approval that completes the approvals needed (1 for most
	// requests). Otherwise the decision is one more vote on a request that
	// stays pending.
	decidesSQL = `(@state = 'denied' OR approved_votes + 1 >= approvals)`

	// insertVoteSQL records a vote; a principal's second vote on a request
	// inserts nothing.
	insertVoteSQL = `INSERT INTO votes (request_id, principal, actor, status, note, at)
VALUES (@id, @principal, @actor, @state, @note, @now)
ON CONFLICT (request_id, principal) DO NOTHING`

	// selectVotesSQL reads a request's votes in the order they were cast,
	// with the names of the tokens they came through.
	selectVotesSQL = `SELECT v.principal, v.actor, coalesce((SELECT t.name FROM tokens t WHERE t.id = v.actor), (SELECT p.name FROM reviewer_profiles p WHERE p.principal = v.actor)), v.status, v.note, v.at
FROM votes v WHERE v.request_id = ? ORDER BY v.seq`

	cancelSQL = `UPDATE requests
SET state = 'cancelled', decided_at = @now, decided_by = @actor
WHERE id = @id AND owner_id = @actor AND state = 'pending' AND deadline_at > @now
RETURNING ` + requestCols

	// An expired request's decision is dated at its deadline, not at
	// whenever the store noticed: "expired" means no decision came before
	// then, and the date does not depend on the scheduler's latency.
	expireOneSQL = `UPDATE requests
SET state = 'expired', decided_at = deadline_at, decided_by = @actor
WHERE id = @id AND state = 'pending' AND deadline_at <= @now
RETURNING ` + requestCols

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
	expiredEventsSQL = `INSERT INTO events (type, at, actor, request_id, instance_id, state)
SELECT @event, @now, @actor, id, instance_id, 'expired' FROM requests
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
RETURNING ` + expiredCols

	// expiredByIDEventsSQL and expireByIDSQL are expiredEventsSQL and
	// expireDueSQL for the due requests among a JSON array of IDs
	// (ExpireRequests), rather than the earliest due. The CROSS JOIN makes
	// SQLite look each ID up (the IDs are few) instead of walking every
	// pending request by state and filtering; DISTINCT, since two readers
	// of one request put its ID in twice, and it has one event.
	expiredByIDEventsSQL = `INSERT INTO events (type, at, actor, request_id, instance_id, state)
SELECT @event, @now, @actor, r.id, r.instance_id, 'expired'
FROM (SELECT DISTINCT value AS id FROM json_each(@ids)) AS j CROSS JOIN requests AS r ON r.id = j.id
WHERE r.state = 'pending' AND r.deadline_at <= @now
ORDER BY r.deadline_at / 1000000, r.seq`

	expireByIDSQL = `UPDATE requests
SET state = 'expired', decided_at = deadline_at, decided_by = @actor
WHERE seq IN (
	SELECT r.seq FROM json_each(@ids) AS j CROSS JOIN requests AS r ON r.id = j.value
	WHERE r.state = 'pending' AND r.deadline_at <= @now
) AND state = 'pending' AND deadline_at <= @now
RETURNING ` + expiredCols

	claimSQL = `UPDATE requests
SET claimed_at = @now, claimed_by = @actor, exec_status = 'claimed'
WHERE id = @id AND owner_id = @actor AND state = 'approved' AND claimed_at IS NULL AND expires_at > @now
RETURNING ` + requestCols

	reportSQL = `UPDATE requests
SET exec_status = @status, finished_at = @now, exec_detail = @detail
WHERE id = @id AND owner_id = @actor AND exec_status = 'claimed'
RETURNING ` + requestCols

	selectRequestSQL = `SELECT ` + requestCols + ` FROM requests WHERE id = @id`
)

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type scanner interface{ Scan(dest ...any) error }

// scanRequest reads one row of requestCols, then into extra any columns
// the query returns after them.
func scanRequest(sc scanner, extra ...any) (airlock.Request, error) {
	var (
		r                                           airlock.Request
		args, rctx, cmdInput                        []byte
		created, deadline                           int64
		decidedAt, expiresAt, claimedAt, finishedAt sql.NullInt64
		decidedBy, claimedBy, execStatus, key       sql.NullString
		mode, method, question, cmdStatus           sql.NullString
		note, answer, detail, cmdDetail             string
		observed                                    []byte
		cmdAppliedAt                                sql.NullInt64
		instName, ownerName, deciderName            sql.NullString
		reviewers, escalateTo                       string
		escalateAfter                               int64
		escalatedAt                                 sql.NullInt64
	)
	dest := append([]any{&r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &r.State, &r.Kind, &r.Tool, &args, &r.Timeout,
		&r.AgentReasoning, &rctx, &created, &deadline,
		&decidedAt, &decidedBy, &note, &answer, &expiresAt,
		&claimedAt, &claimedBy, &execStatus, &finishedAt, &detail,
		&key, &r.Fingerprint, &r.Title, &r.Description, &r.TargetType, &r.TargetID, &r.SessionID,
		&mode, &method, &cmdInput, &question,
		&observed, &cmdStatus, &cmdDetail, &cmdAppliedAt,
		&reviewers, &r.Approvals, &escalateTo, &escalateAfter, &escalatedAt,
		&instName, &ownerName, &deciderName}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return airlock.Request{}, err
	}
	r.Arguments, r.Context = args, rctx
	r.CreatedAt, r.DeadlineAt = fromMicros(created), fromMicros(deadline)
	r.IdempotencyKey = key.String
	r.InstanceName, r.OwnerName = instName.String, ownerName.String
	r.Reviewers = airlock.SplitGroups(reviewers)
	r.EscalateTo, r.EscalateAfter, r.EscalatedAt = airlock.SplitGroups(escalateTo), time.Duration(escalateAfter)*time.Microsecond, nullMicros(escalatedAt)
	if decidedAt.Valid {
		r.Decision = sqlcore.Decision(r.State, note, answer, fromMicros(decidedAt.Int64), decidedBy.String, deciderName.String, nullMicros(expiresAt))
	}
	if claimedAt.Valid {
		r.Execution = sqlcore.Execution(fromMicros(claimedAt.Int64), claimedBy.String, execStatus.String, nullMicros(finishedAt), detail)
	}
	r.Proposal = sqlcore.Proposal(mode.String, mode.Valid, method.String, method.Valid, cmdInput, observed)
	if cmdStatus.Valid {
		r.CommandResult = &airlock.CommandResult{Status: cmdStatus.String, Detail: cmdDetail, AppliedAt: fromMicros(cmdAppliedAt.Int64)}
	}
	q, err := sqlcore.Question(r.ID, question.String, question.Valid)
	if err != nil {
		return airlock.Request{}, err
	}
	r.Question = q
	return r, nil
}

// queryRequest runs a query that yields at most one request;
// sql.ErrNoRows when it yields none.
func queryRequest(ctx context.Context, q queryer, query string, args ...any) (airlock.Request, error) {
	return scanRequest(q.QueryRowContext(ctx, query, args...))
}

// queryRequests runs a query that yields requests, in the query's order.
func queryRequests(ctx context.Context, q queryer, query string, args ...any) ([]airlock.Request, error) {
	return queryAll(ctx, q, func(sc scanner) (airlock.Request, error) { return scanRequest(sc) }, query, args...)
}

// queryAll runs a query and scans each of its rows with scan, in the
// query's order.
func queryAll[T any](ctx context.Context, q queryer, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlcore.Collect(rows, func() (T, error) { return scan(rows) })
}

// CreateRequest creates a request in one INSERT … SELECT that finds the
// instance (live, and owned by the request's owner) and yields to an
// existing row with the same owner and idempotency key. Zero rows inserted
// then means a replay, a conflict or a missing instance, told apart by
// reading the key's row in the same transaction. An empty key makes no
// replay: the request is always new.
func (s *Store) CreateRequest(ctx context.Context, p store.NewRequestParams) (airlock.Request, bool, error) {
	p, cols, err := sqlcore.NewRequest("sqlite", p)
	if err != nil {
		return airlock.Request{}, false, err
	}
	in := p.Request

	var unlessGranted any
	if p.UnlessGranted != nil {
		unlessGranted = p.UnlessGranted.Principal
	}
	var (
		out     airlock.Request
		created bool
	)
	err = s.inTx(ctx, func(tx *txn, now time.Time) error {
		p := p
		if p.Grant != nil {
			d, err := useGrant(ctx, tx, now, p.Grant, in)
			if err != nil {
				return err
			}
			p.Initial = d
		}
		state := airlock.StatePending
		var decidedAt, decidedBy, expiresAt any
		note := ""
		if d := p.Initial; d != nil {
			state, decidedAt, decidedBy, note = d.Status, micros(now), d.DecidedBy, d.Note
			if d.Status == airlock.StateApproved {
				expiresAt = micros(now.Add(d.Validity))
			}
		}
		var (
			seq                 int64
			instName, ownerName sql.NullString
		)
		err := tx.QueryRowContext(ctx, `INSERT INTO requests (
	id, instance_id, owner_id, state, kind, tool, arguments, timeout, agent_reasoning, context,
	created_at, deadline_at, decided_at, decided_by, note, expires_at,
	idempotency_key, fingerprint, title, description, target_type, target_id, session_id,
	proposal_mode, command_method, command_input, question, command_observed, reviewers, approvals, escalate_to, escalate_after)
SELECT @id, i.id, i.owner_id, @state, @kind, @tool, @arguments, @timeout, @reasoning, @context,
	@now, @deadline, @decided_at, @decided_by, @note, @expires_at,
	@key, @fingerprint, @title, @description, @target_type, @target_id, @session_id,
	@mode, @method, @input, @question, @observed, @reviewers, @approvals, @escalate_to, @escalate_after
FROM instances i
WHERE i.id = @instance AND i.owner_id = @owner AND i.deleted_at IS NULL
	AND (@unless_granted IS NULL OR NOT EXISTS (`+grantMayCoverSQL+`))
ON CONFLICT (owner_id, idempotency_key) DO NOTHING
RETURNING seq, (SELECT i.name FROM instances i WHERE i.id = requests.instance_id),
	(SELECT t.name FROM tokens t WHERE t.id = requests.owner_id)`,
			sql.Named("id", in.ID), sql.Named("instance", in.InstanceID), sql.Named("owner", in.OwnerID),
			sql.Named("state", state), sql.Named("kind", in.Kind), sql.Named("tool", in.Tool),
			sql.Named("arguments", sqlcore.Text(in.Arguments)), sql.Named("timeout", in.Timeout),
			sql.Named("reasoning", in.AgentReasoning), sql.Named("context", sqlcore.Text(in.Context)),
			sql.Named("now", micros(now)), sql.Named("deadline", micros(now.Add(p.Window))),
			sql.Named("decided_at", decidedAt), sql.Named("decided_by", decidedBy),
			sql.Named("note", note), sql.Named("expires_at", expiresAt),
			sql.Named("key", sqlcore.NullString(in.IdempotencyKey)), sql.Named("fingerprint", in.Fingerprint),
			sql.Named("title", in.Title), sql.Named("description", in.Description),
			sql.Named("target_type", in.TargetType), sql.Named("target_id", in.TargetID),
			sql.Named("session_id", in.SessionID),
			sql.Named("mode", cols.Mode), sql.Named("method", cols.Method), sql.Named("input", cols.Input),
			sql.Named("question", cols.Question), sql.Named("observed", cols.Observed),
			sql.Named("reviewers", airlock.JoinGroups(in.Reviewers)), sql.Named("approvals", in.Approvals),
			sql.Named("escalate_to", airlock.JoinGroups(in.EscalateTo)), sql.Named("escalate_after", in.EscalateAfter.Microseconds()),
			sql.Named("unless_granted", unlessGranted)).Scan(&seq, &instName, &ownerName)
		switch {
		case err == nil:
			r := insertedRequest(in, seq, state, now, p, note)
			r.InstanceName, r.OwnerName = instName.String, ownerName.String
			out, created = r, true
			if err := appendRequestEvent(ctx, tx, now, airlock.Event{Type: airlock.EventRequestCreated, Actor: p.Actor,
				RequestID: r.ID, InstanceID: r.InstanceID, State: r.State}, r); err != nil {
				return err
			}
			if r.State.Terminal() {
				return appendRequestEvent(ctx, tx, now, airlock.Event{Type: airlock.StateEvent(r.State), Actor: p.Initial.DecidedBy,
					RequestID: r.ID, InstanceID: r.InstanceID, State: r.State, PolicyHash: p.Initial.PolicyHash}, r)
			}
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}

		if in.IdempotencyKey != "" {
			prev, err := queryRequest(ctx, tx, `SELECT `+requestCols+` FROM requests WHERE owner_id = ? AND idempotency_key = ?`,
				in.OwnerID, in.IdempotencyKey)
			switch {
			case err == nil:
				out, err = p.Replay(prev)
				if err == nil && p.Grant != nil && p.Initial != nil {
					// A use of a grant was counted for nothing: undo it.
					return replayed{out}
				}
				return err
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		if p.UnlessGranted != nil {
			// The instance may be live: then a grant could cover the request.
			var live bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM instances
WHERE id = ? AND owner_id = ? AND deleted_at IS NULL)`, in.InstanceID, in.OwnerID).Scan(&live); err != nil {
				return err
			}
			if live {
				return store.ErrGrantMayCover
			}
		}
		return airlock.NotFound("instance", in.InstanceID)
	})
	if rp, ok := errors.AsType[replayed](err); ok {
		return rp.r, false, nil
	}
	if err != nil {
		return airlock.Request{}, false, translate(err, "request", in.ID)
	}
	return out, created, nil
}

// replayed rolls back a create that found its replay after counting a
// grant's use, and carries the request replayed.
type replayed struct{ r airlock.Request }

func (replayed) Error() string { return "sqlite: a replayed create undoes its grant's use" }

// insertedRequest is the row CreateRequest's INSERT wrote, as a read
// returns it: the INSERT returns only seq, since scanning every column back
// out of RETURNING was a sixth of a create's CPU in the one writer. Times
// are stored in microseconds; empty JSON is stored as NULL.
func insertedRequest(in airlock.Request, seq int64, state airlock.State, now time.Time, p store.NewRequestParams, note string) airlock.Request {
	r := in
	r.Seq, r.State = seq, state
	r.CreatedAt, r.DeadlineAt = fromMicros(micros(now)), fromMicros(micros(now.Add(p.Window)))
	r.Arguments, r.Context = nilIfEmpty(in.Arguments), nilIfEmpty(in.Context)
	r.Decision, r.Execution, r.CommandResult = nil, nil, nil
	r.Reviewers, r.Votes = slices.Clone(in.Reviewers), nil
	r.EscalateTo, r.EscalateAfter, r.EscalatedAt = slices.Clone(in.EscalateTo), in.EscalateAfter.Truncate(time.Microsecond), nil
	if d := p.Initial; d != nil {
		r.Decision = &airlock.Decision{Status: state, Note: note, DecidedAt: r.CreatedAt, DecidedBy: d.DecidedBy,
			DecidedByName: airlock.DeciderName(d.DecidedBy, "")}
		if state == airlock.StateApproved {
			r.Decision.ExpiresAt = new(fromMicros(micros(now.Add(d.Validity))))
		}
	}
	if in.Proposal != nil {
		r.Proposal = &airlock.Proposal{Mode: in.Proposal.Mode}
		if c := in.Proposal.Command; c != nil {
			r.Proposal.Command = &airlock.Command{Method: c.Method, Input: nilIfEmpty(c.Input), Observed: nilIfEmpty(c.Observed)}
		}
	}
	if in.Question != nil {
		r.Question = &airlock.Question{}
		if len(in.Question.Choices) > 0 {
			r.Question.Choices = slices.Clone(in.Question.Choices)
		}
	}
	return r
}

// nilIfEmpty is raw as a read returns it: nil when empty (stored NULL),
// else a copy of its own, not the caller's bytes.
func nilIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return slices.Clone(raw)
}

// GetRequest reads a request.
func (s *Store) GetRequest(ctx context.Context, id string) (airlock.Request, error) {
	r, err := queryRequest(ctx, s.read, selectRequestSQL, sql.Named("id", id))
	if err == nil && r.NeedsQuorum() {
		r.Votes, err = readVotes(ctx, s.read, id)
	}
	return r, translate(err, "request", id)
}

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
	reviewers, approvals, approved_votes,
	` + namesCols

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
	budget := int64(math.MaxInt64)
	if f.MaxBytes > 0 {
		budget = int64(f.MaxBytes)
	}
	q := `WITH page AS (
	SELECT seq, ` + storedBytesSQL + ` AS size FROM requests` + where + ` ORDER BY seq DESC LIMIT ?
), cut AS (
	SELECT seq, row_number() OVER w AS n,
		coalesce(sum(size) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
	FROM page WINDOW w AS (ORDER BY seq DESC)
)
SELECT ` + requestCols + `, (SELECT count(*) FROM page) FROM requests
WHERE seq IN (SELECT seq FROM cut WHERE n <= ? AND before < ?)
ORDER BY seq DESC`
	args = append(args, limit+1, limit, budget)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, false, translate(err, "requests", "list")
	}
	defer rows.Close()
	var (
		out   []airlock.Request
		found int
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
	if err := fillVotes(ctx, s.read, out); err != nil {
		return nil, false, translate(err, "votes", "list")
	}
	return out, found > len(out), nil
}

// fillVotes reads, in one query, the votes of those of rs that need
// several approvals.
func fillVotes(ctx context.Context, q queryer, rs []airlock.Request) error {
	ids, at := airlock.QuorumRequests(rs)
	if len(ids) == 0 {
		return nil
	}
	js, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	rows, err := q.QueryContext(ctx, `SELECT v.request_id, v.principal, v.actor, coalesce((SELECT t.name FROM tokens t WHERE t.id = v.actor), (SELECT p.name FROM reviewer_profiles p WHERE p.principal = v.actor)), v.status, v.note, v.at
FROM votes v WHERE v.request_id IN (SELECT value FROM json_each(?)) ORDER BY v.seq`, string(js))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id   string
			v    airlock.Vote
			name sql.NullString
			t    int64
		)
		if err := rows.Scan(&id, &v.Principal, &v.Actor, &name, &v.Status, &v.Note, &t); err != nil {
			return err
		}
		v.Name, v.At = airlock.DeciderName(v.Actor, name.String), fromMicros(t)
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
	out, err := queryAll(ctx, s.read, scanSummary, `SELECT `+summaryCols+` FROM requests`+where+` ORDER BY seq DESC LIMIT ?`,
		append(args, limit+1)...)
	if err != nil {
		return nil, false, translate(err, "requests", "list")
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// listWhere is the WHERE clause, with its arguments, that selects f's
// requests (sqlcore.RequestFilterConds); empty when f selects every
// request.
func listWhere(f store.RequestFilter) (string, []any, error) {
	if err := f.Validate(); err != nil {
		return "", nil, err
	}
	var (
		where strings.Builder
		sep   = ` WHERE `
		args  []any
	)
	sqlcore.RequestFilterConds(f, func(column, op, _ string, arg any) {
		for _, part := range [...]string{sep, column, " ", op, " ?"} {
			where.WriteString(part)
		}
		sep, args = ` AND `, append(args, arg)
	})
	return where.String(), args, nil
}

// scanSummary reads one row of summaryCols.
func scanSummary(sc scanner) (airlock.RequestSummary, error) {
	var (
		r                 airlock.RequestSummary
		created, deadline int64
		decidedAt, expAt  sql.NullInt64
		decidedBy, method sql.NullString
		question, head    sql.NullString
		note, answer      string
		names             [3]sql.NullString
		reviewers         string
	)
	if err := sc.Scan(&r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &r.State, &r.Kind, &r.Tool, &r.Title, &r.SessionID,
		&created, &deadline, &decidedAt, &decidedBy, &note, &answer, &expAt, &question, &method, &head,
		&reviewers, &r.Approvals, &r.ApprovedVotes,
		&names[0], &names[1], &names[2]); err != nil {
		return airlock.RequestSummary{}, err
	}
	r.Reviewers = airlock.SplitGroups(reviewers)
	r.CreatedAt, r.DeadlineAt = fromMicros(created), fromMicros(deadline)
	r.CommandMethod = method.String
	r.ArgumentsHead, r.ArgumentsCut = airlock.ArgumentsHead(head.String)
	r.InstanceName, r.OwnerName = names[0].String, names[1].String
	if decidedAt.Valid {
		r.Decision = sqlcore.Decision(r.State, note, answer, fromMicros(decidedAt.Int64), decidedBy.String, names[2].String, nullMicros(expAt))
	}
	q, err := sqlcore.Question(r.ID, question.String, question.Valid)
	if err != nil {
		return airlock.RequestSummary{}, err
	}
	r.Question = q
	return r, nil
}

// Decide records a reviewer's decision with one compare-and-set. On a
// request that needs several approvals the same write counts the vote and
// ends the request only when it completes the quorum (decidesSQL); the
// vote's row, whose key refuses a principal's second vote, is inserted in
// the same transaction.
func (s *Store) Decide(ctx context.Context, p store.DecideParams) (airlock.Request, error) {
	if err := p.Validate(); err != nil {
		return airlock.Request{}, err
	}
	expires := func(time.Time) any { return nil }
	if p.Status == airlock.StateApproved {
		expires = func(now time.Time) any { return micros(now.Add(p.Validity)) }
	}
	return s.transitionThen(ctx, p.ID, p.Actor, airlock.StateEvent(p.Status), func(ctx context.Context, tx *txn, now time.Time) (airlock.Request, error) {
		var creator sql.NullString
		r, err := scanRequest(tx.QueryRowContext(ctx, decideSQL, sql.Named("id", p.ID), sql.Named("now", micros(now)),
			sql.Named("state", p.Status), sql.Named("actor", p.Actor), sql.Named("note", p.Note),
			sql.Named("answer", p.Answer), sql.Named("expires", expires(now))), &creator)
		if err != nil {
			return r, err
		}
		// A refused check fails the operation: its savepoint rolls the
		// decision back.
		if err := p.Check(r, creator.String); err != nil {
			return r, err
		}
		if !r.NeedsQuorum() {
			return r, nil
		}
		res, err := tx.ExecContext(ctx, insertVoteSQL, sql.Named("id", p.ID), sql.Named("principal", p.VotePrincipal()),
			sql.Named("actor", p.Actor), sql.Named("state", p.Status), sql.Named("note", p.Note), sql.Named("now", micros(now)))
		if err != nil {
			return r, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return r, cmp.Or(err, error(r.DuplicateVote(p.VotePrincipal())))
		}
		r.Votes, err = readVotes(ctx, tx, r.ID)
		return r, err
	}, s.applyApprovedCommand, airlock.Request.DecisionConflict)
}

// readVotes reads request id's votes, in the order they were cast.
func readVotes(ctx context.Context, q queryer, id string) ([]airlock.Vote, error) {
	rows, err := q.QueryContext(ctx, selectVotesSQL, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []airlock.Vote
	for rows.Next() {
		var (
			v    airlock.Vote
			name sql.NullString
			at   int64
		)
		if err := rows.Scan(&v.Principal, &v.Actor, &name, &v.Status, &v.Note, &at); err != nil {
			return nil, err
		}
		v.Name, v.At = airlock.DeciderName(v.Actor, name.String), fromMicros(at)
		out = append(out, v)
	}
	return out, rows.Err()
}

// EscalateDue widens the requests whose escalation is due to their
// escalation groups, in one UPDATE whose WHERE keeps each to once, and
// appends request.escalated for each.
func (s *Store) EscalateDue(ctx context.Context, limit int) ([]string, error) {
	limit = store.Batch(limit)
	var ids []string
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		ids = ids[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE requests
SET reviewers = reviewers || char(10) || escalate_to, escalated_at = @now
WHERE seq IN (SELECT seq FROM requests
	WHERE state = 'pending' AND escalate_to <> '' AND escalated_at IS NULL
		AND created_at + escalate_after <= @now AND deadline_at > @now
	ORDER BY seq LIMIT @limit)
RETURNING id, instance_id`, sql.Named("now", micros(now)), sql.Named("limit", limit))
		if err != nil {
			return err
		}
		var due [][2]string
		for rows.Next() {
			var d [2]string
			if err := rows.Scan(&d[0], &d[1]); err != nil {
				rows.Close()
				return err
			}
			due = append(due, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, d := range due {
			if err := insertEvent(ctx, tx, now, airlock.Event{Type: airlock.EventRequestEscalated, Actor: airlock.ActorEscalation,
				RequestID: d[0], InstanceID: d[1], State: airlock.StatePending}); err != nil {
				return err
			}
			ids = append(ids, d[0])
		}
		return nil
	})
	return ids, translate(err, "requests", "escalate")
}

// Cancel withdraws a pending request with one compare-and-set.
func (s *Store) Cancel(ctx context.Context, id, actor string) (airlock.Request, error) {
	return s.transition(ctx, id, actor, airlock.EventRequestCancelled, func(ctx context.Context, tx *txn, now time.Time) (airlock.Request, error) {
		return queryRequest(ctx, tx, cancelSQL, sql.Named("id", id), sql.Named("now", micros(now)), sql.Named("actor", actor))
	}, airlock.OwnerOnly(actor, airlock.Request.DecisionConflict))
}

// ClaimExecution claims the one execution attempt with one compare-and-set.
func (s *Store) ClaimExecution(ctx context.Context, id, actor string) (airlock.Request, error) {
	return s.transition(ctx, id, actor, airlock.EventExecutionClaimed, func(ctx context.Context, tx *txn, now time.Time) (airlock.Request, error) {
		return queryRequest(ctx, tx, claimSQL, sql.Named("id", id), sql.Named("now", micros(now)), sql.Named("actor", actor))
	}, airlock.OwnerOnly(actor, airlock.Request.ClaimConflict))
}

// transition runs one compare-and-set (cas) on request id and appends an
// event of type event by actor. When cas changes no row, another change won: transition settles
// the row (expiring it if it is pending past its deadline — itself a
// compare-and-set) and returns refuse's error for what holds. The settling
// commits even though the call is refused, so a request refused for its
// deadline is expired from then on.
func (s *Store) transition(ctx context.Context, id, actor string, event airlock.EventType,
	cas func(context.Context, *txn, time.Time) (airlock.Request, error),
	refuse func(airlock.Request) *airlock.Error,
) (airlock.Request, error) {
	return s.transitionThen(ctx, id, actor, event, cas, nil, refuse)
}

// transitionThen is transition with a step run after a successful cas and
// its event, in the same transaction (an approved command's effect). When
// then fails, the whole transaction rolls back: the cas is undone and the
// request stays as it was.
func (s *Store) transitionThen(ctx context.Context, id, actor string, event airlock.EventType,
	cas func(context.Context, *txn, time.Time) (airlock.Request, error),
	then func(context.Context, *txn, time.Time, airlock.Request) (airlock.Request, error),
	refuse func(airlock.Request) *airlock.Error,
) (airlock.Request, error) {
	var (
		out     airlock.Request
		refused *airlock.Error
	)
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		r, err := cas(ctx, tx, now)
		if err == nil {
			out = r
			if r.State == airlock.StatePending {
				// The cas counted a vote and left the request pending.
				event = airlock.EventRequestVoted
			}
			if err := appendRequestEvent(ctx, tx, now, airlock.Event{Type: event, Actor: actor,
				RequestID: r.ID, InstanceID: r.InstanceID, State: r.State}, r); err != nil {
				return err
			}
			if then != nil {
				out, err = then(ctx, tx, now, r)
			}
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := settle(ctx, tx, id, now)
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

// settle returns request id as it holds at now: a pending request whose
// deadline has come is expired first, by compare-and-set, with its event.
func settle(ctx context.Context, tx *txn, id string, now time.Time) (airlock.Request, error) {
	r, err := queryRequest(ctx, tx, expireOneSQL, sql.Named("id", id), sql.Named("now", micros(now)), sql.Named("actor", airlock.ActorExpiry))
	if err == nil {
		return r, appendRequestEvent(ctx, tx, now, airlock.Event{Type: airlock.EventRequestExpired, Actor: airlock.ActorExpiry,
			RequestID: r.ID, InstanceID: r.InstanceID, State: r.State}, r)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return airlock.Request{}, err
	}
	return queryRequest(ctx, tx, selectRequestSQL, sql.Named("id", id))
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
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		r, err := queryRequest(ctx, tx, reportSQL, sql.Named("id", id), sql.Named("now", micros(now)),
			sql.Named("status", in.Status), sql.Named("detail", in.Detail), sql.Named("actor", actor))
		if err == nil {
			out = r
			return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventExecutionReported, Actor: actor,
				RequestID: r.ID, InstanceID: r.InstanceID, State: r.State})
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := queryRequest(ctx, tx, selectRequestSQL, sql.Named("id", id))
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

// expiredCols is what ExpireDue returns of each request it expired, in
// the order scanExpired reads: its identity, deadline and decision.
const expiredCols = `seq, id, instance_id, owner_id, session_id, state, deadline_at, decided_at, decided_by`

// scanExpired reads one row of expiredCols into a request that has only
// those fields (store.Store.ExpireDue).
func scanExpired(sc scanner) (airlock.Request, error) {
	var (
		r                   airlock.Request
		deadline, decidedAt int64
		decidedBy           string
	)
	if err := sc.Scan(&r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &r.SessionID, &r.State, &deadline, &decidedAt, &decidedBy); err != nil {
		return airlock.Request{}, err
	}
	r.DeadlineAt = fromMicros(deadline)
	r.Decision = sqlcore.Decision(r.State, "", "", fromMicros(decidedAt), decidedBy, "", nil)
	return r, nil
}

// ExpireDue expires, in one UPDATE, up to limit pending requests whose
// deadline is at or before now (store.DefaultExpireBatch when
// limit <= 0), earliest second of deadline first and in creation order
// within a second, and appends an event for each. It returns each with the fields of
// expiredCols only.
func (s *Store) ExpireDue(ctx context.Context, limit int) ([]airlock.Request, error) {
	limit = store.Batch(limit)
	return s.expire(ctx, expiredEventsSQL, expireDueSQL, limit, sql.Named("limit", limit))
}

// ExpireRequests expires, in one UPDATE, those of ids that are pending and
// due, as ExpireDue would, and returns them likewise.
func (s *Store) ExpireRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	js, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	return s.expire(ctx, expiredByIDEventsSQL, expireByIDSQL, len(ids), sql.Named("ids", string(js)))
}

// expire runs an expiry: eventsSQL appends the events of the rows that
// updateSQL then expires (the same selection, in the same transaction of
// the one writer), and returns them sorted as a sweep takes them.
func (s *Store) expire(ctx context.Context, eventsSQL, updateSQL string, size int, selection sql.NamedArg) ([]airlock.Request, error) {
	var out []airlock.Request
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		args := []any{sql.Named("now", micros(now)), sql.Named("actor", airlock.ActorExpiry), selection}
		// The events first, from the very rows the UPDATE then expires,
		// in the sweep's order: one INSERT … SELECT, where handing the
		// returned rows back as JSON was a fifth of a sweep.
		if _, err := tx.ExecContext(ctx, eventsSQL, append(args, sql.Named("event", airlock.EventRequestExpired))...); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, updateSQL, args...)
		if err != nil {
			return err
		}
		rs := make([]airlock.Request, 0, size)
		for rows.Next() {
			r, err := scanExpired(rows)
			if err != nil {
				rows.Close()
				return err
			}
			rs = append(rs, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		slices.SortFunc(rs, airlock.CompareSweepOrder)
		if err := recordInstructions(ctx, tx, now, rs); err != nil {
			return err
		}
		out = rs
		return nil
	})
	return out, translate(err, "requests", "expire")
}

// nextDeadlineSQL finds the earliest second with a pending deadline (the
// first entry of requests_pending_by_second), then the earliest deadline
// among that second's entries: it reads one second's entries, where a
// plain MIN(deadline_at) would read every pending request's.
const nextDeadlineSQL = `SELECT min(deadline_at) FROM requests
WHERE state = 'pending' AND deadline_at / 1000000 = (
	SELECT deadline_at / 1000000 FROM requests WHERE state = 'pending' ORDER BY deadline_at / 1000000 LIMIT 1)`

// NextDeadline returns the earliest deadline of a pending request.
func (s *Store) NextDeadline(ctx context.Context) (time.Time, bool, error) {
	var next sql.NullInt64
	err := s.read.QueryRowContext(ctx, nextDeadlineSQL).Scan(&next)
	if err != nil || !next.Valid {
		return time.Time{}, false, translate(err, "requests", "next deadline")
	}
	return fromMicros(next.Int64), true, nil
}

// CountPending returns how many requests are pending, for the pending
// gauge: the sum of the instances' counts (kept by triggers, migration
// 0003), one row per instance rather than one index entry per pending
// request, so that scraping the gauge during a backlog of 100,000 costs
// no more than without one.
func (s *Store) CountPending(ctx context.Context) (int, error) {
	var n int
	err := s.read.QueryRowContext(ctx, `SELECT coalesce(sum(pending), 0) FROM instances`).Scan(&n)
	return n, translate(err, "requests", "count pending")
}
