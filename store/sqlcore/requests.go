package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// RequestSQL are the statements of requests, their votes and commands,
// and the audit log (store.Requests but the instances', and
// store.Sessions' RequestByKey). A request is read as RequestCols; a
// statement that changes one returns, after them, its instant.
type RequestSQL struct {
	// Create stores request @id (createArgs) in instance @instance if it
	// is live and @owner's, and unless @unless_granted is set and a live
	// grant of another principal may cover it (GrantSQL), yielding to a
	// request of @owner with key @key (then no row). It is dated @now,
	// due @window later, decided at @now by @decided_by unless NULL (in
	// state @state, with @note), and, when approved, valid for @validity
	// unless NULL. It returns seq, the instant and the names of the
	// request's instance, owner and decider (each NULL when unknown).
	Create string
	// CreatePending, optional, is Create for a pending request (no
	// @decided_by, @note or @validity) that appends its request.created
	// event (@event, by @actor) itself, run last (Tx.Last): a fast path,
	// one round trip where the engine pipelines.
	CreatePending string `sql:"optional"`
	// ByKey selects the request of @owner with key @key.
	ByKey string
	// InstanceLive selects whether instance @instance is live and @owner's.
	InstanceLive string
	// UseGrant is the compare-and-set of a grant's use: grant @grant, if
	// live at @now and covering a request of tool @tool in instance
	// @instance of agent @owner made by another principal than
	// @principal (with fingerprint @args for a same_arguments grant),
	// has one use less; it returns the grant's validity, or no row.
	UseGrant string
	// Get selects request @id.
	Get string
	// GetMany selects the requests @ids (a list of IDs) that exist.
	GetMany string
	// Votes selects the votes of request @id in the order they were cast:
	// principal, actor, the name of the actor's token or profile (NULL
	// when unknown), status, note, at.
	Votes string
	// VotesOf is Votes for the requests @ids, each row led by its
	// request's ID.
	VotesOf string
	// List selects a page of requests, newest first, matching the
	// conditions that replace /*where*/ (a WHERE clause, or nothing): the
	// @candidates newest, then of those the first @limit whose stored
	// sizes before them add up to less than @budget. Each row is a
	// request followed by how many candidates there were.
	List string
	// Summaries selects up to @candidates requests, newest first,
	// matching /*where*/, as SummaryCols.
	Summaries string

	// Decide is the compare-and-set of a decision on pending request @id,
	// due after @now: it counts an approval toward the request's quorum
	// and decides (@state by @actor, @note, @answer, valid @validity
	// unless NULL) when the decision ends the request: a denial, or the
	// approval that completes the quorum. It returns the request, the
	// instant and the principal of the token that created it (NULL when
	// unknown); no row when the request is not pending or is due.
	Decide string
	// ApprovePlain is Decide that changes only a request that proposes no
	// command: an approval tries it first, and takes the command's locks
	// (CommandOf, CommandToken, CommandItem) only when it changed nothing.
	ApprovePlain string
	// DecideOnce, optional, decides (@state by @actor, @note, valid
	// @validity unless NULL) pending request @id, due after @now, only if
	// it needs nothing besides its decision: no command, question,
	// session, reviewer groups or quorum, and not created by a token of
	// principal @principal (when set). It appends the decision's event
	// (@event) itself and is run last (Tx.Last): a fast path, one round
	// trip where the engine pipelines. It returns the request and the
	// instant, or no row, having changed nothing.
	DecideOnce string `sql:"optional"`
	// Rebind sets replaced_by to @replaced_by on denied request @id
	// whose replaced_by is unset (Requests.Edit's original).
	Rebind string
	// Derive sets derived_from to @derived_from on pending request @id
	// whose derived_from is unset (Requests.Edit's new request).
	Derive string
	// InsertVote records the vote of @principal on @id (@actor, @state,
	// @note) at @now, unless the principal voted already (no row changed).
	InsertVote string
	// CommandOf selects the owner_id, command_method and command_input
	// of pending request @id, locking nothing or, where writers run at
	// once, nothing yet.
	CommandOf string
	// CommandToken selects token @id (as TokenSQL), locked against a
	// revocation until the approval commits where writers run at once.
	CommandToken string
	// CommandItem selects work item @id (as BoardSQL), locked likewise.
	CommandItem string
	// MoveItem is a work_move's compare-and-set: item @id, in column
	// @from, moves to column @to if it exists, a version more, updated at
	// @now; it returns the item, or no row.
	MoveItem string
	// ApplyCommand records on approved request @id its command's result
	// (@status, @detail) applied at @now, and returns the request.
	ApplyCommand string
	// Cancel is the compare-and-set of a cancellation of pending request
	// @id of @actor, due after @now; it returns the request and the
	// instant, or no row.
	Cancel string
	// ExpireOne expires pending request @id if due at @now (by @actor,
	// dated at its deadline); it returns the request and the instant, or
	// no row.
	ExpireOne string
	// Claim is the compare-and-set of the claim of approved request @id
	// of @actor, unclaimed and unexpired at @now; it returns the request
	// and the instant, or no row.
	Claim string
	// Report is the compare-and-set of the report (@status, @detail) of
	// claimed request @id of @actor at @now; it returns the request and
	// the instant, or no row.
	Report string
	// ExpireDue expires, by @actor, up to @limit pending requests due at
	// @now, the earliest second of deadlines first and in creation order
	// within a second, and returns them as StateCols and the instant.
	ExpireDue string
	// ExpireByID is ExpireDue for the due requests among @ids.
	ExpireByID string
	// ExpireDueEvents and ExpireByIDEvents, optional, append the events
	// (@event, by @actor, at @now) of the requests ExpireDue and
	// ExpireByID are about to expire, in a sweep's order, in one
	// statement run before them: a fast path for an engine whose writes
	// take turns, so that what they select is what the expiry then
	// changes. Without them the expiry's rows' events are appended one
	// by one (Tx.StateEvents).
	ExpireDueEvents  string `sql:"optional"`
	ExpireByIDEvents string `sql:"optional"`
	// Escalate widens up to @limit pending requests whose escalation is
	// due at @now to their escalation groups, once, and returns each
	// one's id, instance_id and the instant.
	Escalate string
	// NextDeadline selects the earliest deadline of a pending request, or
	// the start of its second when more than @exact pending deadlines
	// share that second, reading @probe (@exact + 1) of them at most (NULL
	// when none is pending; store.Requests.NextDeadline).
	NextDeadline string
	// CountPending selects how many requests are pending.
	CountPending string
	// Events selects up to @limit events with @after < ID <= @upto,
	// oldest first: id, type, at, actor, request_id, instance_id,
	// token_id, state, subject, policy_hash, uid, trace_id, span_id.
	Events string
	// CreatedEvent selects the request.created event of request @id,
	// with Events's columns.
	CreatedEvent string
}

// whereMarker is where a list's conditions go in RequestSQL.List and
// Summaries.
const whereMarker = "/*where*/"

// RequestCols, the columns a request is read as, are its seq, id,
// instance_id, owner_id, state, kind, tool, arguments, timeout,
// agent_reasoning, context, created_at, deadline_at, decided_at,
// decided_by, note, answer, expires_at, claimed_at, claimed_by,
// exec_status, finished_at, exec_detail, idempotency_key, fingerprint,
// title, description, target_type, target_id, session_id,
// proposal_mode, command_method, command_input, question,
// command_observed, command_status, command_detail, command_applied_at,
// reviewers, approvals, escalate_to, escalate_after, escalated_at,
// purged_at, replaced_by, derived_from, preview_type, preview_content,
// reversibility, and the names of its instance, its owner and its decider (NULL when
// unknown).
//
// SummaryCols, those of a summary, are its seq, id, instance_id,
// owner_id, state, kind, tool, title, session_id, created_at,
// deadline_at, decided_at, decided_by, note, answer, expires_at,
// question, command_method, the first 201 characters of its arguments,
// reviewers, approvals, approved_votes, whether it is purged (purged_at
// set) and the three names.

// requestScan scans RequestCols; request converts what it scanned.
type requestScan struct {
	r                                                         airlock.Request
	state, kind                                               string
	decidedAt, expiresAt, claimedAt, finishedAt, cmdAppliedAt NullTime
	escalatedAt, purgedAt                                     NullTime
	decidedBy, claimedBy, execStatus, key                     sql.NullString
	mode, method, question, cmdStatus                         sql.NullString
	instName, ownerName, deciderName                          sql.NullString
	note, answer, detail, cmdDetail, reviewers, escalateTo    string
	args, rctx, cmdInput, observed                            []byte // read once into their final bytes: arguments reach a mebibyte
	previewType, previewContent, review                       string
}

// requestCols is how many RequestCols there are.
const requestCols = 53

func (c *Core) requestDest(s *requestScan, extra ...any) []any {
	r := &s.r
	return append(append(make([]any, 0, requestCols+len(extra)), &r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &s.state, &s.kind, &r.Tool, &s.args, &r.Timeout,
		&r.AgentReasoning, &s.rctx, c.d.Time(&r.CreatedAt), c.d.Time(&r.DeadlineAt),
		c.d.NullTime(&s.decidedAt), &s.decidedBy, &s.note, &s.answer, c.d.NullTime(&s.expiresAt),
		c.d.NullTime(&s.claimedAt), &s.claimedBy, &s.execStatus, c.d.NullTime(&s.finishedAt), &s.detail,
		&s.key, &r.Fingerprint, &r.Title, &r.Description, &r.TargetType, &r.TargetID, &r.SessionID,
		&s.mode, &s.method, &s.cmdInput, &s.question,
		&s.observed, &s.cmdStatus, &s.cmdDetail, c.d.NullTime(&s.cmdAppliedAt),
		&s.reviewers, &r.Approvals, &s.escalateTo, c.d.Duration(&r.EscalateAfter), c.d.NullTime(&s.escalatedAt),
		c.d.NullTime(&s.purgedAt), &r.ReplacedBy, &r.DerivedFrom, &s.previewType, &s.previewContent, &r.Reversibility, &s.review,
		&s.instName, &s.ownerName, &s.deciderName), extra...)
}

func (s *requestScan) request() (airlock.Request, error) {
	r := s.r
	r.State, r.Kind = airlock.State(s.state), airlock.Kind(s.kind)
	r.Arguments, r.Context = s.args, s.rctx
	r.IdempotencyKey = s.key.String
	r.InstanceName, r.OwnerName = s.instName.String, s.ownerName.String
	r.Reviewers = splitGroups(s.reviewers)
	r.EscalateTo, r.EscalatedAt = splitGroups(s.escalateTo), s.escalatedAt.Ptr()
	r.PurgedAt = s.purgedAt.Ptr()
	if s.previewType != "" {
		r.Preview = &airlock.Preview{Type: s.previewType, Content: s.previewContent}
	}
	if s.decidedAt.Valid {
		r.Decision = Decision(r.State, s.note, s.answer, s.decidedAt.Time, s.decidedBy.String, s.deciderName.String, s.expiresAt.Ptr())
		r.Decision.Review = airlock.DecodeReviewClaim(s.review)
	}
	if s.claimedAt.Valid {
		r.Execution = Execution(s.claimedAt.Time, s.claimedBy.String, s.execStatus.String, s.finishedAt.Ptr(), s.detail)
	}
	r.Proposal = Proposal(s.mode.String, s.mode.Valid, s.method.String, s.method.Valid, s.cmdInput, s.observed)
	if s.cmdStatus.Valid {
		r.CommandResult = &airlock.CommandResult{Status: s.cmdStatus.String, Detail: s.cmdDetail, AppliedAt: s.cmdAppliedAt.Time}
	}
	q, err := Question(r.ID, s.question.String, s.question.Valid)
	if err != nil {
		return airlock.Request{}, err
	}
	r.Question = q
	return r, nil
}

// scanRequest reads RequestCols, then into extra any columns the
// statement yields after them.
func (c *Core) scanRequest(row Row, extra ...any) (airlock.Request, error) {
	var s requestScan
	if err := row.Scan(c.requestDest(&s, extra...)...); err != nil {
		return airlock.Request{}, err
	}
	return s.request()
}

// scanStamped reads a change's row: the request and the instant.
func (c *Core) scanStamped(row Row) (airlock.Request, time.Time, error) {
	var at time.Time
	r, err := c.scanRequest(row, c.d.Time(&at))
	return r, at, err
}

// errGrantUnused rolls back a create that inserted nothing after counting
// a grant's use.
var errGrantUnused = errors.New("a create that inserted nothing undoes its grant's use")

// CreateRequest creates a request in one INSERT … SELECT that finds the
// instance (live, and owned by the request's owner) and yields to an
// existing row with the same owner and idempotency key. Zero rows
// inserted then means a replay, a conflict or a missing instance, told
// apart by reading the key's row (notCreated). An empty key makes no
// replay: the request is always new.
//
// The INSERT returns only seq, the instant and the names: the request it
// returns is built from what was written (insertedRequest), since
// scanning every column back out of RETURNING was a sixth of a create's
// CPU in SQLite's one writer.
func (c *Core) CreateRequest(ctx context.Context, p store.NewRequestParams) (airlock.Request, bool, error) {
	p, cols, err := NewRequest(p)
	if err != nil {
		return airlock.Request{}, false, err
	}
	q := &c.q.Requests
	in := p.Request
	// The arguments all creates share, with room for the few each adds.
	args := append(make(Args, 0, 32), Args{{"id", in.ID}, {"instance", in.InstanceID}, {"owner", in.OwnerID}, {"kind", string(in.Kind)}, {"tool", in.Tool},
		{"arguments", Text(in.Arguments)}, {"timeout", in.Timeout}, {"reasoning", in.AgentReasoning}, {"context", Text(in.Context)},
		{"window", p.Window}, {"key", NullString(in.IdempotencyKey)}, {"fingerprint", in.Fingerprint},
		{"title", in.Title}, {"description", in.Description}, {"target_type", in.TargetType}, {"target_id", in.TargetID},
		{"session_id", in.SessionID}, {"mode", cols.Mode}, {"method", cols.Method}, {"input", cols.Input},
		{"question", cols.Question}, {"observed", cols.Observed}, {"reviewers", joinGroups(in.Reviewers)},
		{"approvals", in.Approvals}, {"escalate_to", joinGroups(in.EscalateTo)}, {"escalate_after", in.EscalateAfter}}...)
	args = append(args, previewArgs(in)...)
	var unless any
	if p.UnlessGranted != nil {
		unless = p.UnlessGranted.Principal
	}
	args = append(args, Arg{"unless_granted", unless})

	var (
		out     airlock.Request
		created bool
	)
	scan := func(row Row, d *airlock.InitialDecision) error {
		var (
			seq   int64
			at    time.Time
			names [3]sql.NullString
		)
		if err := row.Scan(&seq, c.d.Time(&at), &names[0], &names[1], &names[2]); err != nil {
			return err
		}
		out, created = insertedRequest(in, seq, at, p.Window, d, names), true
		return nil
	}
	if p.Initial == nil && p.Grant == nil && q.CreatePending != "" {
		args = append(args, Arg{"state", string(airlock.StatePending)}, Arg{"event", string(airlock.EventRequestCreated)}, Arg{"actor", p.Actor})
		args = append(args, traceArgs(ctx)...)
		err = c.d.Write(ctx, func(tx Tx) error {
			out, created = airlock.Request{}, false
			tx.Changed(in.ID)
			return tx.Last(q.CreatePending, args, func(row Row) error {
				if err := scan(row, nil); !noRows(err) {
					return err
				}
				return nil // nothing inserted, nor committed: notCreated says why
			})
		})
	} else {
		err = c.d.Write(ctx, func(tx Tx) error {
			out, created = airlock.Request{}, false
			d := p.Initial
			if p.Grant != nil {
				var err error
				if d, err = c.useGrant(tx, p.Grant, in); err != nil {
					return err
				}
			}
			state, decidedBy, note, validity := airlock.StatePending, any(nil), "", any(nil)
			if d != nil {
				state, decidedBy, note = d.Status, d.DecidedBy, d.Note
				if d.Status == airlock.StateApproved {
					validity = d.Validity
				}
			}
			err := scan(tx.QueryRow(q.Create, append(args[:len(args):cap(args)], Arg{"state", string(state)},
				Arg{"decided_by", decidedBy}, Arg{"note", note}, Arg{"validity", validity})), d)
			switch {
			case noRows(err) && p.Grant != nil && d != nil:
				return errGrantUnused
			case noRows(err):
				return nil
			case err != nil:
				return err
			}
			r := out
			if err := tx.RequestEvent(airlock.Event{Type: airlock.EventRequestCreated, At: r.CreatedAt, Actor: p.Actor,
				RequestID: r.ID, InstanceID: r.InstanceID, State: r.State}, r); err != nil {
				return err
			}
			if !r.State.Terminal() {
				return nil
			}
			return tx.RequestEvent(airlock.Event{Type: airlock.StateEvent(r.State), At: r.CreatedAt, Actor: d.DecidedBy,
				RequestID: r.ID, InstanceID: r.InstanceID, State: r.State, PolicyHash: d.PolicyHash}, r)
		})
		if errors.Is(err, errGrantUnused) {
			err = nil
		}
	}
	switch {
	case err != nil:
		return airlock.Request{}, false, c.d.Translate(err, "request", in.ID)
	case created:
		return out, true, nil
	}
	out, err = c.notCreated(ctx, p)
	return out, false, c.d.Translate(err, "request", in.ID)
}

// notCreated tells why a create inserted nothing: an earlier request of
// the same owner and idempotency key exists, which is the answer when the
// call is the same (a replay) and idempotency_conflict when it is not; or
// there is no live instance of the owner's to create it in (or a grant
// may cover the request). A conflicting row the insert saw was committed,
// so this later read sees it too.
func (c *Core) notCreated(ctx context.Context, p store.NewRequestParams) (airlock.Request, error) {
	q := &c.q.Requests
	in := p.Request
	if in.IdempotencyKey != "" {
		prev, err := c.scanRequest(c.d.QueryRow(ctx, q.ByKey, Args{{"owner", in.OwnerID}, {"key", in.IdempotencyKey}}))
		switch {
		case err == nil:
			return p.Replay(prev)
		case !noRows(err):
			return airlock.Request{}, err
		}
	}
	if p.UnlessGranted != nil {
		// The instance may be live: then a grant could cover the request.
		var live bool
		if err := c.d.QueryRow(ctx, q.InstanceLive, Args{{"instance", in.InstanceID}, {"owner", in.OwnerID}}).Scan(&live); err != nil {
			return airlock.Request{}, err
		}
		if live {
			return airlock.Request{}, store.ErrGrantMayCover
		}
	}
	return airlock.Request{}, airlock.NotFound("instance", in.InstanceID)
}

// insertedRequest is the row a create wrote, as a read returns it, from
// in, seq, the create's instant at, its window and decision d (nil for a
// pending request) and the names it returned. Times are kept to the
// microsecond; empty JSON is kept as NULL.
func insertedRequest(in airlock.Request, seq int64, at time.Time, window time.Duration, d *airlock.InitialDecision, names [3]sql.NullString) airlock.Request {
	r := in
	r.Seq, r.State = seq, airlock.StatePending
	r.CreatedAt, r.DeadlineAt = at, at.Add(window).Truncate(time.Microsecond)
	r.Arguments, r.Context = nilIfEmpty(in.Arguments), nilIfEmpty(in.Context)
	r.Decision, r.Execution, r.CommandResult = nil, nil, nil
	r.Reviewers, r.Votes = slices.Clone(in.Reviewers), nil
	r.EscalateTo, r.EscalateAfter, r.EscalatedAt = slices.Clone(in.EscalateTo), in.EscalateAfter.Truncate(time.Microsecond), nil
	r.InstanceName, r.OwnerName = names[0].String, names[1].String
	if d != nil {
		r.State = d.Status
		r.Decision = &airlock.Decision{Status: d.Status, Note: d.Note, DecidedAt: at, DecidedBy: d.DecidedBy,
			DecidedByName: airlock.DeciderName(d.DecidedBy, names[2].String)}
		if d.Status == airlock.StateApproved {
			r.Decision.ExpiresAt = new(at.Add(d.Validity).Truncate(time.Microsecond))
		}
	}
	if in.Proposal != nil {
		r.Proposal = &airlock.Proposal{Mode: in.Proposal.Mode}
		if cmd := in.Proposal.Command; cmd != nil {
			r.Proposal.Command = &airlock.Command{Method: cmd.Method, Input: nilIfEmpty(cmd.Input), Observed: nilIfEmpty(cmd.Observed)}
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
func nilIfEmpty(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	return slices.Clone(raw)
}

// useGrant counts one use of the first of u.IDs that covers request in,
// and returns the decision it makes; nil when none does.
func (c *Core) useGrant(tx Tx, u *store.GrantUse, in airlock.Request) (*airlock.InitialDecision, error) {
	for _, id := range u.IDs {
		var validity time.Duration
		err := tx.QueryRow(c.q.Requests.UseGrant, Args{{"grant", id}, {"tool", in.Tool}, {"instance", in.InstanceID},
			{"owner", in.OwnerID}, {"principal", u.Principal}, {"args", u.ArgumentsFingerprint}}).Scan(c.d.Duration(&validity))
		switch {
		case err == nil:
			return &airlock.InitialDecision{Status: airlock.StateApproved, DecidedBy: airlock.GrantActor(id), Validity: validity}, nil
		case !noRows(err):
			return nil, err
		}
	}
	return nil, nil
}

// GetRequest reads a request, with its votes when it takes several.
func (c *Core) GetRequest(ctx context.Context, id string) (airlock.Request, error) {
	r, err := c.scanRequest(c.d.QueryRow(ctx, c.q.Requests.Get, Args{{"id", id}}))
	if err == nil && r.NeedsQuorum() {
		r.Votes, err = c.readVotes(ctx, nil, id)
	}
	return r, c.d.Translate(err, "request", id)
}

// GetRequests reads the requests ids that exist, with their votes, in
// statements of at most store.MaxGetRequests IDs each.
func (c *Core) GetRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	out := make([]airlock.Request, 0, len(ids))
	for part := range slices.Chunk(ids, store.MaxGetRequests) {
		rs, err := all(ctx, c.d, func(row Row) (airlock.Request, error) { return c.scanRequest(row) }, c.q.Requests.GetMany, Args{{"ids", part}})
		if err != nil {
			return nil, c.d.Translate(err, "requests", part[0])
		}
		out = append(out, rs...)
	}
	if err := c.fillVotes(ctx, out); err != nil {
		return nil, c.d.Translate(err, "votes", "requests")
	}
	return out, nil
}

// RequestByKey reads the request an owner created with an idempotency key.
func (c *Core) RequestByKey(ctx context.Context, ownerID, key string) (airlock.Request, error) {
	r, err := c.scanRequest(c.d.QueryRow(ctx, c.q.Requests.ByKey, Args{{"owner", ownerID}, {"key", key}}))
	if noRows(err) {
		return airlock.Request{}, airlock.Errorf(airlock.CodeNotFound, "no request with idempotency key %q", key)
	}
	return r, c.d.Translate(err, "request with key", key)
}

// scanVote reads a vote of Votes, after the columns lead reads (VotesOf's
// request ID).
func (c *Core) scanVote(row Row, lead ...any) (airlock.Vote, error) {
	var (
		v      airlock.Vote
		name   sql.NullString
		status string
		review string
	)
	if err := row.Scan(append(lead, &v.Principal, &v.Actor, &name, &status, &v.Note, c.d.Time(&v.At), &review)...); err != nil {
		return airlock.Vote{}, err
	}
	v.Status, v.Name = airlock.State(status), airlock.DeciderName(v.Actor, name.String)
	v.Review = airlock.DecodeReviewClaim(review)
	return v, nil
}

// readVotes reads request id's votes, in the order they were cast: in tx,
// or with a read when tx is nil.
func (c *Core) readVotes(ctx context.Context, tx Tx, id string) ([]airlock.Vote, error) {
	scan := func(row Row) (airlock.Vote, error) { return c.scanVote(row) }
	if tx != nil {
		return txAll(tx, scan, c.q.Requests.Votes, Args{{"id", id}})
	}
	return all(ctx, c.d, scan, c.q.Requests.Votes, Args{{"id", id}})
}

// ListRequests lists requests matching f, newest first. One statement
// picks the page by seq and the stored size of each candidate, and reads
// the columns of only the requests that fit it: up to the limit and until
// the sizes before a request reach f.MaxBytes. It also counts the
// candidates, one more than the limit at most, to tell whether more
// follow.
func (c *Core) ListRequests(ctx context.Context, f store.RequestFilter) ([]airlock.Request, bool, error) {
	where, args, err := listWhere(f)
	if err != nil {
		return nil, false, err
	}
	limit := f.PageSize()
	budget := int64(math.MaxInt64)
	if f.MaxBytes > 0 {
		budget = int64(f.MaxBytes)
	}
	args = append(args, Arg{"candidates", limit + 1}, Arg{"limit", limit}, Arg{"budget", budget})
	rows, err := c.d.Query(ctx, strings.Replace(c.q.Requests.List, whereMarker, where, 1), args)
	if err != nil {
		return nil, false, c.d.Translate(err, "requests", "list")
	}
	defer rows.Close()
	// One set of destinations for the page's rows, cleared before each:
	// building them for each of a page's 200 rows was a fifth of its scan.
	var found int64
	var s requestScan
	dest := c.requestDest(&s, &found)
	out := make([]airlock.Request, 0, limit)
	for rows.Next() {
		s = requestScan{}
		if err := rows.Scan(dest...); err != nil {
			return nil, false, c.d.Translate(err, "requests", "list")
		}
		r, err := s.request()
		if err != nil {
			return nil, false, c.d.Translate(err, "requests", "list")
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, c.d.Translate(err, "requests", "list")
	}
	rows.Close()
	if err := c.fillVotes(ctx, out); err != nil {
		return nil, false, c.d.Translate(err, "votes", "list")
	}
	return out, found > int64(len(out)), nil
}

// fillVotes reads, in one query, the votes of those of rs that need
// several approvals.
func (c *Core) fillVotes(ctx context.Context, rs []airlock.Request) error {
	ids, at := airlock.QuorumRequests(rs)
	if len(ids) == 0 {
		return nil
	}
	rows, err := c.d.Query(ctx, c.q.Requests.VotesOf, Args{{"ids", ids}})
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		v, err := c.scanVote(rows, &id)
		if err != nil {
			return err
		}
		rs[at[id]].Votes = append(rs[at[id]].Votes, v)
	}
	return rows.Err()
}

// ListRequestSummaries lists requests matching f as summaries, newest
// first, reading only SummaryCols.
func (c *Core) ListRequestSummaries(ctx context.Context, f store.RequestFilter) ([]airlock.RequestSummary, bool, error) {
	where, args, err := listWhere(f)
	if err != nil {
		return nil, false, err
	}
	limit := f.PageSize()
	out, err := all(ctx, c.d, c.scanSummary, strings.Replace(c.q.Requests.Summaries, whereMarker, where, 1),
		append(args, Arg{"candidates", limit + 1}))
	if err != nil {
		return nil, false, c.d.Translate(err, "requests", "list")
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// listWhere is the WHERE clause, with its arguments, that selects f's
// requests (RequestFilterConds); empty when f selects every request. Its
// columns are unqualified: the lists read one table.
func listWhere(f store.RequestFilter) (string, Args, error) {
	if err := f.Validate(); err != nil {
		return "", nil, err
	}
	var (
		where strings.Builder
		sep   = ` WHERE `
		args  Args
	)
	RequestFilterConds(f, func(column, op, name string, arg any) {
		for _, part := range [...]string{sep, column, " ", op, " @", name} {
			where.WriteString(part)
		}
		sep, args = ` AND `, append(args, Arg{name, arg})
	})
	return where.String(), args, nil
}

// scanSummary reads SummaryCols.
func (c *Core) scanSummary(row Row) (airlock.RequestSummary, error) {
	var (
		r                           airlock.RequestSummary
		state, kind                 string
		decidedAt, expiresAt        NullTime
		decidedBy, question, method sql.NullString
		head                        sql.NullString
		names                       [3]sql.NullString
		note, answer, reviewers     string
	)
	if err := row.Scan(&r.Seq, &r.ID, &r.InstanceID, &r.OwnerID, &state, &kind, &r.Tool, &r.Title, &r.SessionID,
		c.d.Time(&r.CreatedAt), c.d.Time(&r.DeadlineAt), c.d.NullTime(&decidedAt), &decidedBy, &note, &answer,
		c.d.NullTime(&expiresAt), &question, &method, &head, &reviewers, &r.Approvals, &r.ApprovedVotes, &r.Purged,
		&names[0], &names[1], &names[2]); err != nil {
		return airlock.RequestSummary{}, err
	}
	r.State, r.Kind = airlock.State(state), airlock.Kind(kind)
	r.Reviewers = splitGroups(reviewers)
	r.CommandMethod = method.String
	r.ArgumentsHead, r.ArgumentsCut = airlock.ArgumentsHead(head.String)
	r.InstanceName, r.OwnerName = names[0].String, names[1].String
	if decidedAt.Valid {
		r.Decision = Decision(r.State, note, answer, decidedAt.Time, decidedBy.String, names[2].String, expiresAt.Ptr())
	}
	q, err := Question(r.ID, question.String, question.Valid)
	if err != nil {
		return airlock.RequestSummary{}, err
	}
	r.Question = q
	return r, nil
}

// NextDeadline returns the earliest deadline of a pending request.
func (c *Core) NextDeadline(ctx context.Context) (time.Time, bool, error) {
	var next NullTime
	err := c.d.QueryRow(ctx, c.q.Requests.NextDeadline, Args{{"probe", store.NextDeadlineExact + 1}, {"exact", store.NextDeadlineExact}}).Scan(c.d.NullTime(&next))
	if err != nil || !next.Valid {
		return time.Time{}, false, c.d.Translate(err, "requests", "next deadline")
	}
	return next.Time, true, nil
}

// CountPending returns how many requests are pending, for the pending
// gauge.
func (c *Core) CountPending(ctx context.Context) (int, error) {
	var n int
	err := c.d.QueryRow(ctx, c.q.Requests.CountPending, nil).Scan(&n)
	return n, c.d.Translate(err, "requests", "count pending")
}

// Bounds for ListEvents.
const (
	defaultEventLimit = 100
	maxEventLimit     = 1000
)

// ListEvents returns up to limit events with ID > after, oldest first
// (default 100, at most 1000). It returns only settled events
// (Dialect.Settle), so resuming after the last ID it returned never
// skips an event that commits later.
func (c *Core) ListEvents(ctx context.Context, after int64, limit int) ([]airlock.Event, error) {
	if limit <= 0 {
		limit = defaultEventLimit
	}
	limit = min(limit, maxEventLimit)
	evs, err := c.readEvents(ctx, after, math.MaxInt64, limit)
	if err != nil || len(evs) == 0 {
		return evs, c.d.Translate(err, "events", "list")
	}
	upto, again, err := c.d.Settle(ctx, evs[len(evs)-1].ID)
	if err != nil {
		return nil, c.d.Translate(err, "events", "list")
	}
	if again {
		evs, err = c.readEvents(ctx, after, upto, limit)
	}
	return evs, c.d.Translate(err, "events", "list")
}

// readEvents reads up to limit events with after < ID <= upto, oldest
// first.
func (c *Core) readEvents(ctx context.Context, after, upto int64, limit int) ([]airlock.Event, error) {
	return all(ctx, c.d, c.scanEvent, c.q.Requests.Events, Args{{"after", after}, {"upto", upto}, {"limit", limit}})
}

// CreatedEvent returns the request.created event of request id, with the
// trace context it was created in; not_found when there is none.
func (c *Core) CreatedEvent(ctx context.Context, id string) (airlock.Event, error) {
	e, err := c.scanEvent(c.d.QueryRow(ctx, c.q.Requests.CreatedEvent, Args{{"id", id}}))
	return e, c.d.Translate(err, "request", id)
}

// scanEvent reads a row of RequestSQL.Events's columns.
func (c *Core) scanEvent(row Row) (airlock.Event, error) {
	var (
		e          airlock.Event
		typ, state string
	)
	if err := row.Scan(&e.ID, &typ, c.d.Time(&e.At), &e.Actor, &e.RequestID, &e.InstanceID, &e.TokenID, &state, &e.Subject, &e.PolicyHash, &e.UID, &e.TraceID, &e.SpanID); err != nil {
		return airlock.Event{}, err
	}
	e.Type, e.State = airlock.EventType(typ), airlock.State(state)
	return e, nil
}

// previewArgs are the adapter's claims of request in as a create's
// arguments.
func previewArgs(in airlock.Request) Args {
	var t, c string
	if in.Preview != nil {
		t, c = in.Preview.Type, in.Preview.Content
	}
	return Args{{"preview_type", t}, {"preview_content", c}, {"reversibility", in.Reversibility}}
}
