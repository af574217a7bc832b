package postgres

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
)

// instanceCols selects an instance with its count of pending requests
// (served by the (instance_id, state) index).
const instanceCols = `i.id, i.owner_id, i.name, i.metadata, i.created_at,
	(SELECT count(*) FROM requests r WHERE r.instance_id = i.id AND r.state = 'pending'),
	i.kind, i.last_seen_at, i.deleted_at`

func scanInstance(row pgx.Row) (airlock.Instance, error) {
	var (
		in             airlock.Instance
		meta, kind     *string
		seen, closedAt *time.Time
	)
	if err := row.Scan(&in.ID, &in.OwnerID, &in.Name, &meta, &in.CreatedAt, &in.PendingCount,
		&kind, &seen, &closedAt); err != nil {
		return airlock.Instance{}, err
	}
	in.Metadata, in.CreatedAt, in.Kind = raw(meta), in.CreatedAt.UTC(), airlock.InstanceKind(deref(kind))
	in.LastSeenAt, in.ClosedAt = utc(seen), utc(closedAt)
	return in, nil
}

// CreateInstance stores a new instance, stamped with the store's now. An
// empty ID gets a fresh "ins_" one ("ses_" for a session), an empty Kind
// is an adapter.
func (s *Store) CreateInstance(ctx context.Context, in airlock.Instance, actor string) (airlock.Instance, error) {
	in = in.WithDefaults()
	if err := in.Validate(); err != nil {
		return airlock.Instance{}, err
	}
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var at time.Time
		if err := t.QueryRow(ctx, tickCTE+`INSERT INTO instances (id, owner_id, name, metadata, created_at, kind)
SELECT @id::text, @owner::text, @name::text, @metadata::text, tick.now, @kind::text FROM tick
RETURNING created_at`, named{
			"now": s.now(), "id": in.ID, "owner": in.OwnerID, "name": in.Name, "metadata": sqlcore.Text(in.Metadata),
			"kind": string(in.Kind),
		}).Scan(&at); err != nil {
			return err
		}
		in.CreatedAt, in.PendingCount, in.LastSeenAt, in.ClosedAt = at.UTC(), 0, nil, nil
		t.event(airlock.Event{Type: airlock.EventInstanceCreated, At: in.CreatedAt, Actor: actor, InstanceID: in.ID})
		return nil
	})
	if err != nil {
		return airlock.Instance{}, translate(err, "instance", in.ID)
	}
	return in, nil
}

// GetInstance reads a live instance; a deleted one is not_found.
func (s *Store) GetInstance(ctx context.Context, id string) (airlock.Instance, error) {
	in, err := scanInstance(s.queryRow(ctx,
		`SELECT `+instanceCols+` FROM instances i WHERE i.id = @id AND i.deleted_at IS NULL`, named{"id": id}))
	return in, translate(err, "instance", id)
}

// ListInstances lists live instances, newest first, of one owner when
// ownerID is set.
func (s *Store) ListInstances(ctx context.Context, ownerID string) ([]airlock.Instance, error) {
	out, err := queryAll(ctx, checked{s}, scanInstance, `SELECT `+instanceCols+` FROM instances i
WHERE i.deleted_at IS NULL AND (@owner::text = '' OR i.owner_id = @owner::text) ORDER BY i.seq DESC`, named{"owner": ownerID})
	return out, translate(err, "instances", ownerID)
}

// DeleteInstance marks the instance deleted and settles its pending
// requests in the same transaction: those whose deadline has come are
// expired (the deadline won; docs/protocol.md L4), the rest are cancelled. It
// returns the cancelled IDs in creation order. Request rows stay readable.
func (s *Store) DeleteInstance(ctx context.Context, id, actor string) ([]string, error) {
	var cancelled []string
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		cancelled = nil
		var got string
		if err := t.QueryRow(ctx, `SELECT id FROM instances WHERE id = @id AND deleted_at IS NULL FOR NO KEY UPDATE`,
			named{"id": id}).Scan(&got); err != nil {
			return err
		}
		var err error
		cancelled, err = s.closeInstance(ctx, t, id, actor, airlock.EventInstanceDeleted)
		return err
	})
	if err != nil {
		return nil, translate(err, "instance", id)
	}
	return cancelled, nil
}

// closeInstance marks the live instance id deleted (a session closed) and
// settles its pending requests, in the caller's transaction, which has
// locked the instance row FOR NO KEY UPDATE; it appends the instance's
// event of type event and returns the cancelled IDs in creation order.
//
// It locks before it reads the clock: the caller has locked the instance
// row (so no new request can join it: CreateRequest locks it FOR SHARE),
// then closeInstance locks its pending requests (waiting for decisions
// being written to them), and only then takes the one instant that stamps
// the delete and every cancellation. So every approval that won a request
// committed before that instant, and every decision that comes later finds
// the request cancelled: the delete is one point in time, with no approval
// after it.
//
// The instance lock is FOR NO KEY UPDATE, not FOR UPDATE: it must conflict
// with CreateRequest's FOR SHARE, but not with the KEY SHARE lock that a
// decision takes on a session row when it stores the session's instruction
// (the instructions' foreign key) while holding its request's row lock. A
// FOR UPDATE here, followed by the request locks, would deadlock with it.
func (s *Store) closeInstance(ctx context.Context, t *tx, id, actor string, event airlock.EventType) ([]string, error) {
	if _, err := t.Exec(ctx, `SELECT 1 FROM requests WHERE instance_id = @id AND state = 'pending' FOR UPDATE`,
		named{"id": id}); err != nil {
		return nil, err
	}
	var now time.Time
	if err := t.QueryRow(ctx, `UPDATE instances SET deleted_at = coalesce(@now::timestamptz, clock_timestamp())
WHERE id = @id AND deleted_at IS NULL RETURNING deleted_at`, named{"now": s.now(), "id": id}).Scan(&now); err != nil {
		return nil, err
	}
	now = now.UTC()
	expired, _, err := updateRequests(ctx, t, tickCTE+`UPDATE requests r
SET state = 'expired', decided_at = r.deadline_at, decided_by = @actor
FROM tick
WHERE r.instance_id = @id AND r.state = 'pending' AND r.deadline_at <= tick.now
RETURNING `+requestCols+`, tick.now`, named{"now": now, "id": id, "actor": airlock.ActorExpiry})
	if err != nil {
		return nil, err
	}
	for _, r := range expired {
		t.requestEvent(airlock.EventRequestExpired, airlock.ActorExpiry, now, r)
	}
	rs, _, err := updateRequests(ctx, t, tickCTE+`UPDATE requests r
SET state = 'cancelled', decided_at = tick.now, decided_by = @actor
FROM tick
WHERE r.instance_id = @id AND r.state = 'pending' AND r.deadline_at > tick.now
RETURNING `+requestCols+`, tick.now`, named{"now": now, "id": id, "actor": actor})
	if err != nil {
		return nil, err
	}
	var cancelled []string
	for _, r := range rs {
		t.requestEvent(airlock.EventRequestCancelled, actor, now, r)
		cancelled = append(cancelled, r.ID)
	}
	t.event(airlock.Event{Type: event, At: now, Actor: actor, InstanceID: id})
	return cancelled, nil
}
