package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// The lifecycle's transitions: each is one compare-and-set, judged and
// stamped by its statement's instant; zero rows means another change won
// (or the request does not exist), and the transition reads what holds.

// step is work a transition does in its transaction besides its
// compare-and-set. An error from any of it rolls the whole transaction
// back: the request stays as it was.
type step struct {
	// plain, when set, is tried first: a compare-and-set with the same
	// arguments that needs neither lock nor then. When it changes no row,
	// the transition goes on as without it.
	plain string
	// lock, when set, runs before the compare-and-set, to take the row
	// locks the change will need before the compare-and-set reads the
	// clock: a lock waited for after the clock was read would let the
	// change commit later than the instant it was judged by.
	lock func(tx Tx) error
	// check, when set, judges the request a compare-and-set returned with
	// the principal of its creator (which the statement returns after the
	// instant); its error is the transition's answer.
	check func(r airlock.Request, creatorPrincipal string) error
	// vote, when set, runs right after a compare-and-set (plain or not)
	// that won and passed check: it records a decision's vote, when the
	// request takes votes.
	vote func(tx Tx, r airlock.Request, at time.Time) (airlock.Request, error)
	// then, when set, runs after a compare-and-set (not plain) won and its
	// event was appended, with the request and the instant it was judged
	// by: an approved command's effect.
	then func(tx Tx, r airlock.Request, at time.Time) (airlock.Request, error)
}

// scan reads a compare-and-set's row and applies st.check.
func (c *Core) scanCAS(st step, row Row) (airlock.Request, time.Time, error) {
	if st.check == nil {
		return c.scanStamped(row)
	}
	var (
		at      time.Time
		creator sql.NullString
	)
	r, err := c.scanRequest(row, c.d.Time(&at), &creator)
	if err != nil {
		return r, at, err
	}
	return r, at, st.check(r, creator.String)
}

// won finishes a compare-and-set that changed request r at at: its vote,
// then its event, of type event unless the request stayed pending (the
// change was a vote that did not decide: request.voted).
func (st step) won(tx Tx, event airlock.EventType, actor string, r airlock.Request, at time.Time) (airlock.Request, error) {
	if st.vote != nil {
		var err error
		if r, err = st.vote(tx, r, at); err != nil {
			return r, err
		}
	}
	if r.State == airlock.StatePending {
		event = airlock.EventRequestVoted
	}
	return r, tx.RequestEvent(airlock.Event{Type: event, At: at, Actor: actor, RequestID: r.ID, InstanceID: r.InstanceID, State: r.State}, r)
}

// transition runs one compare-and-set (cas with args, and st) on request
// id and appends an event of type event by actor. When it changes no row,
// another change won: transition settles the row (expiring it if it is
// pending past its deadline — itself a compare-and-set) and returns
// refuse's error for what holds. The settling commits even though the
// call is refused, so a request refused for its deadline is expired from
// then on.
func (c *Core) transition(ctx context.Context, id, actor string, event airlock.EventType,
	cas string, args Args, st step, refuse func(airlock.Request) *airlock.Error,
) (airlock.Request, error) {
	var (
		out     airlock.Request
		refused *airlock.Error
	)
	err := c.d.Write(ctx, func(tx Tx) error {
		refused = nil
		if st.plain != "" {
			r, at, err := c.scanCAS(st, tx.QueryRow(st.plain, args))
			if err == nil {
				out, err = st.won(tx, event, actor, r, at)
				return err
			}
			if !noRows(err) {
				return err
			}
		}
		if st.lock != nil {
			if err := st.lock(tx); err != nil {
				return err
			}
		}
		r, at, err := c.scanCAS(st, tx.QueryRow(cas, args))
		if err == nil {
			if r, err = st.won(tx, event, actor, r, at); err != nil {
				return err
			}
			out = r
			if st.then != nil {
				out, err = st.then(tx, r, at)
			}
			return err
		}
		if !noRows(err) {
			return err
		}
		cur, err := c.settle(tx, id)
		if err != nil {
			return err
		}
		refused = refuse(cur)
		return nil
	})
	if err != nil {
		return airlock.Request{}, c.d.Translate(err, "request", id)
	}
	if refused != nil {
		return airlock.Request{}, refused
	}
	return out, nil
}

// settle returns request id as it holds now: a pending request whose
// deadline has come is expired first, by compare-and-set, with its event.
func (c *Core) settle(tx Tx, id string) (airlock.Request, error) {
	q := &c.q.Requests
	r, at, err := c.scanStamped(tx.QueryRow(q.ExpireOne, Args{{"id", id}, {"actor", airlock.ActorExpiry}}))
	if err == nil {
		return r, tx.RequestEvent(airlock.Event{Type: airlock.EventRequestExpired, At: at, Actor: airlock.ActorExpiry,
			RequestID: r.ID, InstanceID: r.InstanceID, State: r.State}, r)
	}
	if !noRows(err) {
		return airlock.Request{}, err
	}
	return c.scanRequest(tx.QueryRow(q.Get, Args{{"id", id}}))
}

// Decide records a reviewer's decision with one compare-and-set. On a
// request that needs several approvals the same write counts the vote
// and ends the request only when it completes the quorum; the vote's row,
// whose key refuses a principal's second vote, is inserted in the same
// transaction. An approval runs the request's command, if it proposes
// one, in its transaction: most requests propose none, and ApprovePlain
// approves those in one statement; the rest take the path that locks the
// command's rows first (lockCommand).
func (c *Core) Decide(ctx context.Context, p store.DecideParams) (airlock.Request, error) {
	if err := p.Validate(); err != nil {
		return airlock.Request{}, err
	}
	q := &c.q.Requests
	var validity any
	if p.Status == airlock.StateApproved {
		validity = p.Validity
	}
	if p.Answer == "" && q.DecideOnce != "" && p.Passkey == nil {
		r, ok, err := c.decideOnce(ctx, p, validity)
		if err != nil || ok {
			return r, c.d.Translate(err, "request", p.ID)
		}
	}
	st := step{check: p.Check, vote: func(tx Tx, r airlock.Request, at time.Time) (airlock.Request, error) {
		// A passkey-signed decision keeps its assertion, after the vote
		// (a principal's second vote is refused before it).
		if p.Passkey == nil {
			return c.vote(tx, p, r, at)
		}
		r, err := c.vote(tx, p, r, at)
		if err != nil {
			return r, err
		}
		return r, c.insertPasskeyDecision(tx, p, at)
	}}
	if p.Status == airlock.StateApproved {
		st.plain = q.ApprovePlain
		var locked *lockedCommand
		st.lock = func(tx Tx) (err error) {
			locked, err = c.lockCommand(tx, p.ID)
			return err
		}
		st.then = func(tx Tx, r airlock.Request, at time.Time) (airlock.Request, error) {
			return c.applyApprovedCommand(tx, locked, r, at)
		}
	}
	return c.transition(ctx, p.ID, p.Actor, airlock.StateEvent(p.Status), q.Decide, Args{{"id", p.ID}, {"state", string(p.Status)},
		{"actor", p.Actor}, {"note", p.Note}, {"answer", p.Answer}, {"validity", validity}, {"review", p.Review.Encode()}}, st, airlock.Request.DecisionConflict)
}

// vote records p's vote on r when r takes votes.
func (c *Core) vote(tx Tx, p store.DecideParams, r airlock.Request, at time.Time) (airlock.Request, error) {
	q := &c.q.Requests
	if !r.NeedsQuorum() {
		return r, nil
	}
	n, err := tx.Exec(q.InsertVote, Args{{"id", r.ID}, {"principal", p.VotePrincipal()}, {"actor", p.Actor},
		{"state", string(p.Status)}, {"note", p.Note}, {Now, at}, {"review", p.Review.Encode()}})
	if err != nil {
		return r, err
	}
	if n == 0 {
		return r, r.DuplicateVote(p.VotePrincipal())
	}
	r.Votes, err = txAll(tx, func(row Row) (airlock.Vote, error) { return c.scanVote(row) }, q.Votes, Args{{"id", r.ID}})
	return r, err
}

// decideOnce tries DecideOnce, the fast path of a decision that needs
// nothing besides itself. It reports whether it decided; when it did not,
// nothing changed, and the request needs Decide's general path, which
// also says why a decision is refused.
func (c *Core) decideOnce(ctx context.Context, p store.DecideParams, validity any) (r airlock.Request, ok bool, err error) {
	args := Args{{"id", p.ID}, {"state", string(p.Status)}, {"actor", p.Actor}, {"note", p.Note}, {"validity", validity},
		{"principal", p.Principal}, {"event", string(airlock.StateEvent(p.Status))}, {"review", p.Review.Encode()}}
	args = append(args, traceArgs(ctx)...)
	err = c.d.Write(ctx, func(tx Tx) error {
		r, ok = airlock.Request{}, false
		tx.Changed(p.ID)
		return tx.Last(c.q.Requests.DecideOnce, args, func(row Row) error {
			got, _, err := c.scanStamped(row)
			switch {
			case noRows(err):
				return nil
			case err != nil:
				return err
			}
			r, ok = got, true
			return nil
		})
	})
	return r, ok, err
}

// lockedCommand is what an approval of a command proposal read (and,
// where writers run at once, locked) before its compare-and-set read the
// clock: the requesting token and the command's target (for work_move,
// the item). A nil field is a row that did not exist.
type lockedCommand struct {
	token *airlock.Token
	item  *airlock.WorkItem
}

// lockCommand reads (locks) the rows that approving request id's command
// will read and change, before the approval's compare-and-set reads the
// clock. It returns nil when id is no pending command proposal (or does
// not exist); the compare-and-set then decides (a request that is not
// pending never is again, so it cannot approve one).
//
// Its locks come in one order, token then target then request, and no
// other transaction takes a token or an item lock after a request lock, so
// they cannot deadlock.
func (c *Core) lockCommand(tx Tx, id string) (*lockedCommand, error) {
	q := &c.q.Requests
	var (
		owner         string
		method, input sql.NullString
	)
	err := tx.QueryRow(q.CommandOf, Args{{"id", id}}).Scan(&owner, &method, &input)
	if noRows(err) || (err == nil && !method.Valid) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var locked lockedCommand
	tok, err := c.scanToken(tx.QueryRow(q.CommandToken, Args{{"id", owner}}))
	switch {
	case err == nil:
		locked.token = &tok
	case !noRows(err):
		return nil, err
	}
	if method.String == airlock.MethodWorkMove && input.Valid {
		var in airlock.WorkMoveInput
		if json.Unmarshal([]byte(input.String), &in) == nil {
			w, err := c.scanWorkItem(tx.QueryRow(q.CommandItem, Args{{"id", in.ItemID}}))
			switch {
			case err == nil:
				locked.item = &w
			case !noRows(err):
				return nil, err
			}
		}
	}
	return &locked, nil
}

// applyApprovedCommand runs, in the transaction that has just approved r
// at the instant at, the command r proposes, re-checking at this moment
// that the requesting token may still run it and that the target is as it
// was when requested; then it records the command's result on r. It
// returns r unchanged when r is not an approved command proposal. Any
// error rolls the approval back.
func (c *Core) applyApprovedCommand(tx Tx, locked *lockedCommand, r airlock.Request, at time.Time) (airlock.Request, error) {
	if r.State != airlock.StateApproved || r.Proposal == nil || r.Proposal.Command == nil {
		return r, nil
	}
	if locked == nil {
		// lockCommand saw no command on a request the compare-and-set then
		// approved as one: a stored command never changes, so this is a bug.
		return r, fmt.Errorf("request %s: its command was not locked before its approval", r.ID)
	}
	detail, err := ApplyCommand(r, c.fault, func() (string, error) { return c.workMove(tx, locked, r, at) })
	if err != nil {
		return r, err
	}
	return c.scanRequest(tx.QueryRow(c.q.Requests.ApplyCommand, Args{{"id", r.ID}, {Now, at},
		{"status", airlock.CommandApplied}, {"detail", detail}}))
}

// workMove moves a work_move's item with one compare-and-set on the column
// it was in when requested, after checking the requesting token. Both rows
// were read (locked) by lockCommand, so what it reads there is what holds
// until the transaction commits.
func (c *Core) workMove(tx Tx, locked *lockedCommand, r airlock.Request, at time.Time) (string, error) {
	m, err := r.StoredWorkMove()
	if err != nil {
		return "", err
	}
	if err := m.CheckToken(locked.token); err != nil {
		return "", err
	}
	item, err := c.scanWorkItem(tx.QueryRow(c.q.Requests.MoveItem, Args{{"id", m.Input.ItemID}, {"from", m.Observed.FromColumnKey},
		{"to", m.Input.ColumnKey}, {Now, at}}))
	if noRows(err) {
		cur, err := c.scanWorkItem(tx.QueryRow(c.q.Board.Item, Args{{"id", m.Input.ItemID}}))
		return "", MoveLost(m, cur, err)
	}
	if err != nil {
		return "", err
	}
	ev := m.Event(item)
	ev.At = at
	if err := tx.Event(ev); err != nil {
		return "", err
	}
	return m.Detail(item), nil
}

// Cancel withdraws a pending request with one compare-and-set.
func (c *Core) Cancel(ctx context.Context, id, actor string) (airlock.Request, error) {
	return c.transition(ctx, id, actor, airlock.EventRequestCancelled, c.q.Requests.Cancel,
		Args{{"id", id}, {"actor", actor}}, step{}, airlock.OwnerOnly(actor, airlock.Request.DecisionConflict))
}

// ClaimExecution claims the one execution attempt with one compare-and-set,
// and hands the claimed request to prepare before the commit.
func (c *Core) ClaimExecution(ctx context.Context, id, actor string, prepare func(airlock.Request)) (airlock.Request, error) {
	var st step
	if prepare != nil {
		st.then = func(_ Tx, r airlock.Request, _ time.Time) (airlock.Request, error) {
			prepare(r)
			return r, nil
		}
	}
	return c.transition(ctx, id, actor, airlock.EventExecutionClaimed, c.q.Requests.Claim,
		Args{{"id", id}, {"actor", actor}}, st, airlock.OwnerOnly(actor, airlock.Request.ClaimConflict))
}

// ReportExecution records a claimed execution's outcome with one
// compare-and-set on exec_status = 'claimed'. A repeated report of the same
// status returns the request as first reported, so a retried report is
// harmless; any other outcome after the first is already_executed.
func (c *Core) ReportExecution(ctx context.Context, id string, in airlock.ReportInput, actor string) (airlock.Request, error) {
	if err := in.Validate(); err != nil {
		return airlock.Request{}, err
	}
	q := &c.q.Requests
	var out airlock.Request
	err := c.d.Write(ctx, func(tx Tx) error {
		r, at, err := c.scanStamped(tx.QueryRow(q.Report, Args{{"id", id}, {"status", string(in.Status)}, {"detail", in.Detail}, {"actor", actor}}))
		if err == nil {
			out = r
			return tx.RequestEvent(airlock.Event{Type: airlock.EventExecutionReported, At: at, Actor: actor,
				RequestID: r.ID, InstanceID: r.InstanceID, State: r.State}, r)
		}
		if !noRows(err) {
			return err
		}
		cur, err := c.scanRequest(tx.QueryRow(q.Get, Args{{"id", id}}))
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
		return airlock.Request{}, c.d.Translate(err, "request", id)
	}
	return out, nil
}

// ExpireDue expires, in one UPDATE, up to limit pending requests whose
// deadline is at or before now (store.DefaultExpireBatch when
// limit <= 0), earliest second of deadline first and in creation order
// within a second, and appends an event for each. It returns each with
// StateCols' fields only. Writers sweeping at once (PostgreSQL's
// replicas) split the due rows between them, so each request expires
// once.
func (c *Core) ExpireDue(ctx context.Context, limit int) ([]airlock.Request, error) {
	limit = store.Batch(limit)
	q := &c.q.Requests
	return c.expire(ctx, q.ExpireDueEvents, q.ExpireDue, Args{{"limit", limit}}, limit)
}

// ExpireRequests expires, in one UPDATE, those of ids that are pending and
// due, as ExpireDue would, and returns them likewise.
func (c *Core) ExpireRequests(ctx context.Context, ids []string) ([]airlock.Request, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	q := &c.q.Requests
	return c.expire(ctx, q.ExpireByIDEvents, q.ExpireByID, Args{{"ids", ids}}, len(ids))
}

// expire runs an expiry statement (update, with the rows it selects by
// selection) and appends an event for each request it expired, in the
// order a sweep takes them: all at once before it, from the very rows it
// then expires, when the dialect has events for it (one INSERT … SELECT,
// where handing the returned rows back was a fifth of a sweep in SQLite),
// or one by one from the rows it returns.
func (c *Core) expire(ctx context.Context, events, update string, selection Args, size int) ([]airlock.Request, error) {
	var out []airlock.Request
	err := c.d.Write(ctx, func(tx Tx) error {
		out = nil
		args := append(Args{{"actor", airlock.ActorExpiry}}, selection...)
		if events != "" {
			if _, err := tx.Exec(events, append(append(args[:len(args):len(args)], Arg{"event", string(airlock.EventRequestExpired)}), traceArgs(ctx)...)); err != nil {
				return err
			}
		}
		rows, err := tx.Query(update, args)
		if err != nil {
			return err
		}
		rs := make([]airlock.Request, 0, size)
		var at time.Time
		for rows.Next() {
			r, err := c.scanChanged(rows, c.d.Time(&at))
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
		slices.SortFunc(rs, compareSweepOrder)
		if events != "" {
			err = tx.Instructions(at, rs)
		} else {
			err = tx.StateEvents(airlock.ActorExpiry, at, rs)
		}
		out = rs
		return err
	})
	return out, c.d.Translate(err, "requests", "expire")
}

// EscalateDue widens the requests whose escalation is due to their
// escalation groups, once (across writers: a statement's WHERE keeps each
// to once), and appends request.escalated for each.
func (c *Core) EscalateDue(ctx context.Context, limit int) ([]string, error) {
	ids, err := c.eventPerChange(ctx, c.q.Requests.Escalate, Args{{"limit", store.Batch(limit)}},
		airlock.EventRequestEscalated, airlock.ActorEscalation, true)
	return ids, c.d.Translate(err, "requests", "escalate")
}
