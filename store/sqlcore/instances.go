package sqlcore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
)

// InstanceSQL are the statements of instances and MCP sessions (which
// are instances): the instance methods of store.Requests, and
// store.Sessions but RequestByKey. An instance is read as its id,
// owner_id, name, metadata, created_at, count of pending requests, kind,
// last_seen_at, deleted_at and token_audience; an instruction as its seq, id,
// session_id, request_id, status, note, answer and created_at; a
// request a close changed as StateCols.
type InstanceSQL struct {
	// Create stores instance @id (@owner, @name, @metadata, @kind,
	// @audience),
	// dated @now, and returns its instant.
	Create string
	// Audience selects the token_audience of instance @id, deleted or not.
	Audience string
	// Live selects instance @id unless deleted.
	Live string
	// List selects live instances newest first, of owner @owner unless
	// it is ''.
	List string
	// Lock, optional, locks instance @id before it is deleted, and yields
	// no row when it is not live; it must conflict with the lock a create
	// of a request in it takes, so that none is born in a deleted
	// instance.
	Lock string `sql:"optional"`
	// LockPending, optional, locks the pending requests of instance @id,
	// before Close reads the clock.
	LockPending string `sql:"optional"`
	// Close marks instance @id, unless deleted, deleted at @now, and
	// returns the instant; no row when it was deleted.
	Close string
	// ExpirePending expires the pending requests of instance @id that are
	// due at @now, by @actor, as an expiry does (dated at the deadline),
	// and returns them.
	ExpirePending string
	// CancelPending cancels the pending requests of instance @id that are
	// not due at @now, by @actor, dated @now, and returns them.
	CancelPending string

	// Session selects session @id, open or closed.
	Session string
	// Sessions selects up to @limit sessions, open or closed, newest
	// first, of owner @owner unless it is ''.
	Sessions string
	// SessionState selects the kind and deleted_at of instance @id, and
	// locks it as Lock does.
	SessionState string
	// Heartbeat stamps open session @id seen at @now and returns the
	// instant; no row when it is not open.
	Heartbeat string
	// TakeInstructions marks the undelivered instructions of session @id
	// delivered at @now and returns them.
	TakeInstructions string
	// Instance selects instance @id, deleted or not.
	Instance string
	// CreateMCP stores instance @id, @owner's default MCP instance,
	// dated @now, unless the owner has a live one: then no row. It
	// returns the instant.
	CreateMCP string
	// MCP selects @owner's live default MCP instance.
	MCP string
}

func (c *Core) scanInstance(row Row) (airlock.Instance, error) {
	var (
		in         airlock.Instance
		meta       []byte
		kind       sql.NullString
		seen, gone NullTime
	)
	if err := row.Scan(&in.ID, &in.OwnerID, &in.Name, &meta, c.d.Time(&in.CreatedAt), &in.PendingCount,
		&kind, c.d.NullTime(&seen), c.d.NullTime(&gone), &in.TokenAudience); err != nil {
		return airlock.Instance{}, err
	}
	in.Metadata, in.Kind = meta, airlock.InstanceKind(kind.String)
	in.LastSeenAt, in.ClosedAt = seen.Ptr(), gone.Ptr()
	return in, nil
}

// CreateInstance stores a new instance, stamped with the store's now. An
// empty ID gets a fresh "ins_" one ("ses_" for a session), an empty Kind
// is an adapter.
func (c *Core) CreateInstance(ctx context.Context, in airlock.Instance, actor string) (airlock.Instance, error) {
	in = in.WithDefaults()
	if err := in.Validate(); err != nil {
		return airlock.Instance{}, err
	}
	out := in
	err := c.d.Write(ctx, func(tx Tx) error {
		var at time.Time
		if err := tx.QueryRow(c.q.Instances.Create, Args{{"id", in.ID}, {"owner", in.OwnerID}, {"name", in.Name},
			{"metadata", Text(in.Metadata)}, {"kind", string(in.Kind)}, {"audience", in.TokenAudience}}).Scan(c.d.Time(&at)); err != nil {
			return err
		}
		out.CreatedAt, out.PendingCount, out.LastSeenAt, out.ClosedAt = at, 0, nil, nil
		return tx.Event(airlock.Event{Type: airlock.EventInstanceCreated, At: at, Actor: actor, InstanceID: in.ID})
	})
	if err != nil {
		return airlock.Instance{}, c.d.Translate(err, "instance", in.ID)
	}
	return out, nil
}

// GetInstance reads a live instance; a deleted one is not_found.
func (c *Core) GetInstance(ctx context.Context, id string) (airlock.Instance, error) {
	in, err := c.scanInstance(c.d.QueryRow(ctx, c.q.Instances.Live, Args{{"id", id}}))
	return in, c.d.Translate(err, "instance", id)
}

// TokenAudience returns the token_audience of instance id, deleted or not.
func (c *Core) TokenAudience(ctx context.Context, id string) (string, error) {
	var aud string
	err := c.d.QueryRow(ctx, c.q.Instances.Audience, Args{{"id", id}}).Scan(&aud)
	return aud, c.d.Translate(err, "instance", id)
}

// ListInstances lists live instances, newest first, of one owner when
// ownerID is set.
func (c *Core) ListInstances(ctx context.Context, ownerID string) ([]airlock.Instance, error) {
	out, err := all(ctx, c.d, c.scanInstance, c.q.Instances.List, Args{{"owner", ownerID}})
	return out, c.d.Translate(err, "instances", ownerID)
}

// DeleteInstance marks the instance deleted and settles its pending
// requests in the same transaction: those whose deadline has come are
// expired (the deadline won; docs/protocol.md L4), the rest are
// cancelled. Both are compare-and-set UPDATEs on state = 'pending', so a
// decision that committed first keeps its outcome. It returns the
// cancelled IDs in creation order. Request rows stay readable.
func (c *Core) DeleteInstance(ctx context.Context, id, actor string) ([]string, error) {
	var cancelled []string
	err := c.d.Write(ctx, func(tx Tx) error {
		cancelled = nil
		if q := c.q.Instances.Lock; q != "" {
			var got string
			if err := tx.QueryRow(q, Args{{"id", id}}).Scan(&got); err != nil {
				return err // sql.ErrNoRows: not_found
			}
		}
		var err error
		cancelled, err = c.closeInstance(tx, id, actor, airlock.EventInstanceDeleted)
		return err
	})
	if err != nil {
		return nil, c.d.Translate(err, "instance", id)
	}
	return cancelled, nil
}

// closeInstance marks the live instance id deleted (a session closed) and
// settles its pending requests, in the caller's transaction, which has
// locked the instance (InstanceSQL.Lock); it appends the instance's event
// of type event and returns the cancelled IDs in creation order, or
// sql.ErrNoRows when the instance is not live.
//
// It takes its locks before it reads the clock: the caller has locked
// the instance (so no new request can join it), closeInstance locks its
// pending requests (waiting for decisions being written to them), and
// only then takes the one instant that stamps the delete and every
// expiry and cancellation. So every approval that won a request committed
// before that instant, and every decision that comes later finds the
// request cancelled: the delete is one point in time, with no approval
// after it.
func (c *Core) closeInstance(tx Tx, id, actor string, event airlock.EventType) ([]string, error) {
	q := &c.q.Instances
	if q.LockPending != "" {
		if _, err := tx.Exec(q.LockPending, Args{{"id", id}}); err != nil {
			return nil, err
		}
	}
	var at time.Time
	if err := tx.QueryRow(q.Close, Args{{"id", id}}).Scan(c.d.Time(&at)); err != nil {
		return nil, err
	}
	expired, err := c.changeRequests(tx, q.ExpirePending, Args{{"id", id}, {Now, at}, {"actor", airlock.ActorExpiry}})
	if err != nil {
		return nil, err
	}
	if err := tx.StateEvents(airlock.ActorExpiry, at, expired); err != nil {
		return nil, err
	}
	rs, err := c.changeRequests(tx, q.CancelPending, Args{{"id", id}, {Now, at}, {"actor", actor}})
	if err != nil {
		return nil, err
	}
	if err := tx.StateEvents(actor, at, rs); err != nil {
		return nil, err
	}
	var cancelled []string
	for _, r := range rs {
		cancelled = append(cancelled, r.ID)
	}
	return cancelled, tx.Event(airlock.Event{Type: event, At: at, Actor: actor, InstanceID: id})
}

// GetSession reads a session, open or closed.
func (c *Core) GetSession(ctx context.Context, id string) (airlock.Instance, error) {
	in, err := c.scanInstance(c.d.QueryRow(ctx, c.q.Instances.Session, Args{{"id", id}}))
	if noRows(err) {
		return airlock.Instance{}, airlock.NotFound("session", id)
	}
	return in, c.d.Translate(err, "session", id)
}

// ListSessions lists sessions, open and closed, newest first.
func (c *Core) ListSessions(ctx context.Context, ownerID string) ([]airlock.Instance, error) {
	out, err := all(ctx, c.d, c.scanInstance, c.q.Instances.Sessions, Args{{"owner", ownerID}, {"limit", airlock.MaxSessionsListed}})
	return out, c.d.Translate(err, "sessions", ownerID)
}

// Heartbeat stamps the open session's last_seen_at and takes its
// undelivered instructions with one UPDATE … RETURNING, in one
// transaction: an instruction is returned by exactly one heartbeat (a
// second heartbeat's UPDATE re-checks delivered_at on each row the first
// changed, or runs after it).
func (c *Core) Heartbeat(ctx context.Context, sessionID string) (airlock.Instance, []airlock.Instruction, error) {
	q := &c.q.Instances
	var (
		out  airlock.Instance
		took []airlock.Instruction
	)
	err := c.d.Write(ctx, func(tx Tx) error {
		var at time.Time
		err := tx.QueryRow(q.Heartbeat, Args{{"id", sessionID}}).Scan(c.d.Time(&at))
		if noRows(err) {
			return airlock.NotFound("open session", sessionID)
		}
		if err != nil {
			return err
		}
		if took, err = c.takeInstructions(tx, Args{{"id", sessionID}, {Now, at}}); err != nil {
			return err
		}
		for _, ist := range took {
			if err := tx.Event(airlock.Event{Type: airlock.EventInstructionDelivered, At: at, Actor: sessionID,
				RequestID: ist.RequestID, InstanceID: sessionID, Subject: ist.ID}); err != nil {
				return err
			}
		}
		out, err = c.scanInstance(tx.QueryRow(q.Instance, Args{{"id", sessionID}}))
		return err
	})
	if err != nil {
		return airlock.Instance{}, nil, c.d.Translate(err, "session", sessionID)
	}
	return out, took, nil
}

// takeInstructions runs TakeInstructions and returns the instructions
// oldest first: RETURNING has no order, and they are sorted as they were
// decided. None is an empty list, not nil.
func (c *Core) takeInstructions(tx Tx, args Args) ([]airlock.Instruction, error) {
	type seqd struct {
		seq int64
		ist airlock.Instruction
	}
	took, err := txAll(tx, func(row Row) (seqd, error) {
		var (
			x      seqd
			status string
		)
		err := row.Scan(&x.seq, &x.ist.ID, &x.ist.SessionID, &x.ist.RequestID, &status, &x.ist.Note, &x.ist.Answer, c.d.Time(&x.ist.CreatedAt))
		x.ist.Status = airlock.State(status)
		return x, err
	}, c.q.Instances.TakeInstructions, args)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(took, func(a, b seqd) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]airlock.Instruction, 0, len(took))
	for _, x := range took {
		out = append(out, x.ist)
	}
	return out, nil
}

// CloseSession closes an open session as DeleteInstance deletes an
// instance, with a session.closed event; a closed session is left as it
// is. It locks the session first (SessionState), so a close and a
// heartbeat or a create on the session take turns.
func (c *Core) CloseSession(ctx context.Context, id, actor string) ([]string, error) {
	var cancelled []string
	err := c.d.Write(ctx, func(tx Tx) error {
		cancelled = nil
		var (
			kind   string
			closed NullTime
		)
		err := tx.QueryRow(c.q.Instances.SessionState, Args{{"id", id}}).Scan(&kind, c.d.NullTime(&closed))
		switch {
		case noRows(err) || (err == nil && airlock.InstanceKind(kind) != airlock.InstanceSession):
			return airlock.NotFound("session", id)
		case err != nil:
			return err
		case closed.Valid:
			return nil
		}
		cancelled, err = c.closeInstance(tx, id, actor, airlock.EventSessionClosed)
		return err
	})
	if err != nil {
		return nil, c.d.Translate(err, "session", id)
	}
	return cancelled, nil
}

// mcpInstanceAttempts bounds how often MCPInstance tries again when the
// default instance it yielded to was deleted before it could read it.
const mcpInstanceAttempts = 3

// MCPInstance returns the owner's live default MCP instance, creating it
// with an INSERT that yields to the partial unique index on live defaults,
// so concurrent first uses end with one: a loser's INSERT does nothing,
// and the read after it finds the winner's row. Should that row be
// deleted in between (writers that run at once), it inserts again.
func (c *Core) MCPInstance(ctx context.Context, ownerID, actor string) (airlock.Instance, error) {
	if ownerID == "" {
		return airlock.Instance{}, airlock.Invalid("owner", "a default MCP instance needs an owner")
	}
	q := &c.q.Instances
	var out airlock.Instance
	err := c.d.Write(ctx, func(tx Tx) error {
		for range mcpInstanceAttempts {
			id := airlock.NewID(airlock.PrefixInstance)
			var at time.Time
			err := tx.QueryRow(q.CreateMCP, Args{{"id", id}, {"owner", ownerID}}).Scan(c.d.Time(&at))
			switch {
			case err == nil:
				if err := tx.Event(airlock.Event{Type: airlock.EventInstanceCreated, At: at, Actor: actor, InstanceID: id}); err != nil {
					return err
				}
			case !noRows(err):
				return err
			}
			out, err = c.scanInstance(tx.QueryRow(q.MCP, Args{{"owner", ownerID}}))
			if !noRows(err) {
				return err
			}
		}
		return fmt.Errorf("the default MCP instance of %s was deleted %d times while it was being read; try again", ownerID, mcpInstanceAttempts)
	})
	if err != nil {
		return airlock.Instance{}, c.d.Translate(err, "default MCP instance of", ownerID)
	}
	return out, nil
}
