package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlcore"
)

// instanceCols selects an instance with its count of pending requests,
// which triggers keep (migration 0003).
const instanceCols = `i.id, i.owner_id, i.name, i.metadata, i.created_at, i.pending,
	i.kind, i.last_seen_at, i.deleted_at`

func scanInstance(sc scanner) (airlock.Instance, error) {
	var (
		in             airlock.Instance
		meta           []byte
		created        int64
		seen, closedAt sql.NullInt64
	)
	if err := sc.Scan(&in.ID, &in.OwnerID, &in.Name, &meta, &created, &in.PendingCount,
		&in.Kind, &seen, &closedAt); err != nil {
		return airlock.Instance{}, err
	}
	in.Metadata, in.CreatedAt = meta, fromMicros(created)
	in.LastSeenAt, in.ClosedAt = nullMicros(seen), nullMicros(closedAt)
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
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO instances (id, owner_id, name, metadata, created_at, kind) VALUES (?, ?, ?, ?, ?, ?)`,
			in.ID, in.OwnerID, in.Name, sqlcore.Text(in.Metadata), micros(now), in.Kind); err != nil {
			return err
		}
		in.CreatedAt, in.PendingCount, in.LastSeenAt, in.ClosedAt = now, 0, nil, nil
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventInstanceCreated, Actor: actor, InstanceID: in.ID})
	})
	if err != nil {
		return airlock.Instance{}, translate(err, "instance", in.ID)
	}
	return in, nil
}

// GetInstance reads a live instance; a deleted one is not_found.
func (s *Store) GetInstance(ctx context.Context, id string) (airlock.Instance, error) {
	in, err := scanInstance(s.read.QueryRowContext(ctx,
		`SELECT `+instanceCols+` FROM instances i WHERE i.id = ? AND i.deleted_at IS NULL`, id))
	return in, translate(err, "instance", id)
}

// ListInstances lists live instances, newest first, of one owner when
// ownerID is set.
func (s *Store) ListInstances(ctx context.Context, ownerID string) ([]airlock.Instance, error) {
	out, err := queryAll(ctx, s.read, scanInstance, `SELECT `+instanceCols+` FROM instances i
WHERE i.deleted_at IS NULL AND (? = '' OR i.owner_id = ?) ORDER BY i.seq DESC`, ownerID, ownerID)
	return out, translate(err, "instances", ownerID)
}

// DeleteInstance marks the instance deleted and settles its pending
// requests in the same transaction: those whose deadline has come are
// expired (the deadline won; docs/protocol.md L4), the rest are cancelled. Both
// are compare-and-set UPDATEs on state = 'pending', so a decision that
// committed first keeps its outcome. It returns the cancelled IDs in
// creation order. Request rows stay readable.
func (s *Store) DeleteInstance(ctx context.Context, id, actor string) ([]string, error) {
	var cancelled []string
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		var err error
		cancelled, err = closeInstance(ctx, tx, now, id, actor, airlock.EventInstanceDeleted)
		return err
	})
	if err != nil {
		return nil, translate(err, "instance", id)
	}
	return cancelled, nil
}

// closeInstance marks a live instance deleted (a session closed) and
// settles its pending requests in the caller's transaction, appending
// event for the instance. It returns the cancelled IDs in creation order;
// sql.ErrNoRows when the instance is not live.
func closeInstance(ctx context.Context, tx *txn, now time.Time, id, actor string, event airlock.EventType) ([]string, error) {
	var got string
	err := tx.QueryRowContext(ctx, `UPDATE instances SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL RETURNING id`,
		micros(now), id).Scan(&got)
	if err != nil {
		return nil, err
	}
	expired, err := updateRequests(ctx, tx, `UPDATE requests
SET state = 'expired', decided_at = deadline_at, decided_by = @actor
WHERE instance_id = @id AND state = 'pending' AND deadline_at <= @now
RETURNING `+requestCols, sql.Named("id", id), sql.Named("now", micros(now)), sql.Named("actor", airlock.ActorExpiry))
	if err != nil {
		return nil, err
	}
	if err := appendStateEvents(ctx, tx, now, airlock.ActorExpiry, expired); err != nil {
		return nil, err
	}
	rs, err := updateRequests(ctx, tx, `UPDATE requests
SET state = 'cancelled', decided_at = @now, decided_by = @actor
WHERE instance_id = @id AND state = 'pending' AND deadline_at > @now
RETURNING `+requestCols, sql.Named("id", id), sql.Named("now", micros(now)), sql.Named("actor", actor))
	if err != nil {
		return nil, err
	}
	if err := appendStateEvents(ctx, tx, now, actor, rs); err != nil {
		return nil, err
	}
	var cancelled []string
	for _, r := range rs {
		cancelled = append(cancelled, r.ID)
	}
	return cancelled, appendEvent(ctx, tx, now, airlock.Event{Type: event, Actor: actor, InstanceID: id})
}
