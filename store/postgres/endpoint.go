package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlcore"
	"github.com/jackc/pgx/v5"
)

// Notifications (docs/notifications.md): endpoints, the delivery queue
// fed from the audit log, and reminders, shared by every replica. The
// fan-out cursor moves by compare-and-set, deliveries are leased with
// FOR UPDATE SKIP LOCKED and a lease expiry (a dead replica's lease lapses
// and another takes the delivery over), and a reminder's primary key makes
// replicas that find it due together record it once.

const endpointCols = `e.seq, e.id, e.kind, e.url, e.events, e.description, e.secret, e.created_at, e.created_by,
	e.after_event, e.failing_since, e.disabled_at, e.disabled_reason`

func scanEndpoint(row pgx.Row, extra ...any) (airlock.Endpoint, error) {
	var (
		e                 airlock.Endpoint
		kind              string
		events            []string
		failing, disabled *time.Time
	)
	dest := []any{&e.Seq, &e.ID, &kind, &e.URL, &events, &e.Description, &e.Secret, &e.CreatedAt, &e.CreatedBy,
		&e.AfterEvent, &failing, &disabled, &e.DisabledReason}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return airlock.Endpoint{}, err
	}
	e.Kind, e.CreatedAt, e.FailingSince, e.DisabledAt = airlock.EndpointKind(kind), e.CreatedAt.UTC(), utc(failing), utc(disabled)
	for _, t := range events {
		e.Events = append(e.Events, airlock.NotifyType(t))
	}
	return e, nil
}

const (
	deliveryColsNoPayload = `d.seq, d.id, d.endpoint_id, d.event_id, d.message_id, d.type, d.request_id, d.state, d.attempts,
	d.created_at, d.next_attempt_at, d.lease_holder, d.lease_until`
	deliveryCols = deliveryColsNoPayload + `, d.payload`
)

func scanDelivery(row pgx.Row, payload bool, extra ...any) (airlock.Delivery, error) {
	var (
		d               airlock.Delivery
		event           *int64
		typ, state      string
		attempts        []byte
		leaseUntil      *time.Time
		created, nextAt time.Time
	)
	dest := []any{&d.Seq, &d.ID, &d.EndpointID, &event, &d.MessageID, &typ, &d.RequestID, &state, &attempts,
		&created, &nextAt, &d.LeaseHolder, &leaseUntil}
	if payload {
		dest = append(dest, &d.Payload)
	}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return airlock.Delivery{}, err
	}
	if err := json.Unmarshal(attempts, &d.Attempts); err != nil {
		return airlock.Delivery{}, fmt.Errorf("delivery %s: stored attempts: %w", d.ID, err)
	}
	if len(d.Attempts) == 0 {
		d.Attempts = nil
	}
	if event != nil {
		d.EventID = *event
	}
	d.Type, d.State = airlock.NotifyType(typ), airlock.DeliveryState(state)
	d.CreatedAt, d.NextAttemptAt, d.LeaseUntil = created.UTC(), nextAt.UTC(), utc(leaseUntil)
	return d, nil
}

// CreateEndpoint stores a new endpoint that receives the events after the
// last one visible now. An event drawn earlier whose transaction commits
// later is raced by the creation, and not delivered to it.
func (s *Store) CreateEndpoint(ctx context.Context, e airlock.Endpoint) (airlock.Endpoint, error) {
	if e.ID == "" || e.Kind == "" || e.URL == "" {
		return airlock.Endpoint{}, airlock.Invalid("endpoint", "an endpoint needs an ID, a kind and a URL")
	}
	events := make([]string, len(e.Events))
	for i, t := range e.Events {
		events[i] = string(t)
	}
	var out airlock.Endpoint
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var err error
		out, err = scanEndpoint(t.QueryRow(ctx, tickCTE+`INSERT INTO endpoints AS e (id, kind, url, events, description, secret,
	created_at, created_by, after_event)
SELECT @id, @kind, @url, @events::text[], @description, @secret, tick.now, @created_by, (SELECT coalesce(max(id), 0) FROM events)
FROM tick RETURNING `+endpointCols, named{"now": s.now(), "id": e.ID, "kind": string(e.Kind), "url": e.URL, "events": events,
			"description": e.Description, "secret": e.Secret, "created_by": e.CreatedBy}))
		if err != nil {
			return err
		}
		t.event(airlock.Event{Type: airlock.EventEndpointCreated, At: out.CreatedAt, Actor: e.CreatedBy, Subject: e.ID})
		return nil
	})
	return out, translate(err, "endpoint", e.ID)
}

// GetEndpoint reads an endpoint.
func (s *Store) GetEndpoint(ctx context.Context, id string) (airlock.Endpoint, error) {
	e, err := scanEndpoint(s.queryRow(ctx, `SELECT `+endpointCols+` FROM endpoints e WHERE e.id = @id`, named{"id": id}))
	return e, translate(err, "endpoint", id)
}

// ListEndpoints lists the endpoints of kind (all when empty), oldest first.
func (s *Store) ListEndpoints(ctx context.Context, kind airlock.EndpointKind) ([]airlock.Endpoint, error) {
	out, err := queryAll(ctx, checked{s}, func(r pgx.Row) (airlock.Endpoint, error) { return scanEndpoint(r) },
		`SELECT `+endpointCols+` FROM endpoints e WHERE @kind = '' OR e.kind = @kind ORDER BY e.seq`, named{"kind": string(kind)})
	return out, translate(err, "endpoints", "list")
}

// DeleteEndpoint deletes an endpoint with its deliveries.
func (s *Store) DeleteEndpoint(ctx context.Context, id, actor string) error {
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var at time.Time
		if err := t.QueryRow(ctx, tickCTE+`DELETE FROM endpoints WHERE id = @id RETURNING (SELECT now FROM tick)`,
			named{"now": s.now(), "id": id}).Scan(&at); err != nil {
			return err
		}
		t.event(airlock.Event{Type: airlock.EventEndpointDeleted, At: at.UTC(), Actor: actor, Subject: id})
		return nil
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
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		e, err := scanEndpoint(t.QueryRow(ctx, `SELECT `+endpointCols+` FROM endpoints e WHERE e.id = @id FOR UPDATE`, named{"id": id}))
		if err != nil || e.DisabledAt == nil {
			out = e
			return err
		}
		since := e.FailedSince()
		var at time.Time
		if err := t.QueryRow(ctx, tickCTE+`, requeued AS (UPDATE deliveries d SET state = 'pending', next_attempt_at = tick.now,
	lease_holder = '', lease_until = NULL
FROM tick WHERE d.endpoint_id = @id AND d.state = 'failed' AND (d.next_attempt_at >= @since OR jsonb_array_length(d.attempts) = 0)
RETURNING d.id)
SELECT now FROM tick`, named{"now": s.now(), "id": id, "since": since}).Scan(&at); err != nil {
			return err
		}
		out, err = scanEndpoint(t.QueryRow(ctx, `UPDATE endpoints e SET disabled_at = NULL, disabled_reason = '', failing_since = NULL
WHERE e.id = @id RETURNING `+endpointCols, named{"id": id}))
		if err != nil {
			return err
		}
		t.event(airlock.Event{Type: airlock.EventEndpointEnabled, At: at.UTC(), Actor: actor, Subject: id})
		return nil
	})
	return out, translate(err, "endpoint", id)
}

// FanOutCursor returns the last event ID whose deliveries are queued.
func (s *Store) FanOutCursor(ctx context.Context) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT event_id FROM fanout_cursor WHERE id = 1`).Scan(&n)
	return n, translate(err, "fan-out cursor", "")
}

// DeliveryBacklog counts pending deliveries and the events not yet fanned
// out, in one read.
func (s *Store) DeliveryBacklog(ctx context.Context) (airlock.Backlog, error) {
	var b airlock.Backlog
	err := s.queryRow(ctx, `SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending'),
	(SELECT coalesce(max(id), 0) FROM events) - (SELECT event_id FROM fanout_cursor WHERE id = 1)`).Scan(&b.Pending, &b.Unqueued)
	b.Unqueued = max(b.Unqueued, 0)
	return b, translate(err, "deliveries", "backlog")
}

// insertDeliveriesSQL queues deliveries of endpoints that exist and are
// enabled, once per endpoint and event.
const insertDeliveriesSQL = tickCTE + `INSERT INTO deliveries (id, endpoint_id, event_id, message_id, type, request_id, payload,
	created_at, next_attempt_at, lease_holder, lease_until)
SELECT d.id, d.endpoint_id, nullif(d.event_id, 0), d.message_id, d.type, d.request_id, d.payload, tick.now, tick.now,
	d.holder, CASE WHEN d.holder = '' THEN NULL ELSE tick.now + @lease_us::bigint * interval '1 microsecond' END
FROM tick, unnest(@ids::text[], @endpoints::text[], @events::bigint[], @messages::text[], @types::text[], @requests::text[],
	@payloads::bytea[], @holders::text[]) AS d(id, endpoint_id, event_id, message_id, type, request_id, payload, holder)
WHERE EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id AND e.disabled_at IS NULL)
ON CONFLICT (endpoint_id, event_id) DO NOTHING`

// deliveriesArgs are insertDeliveriesSQL's arguments: ds, each leased to
// its LeaseHolder for leaseFor when it has one.
func deliveriesArgs(s *Store, ds []airlock.Delivery, leaseFor time.Duration) named {
	n := len(ds)
	holders := make([]string, n)
	ids, endpoints, messages, types, requests := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	events, payloads := make([]int64, n), make([][]byte, n)
	for i, d := range ds {
		ids[i], endpoints[i], messages[i], types[i], requests[i] = d.ID, d.EndpointID, d.MessageID, string(d.Type), d.RequestID
		events[i], payloads[i], holders[i] = d.EventID, d.Payload, d.LeaseHolder
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
	}
	return named{"now": s.now(), "ids": ids, "endpoints": endpoints, "events": events, "messages": messages, "types": types,
		"requests": requests, "payloads": payloads, "holders": holders, "lease_us": leaseFor.Microseconds()}
}

// QueueDeliveries moves the fan-out cursor from p.After to p.Upto and
// queues p.Deliveries, in one transaction, unless an endpoint the caller
// did not list would miss some of the events. Replicas fanning out at once
// meet at the cursor's row: the second waits for the first's commit and
// then finds the cursor moved.
func (s *Store) QueueDeliveries(ctx context.Context, p store.QueueParams) (bool, error) {
	var moved bool
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		moved = false
		var stale bool
		if err := t.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM endpoints e
	WHERE e.disabled_at IS NULL AND e.after_event < @upto AND NOT (e.id = ANY(@listed::text[])))`,
			named{"upto": p.Upto, "listed": append([]string{}, p.Listed...)}).Scan(&stale); err != nil || stale {
			return err
		}
		tag, err := t.Exec(ctx, `UPDATE fanout_cursor SET event_id = @upto WHERE id = 1 AND event_id = @after`,
			named{"upto": p.Upto, "after": p.After})
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if len(p.Deliveries) > 0 {
			if _, err := t.Exec(ctx, insertDeliveriesSQL, deliveriesArgs(s, p.Deliveries, p.LeaseFor)); err != nil {
				return err
			}
		}
		moved = true
		return nil
	})
	return moved, translate(err, "deliveries", "queue")
}

// AddDelivery queues one delivery outside the fan-out.
func (s *Store) AddDelivery(ctx context.Context, d airlock.Delivery) (airlock.Delivery, error) {
	var out airlock.Delivery
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		tag, err := t.Exec(ctx, insertDeliveriesSQL, deliveriesArgs(s, []airlock.Delivery{{ID: d.ID, EndpointID: d.EndpointID, EventID: d.EventID, MessageID: d.MessageID, Type: d.Type, RequestID: d.RequestID, Payload: d.Payload}}, 0))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return airlock.NotFound("endpoint", d.EndpointID)
		}
		out, err = scanDelivery(t.QueryRow(ctx, `SELECT `+deliveryCols+` FROM deliveries d WHERE d.id = @id`, named{"id": d.ID}), true)
		return err
	})
	return out, translate(err, "delivery", d.ID)
}

// LeaseDeliveries leases up to p.Limit due deliveries of one enabled
// endpoint to p.Holder, skipping rows another replica is leasing now.
func (s *Store) LeaseDeliveries(ctx context.Context, p store.LeaseParams) ([]airlock.Delivery, error) {
	limit := max(p.Limit, 1)
	var out []airlock.Delivery
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var err error
		out, err = queryAll(ctx, t, func(r pgx.Row) (airlock.Delivery, error) { return scanDelivery(r, true) }, tickCTE+`, due AS (
	SELECT d.seq FROM deliveries d, tick
	WHERE d.endpoint_id = @endpoint AND d.state = 'pending' AND d.next_attempt_at <= tick.now
		AND (d.lease_until IS NULL OR d.lease_until <= tick.now)
		AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = @endpoint AND e.disabled_at IS NULL)
	ORDER BY d.next_attempt_at, d.seq LIMIT @limit
	FOR UPDATE OF d SKIP LOCKED)
UPDATE deliveries d SET lease_holder = @holder, lease_until = tick.now + @for_us * interval '1 microsecond'
FROM due, tick WHERE d.seq = due.seq
RETURNING `+deliveryCols, named{"now": s.now(), "endpoint": p.EndpointID, "limit": limit, "holder": p.Holder,
			"for_us": p.For.Microseconds()})
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
	err = s.write(ctx, func(ctx context.Context, t *tx) (err error) {
		out, err = sqlcore.RecordAttempts(ps, attempts, func(p store.AttemptParams, attempt string, cleared sqlcore.FailingMarks) (airlock.Delivery, error) {
			return s.recordAttempt(ctx, t, p, attempt, cleared)
		})
		return err
	})
	if err != nil {
		return nil, translate(err, "deliveries", "record attempts")
	}
	return out, nil
}

// recordAttempt records one attempt in t and returns the delivery without
// its payload; the zero Delivery when the delivery is gone or no longer
// p.Holder's. cleared holds the endpoints whose failing mark this
// transaction cleared with no failure since.
func (s *Store) recordAttempt(ctx context.Context, t *tx, p store.AttemptParams, attempt string, cleared sqlcore.FailingMarks) (airlock.Delivery, error) {
	state, _ := p.State()
	var now time.Time
	out, err := scanDelivery(t.QueryRow(ctx, tickCTE+`UPDATE deliveries d SET state = @state,
	attempts = d.attempts || jsonb_build_array(@attempt::jsonb),
	next_attempt_at = tick.now + @retry_us * interval '1 microsecond', lease_holder = '', lease_until = NULL
FROM tick WHERE d.id = @id AND d.lease_holder = @holder AND d.state = 'pending'
RETURNING `+deliveryColsNoPayload+`, tick.now`, named{"now": s.now(), "state": string(state), "attempt": attempt,
		"retry_us": p.RetryIn.Microseconds(), "id": p.DeliveryID, "holder": p.Holder}), false, &now)
	if errors.Is(err, pgx.ErrNoRows) {
		return airlock.Delivery{}, nil
	}
	if err != nil {
		return airlock.Delivery{}, err
	}
	if p.Outcome == airlock.OutcomeDelivered {
		return out, cleared.Delivered(out.EndpointID, func() error {
			_, err := t.Exec(ctx, `UPDATE endpoints SET failing_since = NULL WHERE id = @id AND failing_since IS NOT NULL`,
				named{"id": out.EndpointID})
			return err
		})
	}
	cleared.Failed(out.EndpointID)
	if _, err := t.Exec(ctx, `UPDATE endpoints SET failing_since = @now WHERE id = @id AND failing_since IS NULL`,
		named{"now": now, "id": out.EndpointID}); err != nil {
		return airlock.Delivery{}, err
	}
	if p.DisableAfter <= 0 {
		return out, nil
	}
	var since time.Time
	err = t.QueryRow(ctx, `UPDATE endpoints SET disabled_at = @now,
	disabled_reason = 'failing since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ': ' || @why::text
WHERE id = @id AND disabled_at IS NULL AND failing_since <= @now::timestamptz - @after_us * interval '1 microsecond'
RETURNING failing_since`, named{"now": now, "why": p.Attempt.Error, "id": out.EndpointID,
		"after_us": p.DisableAfter.Microseconds()}).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return airlock.Delivery{}, err
	}
	if _, err := t.Exec(ctx, `UPDATE deliveries SET state = 'failed', lease_holder = '', lease_until = NULL
WHERE endpoint_id = @id AND state = 'pending'`, named{"id": out.EndpointID}); err != nil {
		return airlock.Delivery{}, err
	}
	t.event(airlock.Event{Type: airlock.EventEndpointDisabled, At: now.UTC(), Actor: airlock.ActorNotify, Subject: out.EndpointID})
	return out, nil
}

// ListDeliveries lists an endpoint's deliveries, newest first, without
// their payloads.
func (s *Store) ListDeliveries(ctx context.Context, endpointID string, beforeSeq int64, limit int) ([]airlock.Delivery, bool, error) {
	limit = store.RequestFilter{Limit: limit}.PageSize()
	out, err := queryAll(ctx, checked{s}, func(r pgx.Row) (airlock.Delivery, error) { return scanDelivery(r, false) },
		`SELECT `+deliveryColsNoPayload+` FROM deliveries d
WHERE d.endpoint_id = @endpoint AND (@before::bigint <= 0 OR d.seq < @before::bigint) ORDER BY d.seq DESC LIMIT @limit`,
		named{"endpoint": endpointID, "before": beforeSeq, "limit": limit + 1})
	if err != nil {
		return nil, false, translate(err, "deliveries", "list")
	}
	return out[:min(len(out), limit)], len(out) > limit, nil
}

// RemindDue records and announces the reminders that are due. Replicas
// that find one due at once both try to insert it; the primary key keeps
// one, and only the insert that happened appends the event.
func (s *Store) RemindDue(ctx context.Context, r airlock.RemindBefore, limit int) ([]string, error) {
	if r.IsZero() {
		return nil, nil
	}
	limit = store.Batch(limit)
	var ids []string
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		rows, err := t.Query(ctx, tickCTE+`, due AS (
	SELECT r.id FROM requests r, tick
	WHERE r.state = 'pending' AND r.deadline_at > tick.now
		AND r.deadline_at - greatest(@before_us * interval '1 microsecond', (r.deadline_at - r.created_at) * @frac::float8) <= tick.now
		AND NOT EXISTS (SELECT 1 FROM reminders m WHERE m.request_id = r.id)
	ORDER BY r.deadline_at, r.seq LIMIT @limit)
INSERT INTO reminders AS m (request_id, at) SELECT due.id, tick.now FROM due, tick
ON CONFLICT DO NOTHING
RETURNING m.request_id, (SELECT r.instance_id FROM requests r WHERE r.id = m.request_id), m.at`,
			named{"now": s.now(), "before_us": r.Before.Microseconds(), "frac": r.Fraction, "limit": limit})
		if err != nil {
			return err
		}
		ids, err = t.pendingEvents(rows, airlock.EventRequestReminder, airlock.ActorNotify)
		return err
	})
	return ids, translate(err, "reminders", "record")
}
