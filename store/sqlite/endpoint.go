package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
)

// Notifications (docs/notifications.md): endpoints, the delivery queue
// fed from the audit log, and reminders. The store has one writer, so the
// fan-out cursor's compare-and-set and the reminders' primary key are what
// keep two processes on one file from queueing or reminding twice.

const endpointCols = `seq, id, kind, url, events, description, secret, created_at, created_by, after_event,
	failing_since, disabled_at, disabled_reason`

func scanEndpoint(sc scanner) (airlock.Endpoint, error) {
	var (
		e                 airlock.Endpoint
		events            string
		created           int64
		failing, disabled sql.NullInt64
	)
	if err := sc.Scan(&e.Seq, &e.ID, &e.Kind, &e.URL, &events, &e.Description, &e.Secret, &created, &e.CreatedBy,
		&e.AfterEvent, &failing, &disabled, &e.DisabledReason); err != nil {
		return airlock.Endpoint{}, err
	}
	if err := json.Unmarshal([]byte(events), &e.Events); err != nil {
		return airlock.Endpoint{}, fmt.Errorf("endpoint %s: stored events: %w", e.ID, err)
	}
	if len(e.Events) == 0 {
		e.Events = nil
	}
	e.CreatedAt, e.FailingSince, e.DisabledAt = fromMicros(created), nullMicros(failing), nullMicros(disabled)
	return e, nil
}

// deliveryCols are a delivery's columns; payload last, so that lists can
// leave it out (deliveryColsNoPayload).
const (
	deliveryColsNoPayload = `seq, id, endpoint_id, event_id, message_id, type, request_id, state, attempts, created_at,
	next_attempt_at, lease_holder, lease_until`
	deliveryCols = deliveryColsNoPayload + `, payload`
)

func scanDelivery(sc scanner, payload bool) (airlock.Delivery, error) {
	var (
		d                airlock.Delivery
		event, leaseTill sql.NullInt64
		attempts         string
		created, next    int64
	)
	dest := []any{&d.Seq, &d.ID, &d.EndpointID, &event, &d.MessageID, &d.Type, &d.RequestID, &d.State, &attempts,
		&created, &next, &d.LeaseHolder, &leaseTill}
	if payload {
		dest = append(dest, &d.Payload)
	}
	if err := sc.Scan(dest...); err != nil {
		return airlock.Delivery{}, err
	}
	if err := json.Unmarshal([]byte(attempts), &d.Attempts); err != nil {
		return airlock.Delivery{}, fmt.Errorf("delivery %s: stored attempts: %w", d.ID, err)
	}
	if len(d.Attempts) == 0 {
		d.Attempts = nil
	}
	d.EventID = event.Int64
	d.CreatedAt, d.NextAttemptAt, d.LeaseUntil = fromMicros(created), fromMicros(next), nullMicros(leaseTill)
	return d, nil
}

// CreateEndpoint stores a new endpoint that receives the events after the
// last one committed.
func (s *Store) CreateEndpoint(ctx context.Context, e airlock.Endpoint) (airlock.Endpoint, error) {
	if e.ID == "" || e.Kind == "" || e.URL == "" {
		return airlock.Endpoint{}, airlock.Invalid("endpoint", "an endpoint needs an ID, a kind and a URL")
	}
	events := e.Events
	if events == nil {
		events = []airlock.NotifyType{}
	}
	js, err := json.Marshal(events)
	if err != nil {
		return airlock.Endpoint{}, err
	}
	var out airlock.Endpoint
	err = s.inTx(ctx, func(tx *txn, now time.Time) error {
		var err error
		out, err = scanEndpoint(tx.QueryRowContext(ctx, `INSERT INTO endpoints (id, kind, url, events, description, secret, created_at, created_by, after_event)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(id), 0) FROM events)) RETURNING `+endpointCols,
			e.ID, e.Kind, e.URL, string(js), e.Description, e.Secret, micros(now), e.CreatedBy))
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventEndpointCreated, Actor: e.CreatedBy, Subject: e.ID})
	})
	return out, translate(err, "endpoint", e.ID)
}

// GetEndpoint reads an endpoint.
func (s *Store) GetEndpoint(ctx context.Context, id string) (airlock.Endpoint, error) {
	e, err := scanEndpoint(s.read.QueryRowContext(ctx, `SELECT `+endpointCols+` FROM endpoints WHERE id = ?`, id))
	return e, translate(err, "endpoint", id)
}

// ListEndpoints lists the endpoints of kind (all when empty), oldest first.
func (s *Store) ListEndpoints(ctx context.Context, kind airlock.EndpointKind) ([]airlock.Endpoint, error) {
	out, err := queryAll(ctx, s.read, scanEndpoint, `SELECT `+endpointCols+` FROM endpoints WHERE ? = '' OR kind = ? ORDER BY seq`, kind, kind)
	return out, translate(err, "endpoints", "list")
}

// DeleteEndpoint deletes an endpoint with its deliveries.
func (s *Store) DeleteEndpoint(ctx context.Context, id, actor string) error {
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM endpoints WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmpOr(err, sql.ErrNoRows)
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventEndpointDeleted, Actor: actor, Subject: id})
	})
	return translate(err, "endpoint", id)
}

// EnableEndpoint enables a disabled endpoint and queues again the
// deliveries its last run of failures failed: those whose last attempt
// came at or after failing_since (a delivery failed for good records
// next_attempt_at at its last attempt; one failed by the disabling keeps
// the retry time it was waiting for) and those never attempted.
func (s *Store) EnableEndpoint(ctx context.Context, id, actor string) (airlock.Endpoint, error) {
	var out airlock.Endpoint
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		e, err := scanEndpoint(tx.QueryRowContext(ctx, `SELECT `+endpointCols+` FROM endpoints WHERE id = ?`, id))
		if err != nil || e.DisabledAt == nil {
			out = e
			return err
		}
		since := e.FailedSince()
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', next_attempt_at = @now, lease_holder = '', lease_until = NULL
WHERE endpoint_id = @id AND state = 'failed' AND (next_attempt_at >= @since OR attempts = '[]')`,
			sql.Named("now", micros(now)), sql.Named("id", id), sql.Named("since", micros(since))); err != nil {
			return err
		}
		out, err = scanEndpoint(tx.QueryRowContext(ctx, `UPDATE endpoints SET disabled_at = NULL, disabled_reason = '', failing_since = NULL
WHERE id = ? RETURNING `+endpointCols, id))
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventEndpointEnabled, Actor: actor, Subject: id})
	})
	return out, translate(err, "endpoint", id)
}

func cmpOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// FanOutCursor returns the last event ID whose deliveries are queued.
func (s *Store) FanOutCursor(ctx context.Context) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, `SELECT event_id FROM fanout_cursor WHERE id = 1`).Scan(&n)
	return n, translate(err, "fan-out cursor", "")
}

// DeliveryBacklog counts pending deliveries and the events not yet fanned
// out, in one read.
func (s *Store) DeliveryBacklog(ctx context.Context) (airlock.Backlog, error) {
	var b airlock.Backlog
	err := s.read.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending'),
	(SELECT coalesce(max(id), 0) FROM events) - (SELECT event_id FROM fanout_cursor WHERE id = 1)`).Scan(&b.Pending, &b.Unqueued)
	b.Unqueued = max(b.Unqueued, 0)
	return b, translate(err, "deliveries", "backlog")
}

// insertDeliverySQL queues a delivery if its endpoint exists and is
// enabled, once per endpoint and event.
const insertDeliverySQL = `INSERT INTO deliveries (id, endpoint_id, event_id, message_id, type, request_id, payload, created_at, next_attempt_at,
	lease_holder, lease_until)
SELECT @id, @endpoint, @event, @message, @type, @request, @payload, @now, @now, @holder, @until
WHERE EXISTS (SELECT 1 FROM endpoints WHERE id = @endpoint AND disabled_at IS NULL)
ON CONFLICT (endpoint_id, event_id) DO NOTHING`

// deliveryArgs are insertDeliverySQL's arguments: d, leased to
// d.LeaseHolder for leaseFor when it has one.
func deliveryArgs(d airlock.Delivery, now time.Time, leaseFor time.Duration) []any {
	var event, until any
	if d.LeaseHolder != "" {
		until = micros(now.Add(leaseFor))
	}
	if d.EventID != 0 {
		event = d.EventID
	}
	payload := d.Payload
	if payload == nil {
		payload = []byte{}
	}
	return []any{sql.Named("id", d.ID), sql.Named("endpoint", d.EndpointID), sql.Named("event", event),
		sql.Named("message", d.MessageID), sql.Named("type", string(d.Type)), sql.Named("request", d.RequestID),
		sql.Named("payload", payload), sql.Named("now", micros(now)), sql.Named("holder", d.LeaseHolder), sql.Named("until", until)}
}

// QueueDeliveries moves the fan-out cursor from p.After to p.Upto and
// queues p.Deliveries, in one transaction, unless an endpoint the caller
// did not list would miss some of the events.
func (s *Store) QueueDeliveries(ctx context.Context, p store.QueueParams) (bool, error) {
	var moved bool
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		moved = false
		if stale, err := unlistedEndpoint(ctx, tx, p); err != nil || stale {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE fanout_cursor SET event_id = ? WHERE id = 1 AND event_id = ?`, p.Upto, p.After)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		for _, d := range p.Deliveries {
			if _, err := tx.ExecContext(ctx, insertDeliverySQL, deliveryArgs(d, now, p.LeaseFor)...); err != nil {
				return err
			}
		}
		moved = true
		return nil
	})
	return moved, translate(err, "deliveries", "queue")
}

// unlistedEndpoint reports whether an enabled endpoint that p does not
// list starts before p.Upto: one created or enabled after the fan-out read
// the endpoints, which its deliveries would leave out.
func unlistedEndpoint(ctx context.Context, tx *txn, p store.QueueParams) (bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM endpoints WHERE disabled_at IS NULL AND after_event < ?`, p.Upto)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return false, err
		}
		if !slices.Contains(p.Listed, id) {
			return true, nil
		}
	}
	return false, rows.Err()
}

// AddDelivery queues one delivery outside the fan-out.
func (s *Store) AddDelivery(ctx context.Context, d airlock.Delivery) (airlock.Delivery, error) {
	var out airlock.Delivery
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		res, err := tx.ExecContext(ctx, insertDeliverySQL, deliveryArgs(airlock.Delivery{ID: d.ID, EndpointID: d.EndpointID, EventID: d.EventID, MessageID: d.MessageID, Type: d.Type, RequestID: d.RequestID, Payload: d.Payload}, now, 0)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmpOr(err, airlock.NotFound("endpoint", d.EndpointID))
		}
		out, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, d.ID), true)
		return err
	})
	return out, translate(err, "delivery", d.ID)
}

// LeaseDeliveries leases up to p.Limit due deliveries of one enabled
// endpoint to p.Holder.
func (s *Store) LeaseDeliveries(ctx context.Context, p store.LeaseParams) ([]airlock.Delivery, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1
	}
	var out []airlock.Delivery
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		var err error
		out, err = queryAll(ctx, tx, func(sc scanner) (airlock.Delivery, error) { return scanDelivery(sc, true) },
			`UPDATE deliveries SET lease_holder = @holder, lease_until = @until
WHERE id IN (SELECT d.id FROM deliveries d
	WHERE d.endpoint_id = @endpoint AND d.state = 'pending' AND d.next_attempt_at <= @now
		AND (d.lease_until IS NULL OR d.lease_until <= @now)
	ORDER BY d.next_attempt_at, d.seq LIMIT @limit)
	AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = @endpoint AND e.disabled_at IS NULL)
RETURNING `+deliveryCols,
			sql.Named("holder", p.Holder), sql.Named("until", micros(now.Add(p.For))), sql.Named("endpoint", p.EndpointID),
			sql.Named("now", micros(now)), sql.Named("limit", limit))
		return err
	})
	if err != nil {
		return nil, translate(err, "deliveries", "lease")
	}
	slices.SortFunc(out, airlock.CompareDue)
	return out, nil
}

// RecordAttempts records attempts in one transaction.
func (s *Store) RecordAttempts(ctx context.Context, ps []store.AttemptParams) ([]airlock.Delivery, error) {
	attempts, err := store.AttemptsJSON(ps)
	if err != nil {
		return nil, err
	}
	var out []airlock.Delivery
	err = s.inTx(ctx, func(tx *txn, now time.Time) (err error) {
		out, err = sqlcore.RecordAttempts(ps, attempts, func(p store.AttemptParams, attempt string, cleared sqlcore.FailingMarks) (airlock.Delivery, error) {
			return recordAttempt(ctx, tx, now, p, attempt, cleared)
		})
		return err
	})
	if err != nil {
		return nil, translate(err, "deliveries", "record attempts")
	}
	return out, nil
}

// recordAttempt records one attempt in tx and returns the delivery without
// its payload (the writer would copy it for no one); the zero Delivery
// when the delivery is gone or no longer p.Holder's. cleared holds the
// endpoints whose failing mark this transaction cleared with no failure
// since: a batch of successes clears it once.
func recordAttempt(ctx context.Context, tx *txn, now time.Time, p store.AttemptParams, attempt string, cleared sqlcore.FailingMarks) (airlock.Delivery, error) {
	state, _ := p.State()
	out, err := scanDelivery(tx.QueryRowContext(ctx, `UPDATE deliveries SET state = @state,
	attempts = json_insert(attempts, '$[#]', json(@attempt)), next_attempt_at = @next, lease_holder = '', lease_until = NULL
WHERE id = @id AND lease_holder = @holder AND state = 'pending' RETURNING `+deliveryColsNoPayload,
		sql.Named("state", string(state)), sql.Named("attempt", attempt), sql.Named("next", micros(now.Add(p.RetryIn))),
		sql.Named("id", p.DeliveryID), sql.Named("holder", p.Holder)), false)
	if errors.Is(err, sql.ErrNoRows) {
		return airlock.Delivery{}, nil
	}
	if err != nil {
		return airlock.Delivery{}, err
	}
	if p.Outcome == airlock.OutcomeDelivered {
		return out, cleared.Delivered(out.EndpointID, func() error {
			_, err := tx.ExecContext(ctx, `UPDATE endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL`, out.EndpointID)
			return err
		})
	}
	cleared.Failed(out.EndpointID)
	if _, err := tx.ExecContext(ctx, `UPDATE endpoints SET failing_since = ? WHERE id = ? AND failing_since IS NULL`,
		micros(now), out.EndpointID); err != nil {
		return airlock.Delivery{}, err
	}
	if p.DisableAfter <= 0 {
		return out, nil
	}
	var since int64
	err = tx.QueryRowContext(ctx, `UPDATE endpoints SET disabled_at = @now,
	disabled_reason = 'failing since ' || strftime('%Y-%m-%dT%H:%M:%SZ', failing_since / 1000000, 'unixepoch') || ': ' || @why
WHERE id = @id AND disabled_at IS NULL AND failing_since <= @cutoff RETURNING failing_since`,
		sql.Named("now", micros(now)), sql.Named("why", p.Attempt.Error), sql.Named("id", out.EndpointID),
		sql.Named("cutoff", micros(now.Add(-p.DisableAfter)))).Scan(&since)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return airlock.Delivery{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'failed', lease_holder = '', lease_until = NULL
WHERE endpoint_id = ? AND state = 'pending'`, out.EndpointID); err != nil {
		return airlock.Delivery{}, err
	}
	return out, appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventEndpointDisabled, Actor: airlock.ActorNotify, Subject: out.EndpointID})
}

// ListDeliveries lists an endpoint's deliveries, newest first, without
// their payloads.
func (s *Store) ListDeliveries(ctx context.Context, endpointID string, beforeSeq int64, limit int) ([]airlock.Delivery, bool, error) {
	limit = store.RequestFilter{Limit: limit}.PageSize()
	out, err := queryAll(ctx, s.read, func(sc scanner) (airlock.Delivery, error) { return scanDelivery(sc, false) },
		`SELECT `+deliveryColsNoPayload+` FROM deliveries
WHERE endpoint_id = ? AND (? <= 0 OR seq < ?) ORDER BY seq DESC LIMIT ?`, endpointID, beforeSeq, beforeSeq, limit+1)
	if err != nil {
		return nil, false, translate(err, "deliveries", "list")
	}
	return out[:min(len(out), limit)], len(out) > limit, nil
}

// RemindDue records and announces the reminders that are due.
func (s *Store) RemindDue(ctx context.Context, r airlock.RemindBefore, limit int) ([]string, error) {
	if r.IsZero() {
		return nil, nil
	}
	limit = store.Batch(limit)
	var ids []string
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		ids = ids[:0]
		// A reminder is due once now is at least its lead before the
		// deadline; the widest lead bounds the index range.
		rows, err := tx.QueryContext(ctx, `SELECT r.id, r.instance_id FROM requests r
WHERE r.state = 'pending' AND r.deadline_at > @now
	AND r.deadline_at - max(@before, CAST((r.deadline_at - r.created_at) * @frac AS INTEGER)) <= @now
	AND NOT EXISTS (SELECT 1 FROM reminders m WHERE m.request_id = r.id)
ORDER BY r.deadline_at, r.seq LIMIT @limit`,
			sql.Named("now", micros(now)), sql.Named("before", r.Before.Microseconds()), sql.Named("frac", r.Fraction),
			sql.Named("limit", limit))
		if err != nil {
			return err
		}
		var due [][2]string
		for rows.Next() {
			var id, inst string
			if err := rows.Scan(&id, &inst); err != nil {
				rows.Close()
				return err
			}
			due = append(due, [2]string{id, inst})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, d := range due {
			res, err := tx.ExecContext(ctx, `INSERT INTO reminders (request_id, at) VALUES (?, ?) ON CONFLICT DO NOTHING`, d[0], micros(now))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				if err != nil {
					return err
				}
				continue
			}
			if err := insertEvent(ctx, tx, now, airlock.Event{Type: airlock.EventRequestReminder, Actor: airlock.ActorNotify,
				RequestID: d[0], InstanceID: d[1], State: airlock.StatePending}); err != nil {
				return err
			}
			ids = append(ids, d[0])
		}
		return nil
	})
	return ids, translate(err, "reminders", "record")
}
