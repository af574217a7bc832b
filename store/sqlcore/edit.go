package sqlcore

import (
	"context"
	"database/sql"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Edit approves a request with changed arguments in one transaction
// (store.Requests.Edit): the original's denial is Decide's
// compare-and-set, so it races a decision, a cancel and the deadline as
// any denial does; the new request is inserted by Create and decided by
// Decide's compare-and-set, both at the denial's instant, so it is born
// with the original's deadline and is decided before it.
func (c *Core) Edit(ctx context.Context, p store.EditParams) (original, edited airlock.Request, err error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return airlock.Request{}, airlock.Request{}, err
	}
	q := &c.q.Requests
	var refused *airlock.Error
	err = c.d.Write(ctx, func(tx Tx) error {
		refused = nil
		check := func(r airlock.Request, creator string) error {
			if err := r.CheckEditable(); err != nil {
				return err
			}
			return p.Check(r, creator)
		}
		// The original ends denied, by the editor, with the note.
		deny := Args{{"id", p.ID}, {"state", string(airlock.StateDenied)}, {"actor", p.Actor}, {"note", p.Note},
			{"answer", ""}, {"validity", nil}, {"review", p.Review.Encode()}}
		orig, at, err := c.scanCAS(step{check: check}, tx.QueryRow(q.Decide, deny))
		if noRows(err) {
			cur, err := c.settle(tx, p.ID)
			if err != nil {
				return err
			}
			refused = cur.DecisionConflict()
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(q.Rebind, Args{{"id", orig.ID}, {"replaced_by", p.NewID}}); err != nil {
			return err
		}
		orig.ReplacedBy = p.NewID
		if err := tx.RequestEvent(airlock.Event{Type: airlock.EventRequestDenied, At: at, Actor: p.Actor,
			RequestID: orig.ID, InstanceID: orig.InstanceID, State: orig.State}, orig); err != nil {
			return err
		}

		// The new request: the original's call with the edited arguments,
		// created at the same instant with the same deadline.
		in := orig
		in.ID, in.Arguments, in.DerivedFrom, in.ReplacedBy = p.NewID, p.Arguments, orig.ID, ""
		in.IdempotencyKey, in.Fingerprint = "", ""
		window := orig.DeadlineAt.Sub(at)
		np, cols, err := NewRequest(store.NewRequestParams{Request: in, Window: window, Actor: p.Actor})
		if err != nil {
			return err
		}
		in = np.Request
		args := Args{{"id", in.ID}, {"instance", in.InstanceID}, {"owner", in.OwnerID}, {"kind", string(in.Kind)}, {"tool", in.Tool},
			{"arguments", Text(in.Arguments)}, {"timeout", in.Timeout}, {"reasoning", in.AgentReasoning}, {"context", Text(in.Context)},
			{"window", window}, {"key", NullString("")}, {"fingerprint", ""},
			{"title", in.Title}, {"description", in.Description}, {"target_type", in.TargetType}, {"target_id", in.TargetID},
			{"session_id", in.SessionID}, {"mode", cols.Mode}, {"method", cols.Method}, {"input", cols.Input},
			{"question", cols.Question}, {"observed", cols.Observed}, {"reviewers", joinGroups(in.Reviewers)},
			{"approvals", in.Approvals}, {"escalate_to", joinGroups(in.EscalateTo)}, {"escalate_after", in.EscalateAfter},
			{"unless_granted", nil}, {"state", string(airlock.StatePending)}, {"decided_by", nil}, {"note", ""}, {"validity", nil},
			{Now, at}}
		args = append(args, previewArgs(in)...)
		var (
			seq     int64
			created time.Time
			names   [3]sql.NullString
		)
		if err := tx.QueryRow(q.Create, args).Scan(&seq, c.d.Time(&created), &names[0], &names[1], &names[2]); err != nil {
			if noRows(err) {
				// The original was pending on this instance a moment ago;
				// a delete that won since would have cancelled it.
				return airlock.NotFound("instance", in.InstanceID)
			}
			return err
		}
		n := insertedRequest(in, seq, created, window, nil, names)
		if _, err := tx.Exec(q.Derive, Args{{"id", n.ID}, {"derived_from", orig.ID}}); err != nil {
			return err
		}
		if err := tx.RequestEvent(airlock.Event{Type: airlock.EventRequestCreated, At: created, Actor: p.Actor,
			RequestID: n.ID, InstanceID: n.InstanceID, State: n.State}, n); err != nil {
			return err
		}

		// The editor's decision on it: an approval, or a vote toward its
		// quorum.
		d := p.DecideParams
		d.ID = n.ID
		approve := Args{{"id", n.ID}, {"state", string(airlock.StateApproved)}, {"actor", p.Actor}, {"note", p.Note},
			{"answer", ""}, {"validity", p.Validity}, {Now, at}, {"review", p.Review.Encode()}}
		st := step{check: d.Check, vote: func(tx Tx, r airlock.Request, at time.Time) (airlock.Request, error) {
			if !r.NeedsQuorum() {
				return r, nil
			}
			if _, err := tx.Exec(q.InsertVote, Args{{"id", r.ID}, {"principal", d.VotePrincipal()}, {"actor", d.Actor},
				{"state", string(airlock.StateApproved)}, {"note", d.Note}, {Now, at}, {"review", d.Review.Encode()}}); err != nil {
				return r, err
			}
			var err error
			r.Votes, err = txAll(tx, func(row Row) (airlock.Vote, error) { return c.scanVote(row) }, q.Votes, Args{{"id", r.ID}})
			return r, err
		}}
		r, at2, err := c.scanCAS(st, tx.QueryRow(q.Decide, approve))
		if err != nil {
			return err
		}
		if r, err = st.won(tx, airlock.EventRequestApproved, p.Actor, r, at2); err != nil {
			return err
		}
		original, edited = orig, r
		return nil
	})
	if err != nil {
		return airlock.Request{}, airlock.Request{}, c.d.Translate(err, "request", p.ID)
	}
	if refused != nil {
		return airlock.Request{}, airlock.Request{}, refused
	}
	return original, edited, nil
}
