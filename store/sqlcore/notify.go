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

// RecordAttempts records each attempt of ps, in order, with record, which
// gets the attempt as JSON (store.AttemptsJSON) and the endpoints whose
// failing mark the batch has cleared so far. It stops at the first error.
func RecordAttempts(ps []store.AttemptParams, attempts []string, record func(p store.AttemptParams, attempt string, cleared FailingMarks) (airlock.Delivery, error)) ([]airlock.Delivery, error) {
	out := make([]airlock.Delivery, len(ps))
	cleared := FailingMarks{}
	for i, p := range ps {
		d, err := record(p, attempts[i], cleared)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// FailingMarks are the endpoints whose failing mark a transaction has
// cleared with no failure since: a batch of successes clears it once.
type FailingMarks map[string]bool

// Delivered records a success at endpoint id: clear, the driver's
// statement that clears the endpoint's failing mark, runs unless this
// batch has cleared it already.
func (m FailingMarks) Delivered(id string, clear func() error) error {
	if m[id] {
		return nil
	}
	err := clear()
	m[id] = err == nil
	return err
}

// Failed records a failure at endpoint id: its next success clears its
// mark again.
func (m FailingMarks) Failed(id string) { m[id] = false }

// Notifications (docs/notifications.md): endpoints, the delivery queue
// fed from the audit log, and reminders. The fan-out cursor moves by
// compare-and-set, a delivery is attempted by the holder of its lease (a
// dead holder's lease lapses, and another takes the delivery over), and a
// reminder's primary key records it once.

// NotifySQL are the statements of store.Notify. An endpoint is read as
// its seq, id, kind, url, events, description, secret, created_at,
// created_by, after_event, failing_since, disabled_at and
// disabled_reason; a delivery as its seq, id, endpoint_id, event_id,
// message_id, type, request_id, state, attempts (JSON), created_at,
// next_attempt_at, lease_holder, lease_until and, unless said otherwise,
// payload.
type NotifySQL struct {
	// CreateEndpoint stores endpoint @id (@kind, @url, @events,
	// @description, @secret, @created_by), dated @now, receiving the
	// events after the last one committed, and returns it.
	CreateEndpoint string
	// Endpoint selects endpoint @id; LockEndpoint selects it to change it.
	Endpoint, LockEndpoint string
	// Endpoints selects the endpoints of kind @kind (all when ''), oldest
	// first.
	Endpoints string
	// DeleteEndpoint deletes endpoint @id, with its deliveries, and
	// returns the instant; no row when there was none.
	DeleteEndpoint string
	// Requeue queues again, due at @now, the failed deliveries of
	// endpoint @id last attempted at or after @since or never attempted;
	// it yields the instant, or no row (as WebSessionSQL.EndProfile).
	Requeue string
	// Enable clears endpoint @id's disabling and failing mark and returns
	// the endpoint.
	Enable string
	// Cursor selects the fan-out cursor.
	Cursor string
	// Backlog selects how many deliveries are pending and how many events
	// come after the fan-out cursor.
	Backlog string
	// Unlisted selects whether an enabled endpoint not in @listed starts
	// before event @upto.
	Unlisted string
	// MoveCursor moves the fan-out cursor from @after to @upto, or
	// changes no row.
	MoveCursor string
	// InsertDelivery queues delivery @id (@endpoint, @event (NULL for
	// none), @message, @type, @request, @payload), due at @now and
	// leased to @holder for @lease unless @holder is '', if its endpoint
	// exists and is enabled, once per endpoint and event.
	InsertDelivery string `sql:"optional"`
	// InsertDeliveries, optional, is InsertDelivery for many at once: the
	// same arguments but for @lease, each a list (@ids, @endpoints,
	// @events (0 for none), @messages, @types, @requests, @payloads,
	// @holders). An engine that has it queues a fan-out's deliveries in
	// one statement rather than one each.
	InsertDeliveries string `sql:"optional"`
	// Delivery selects delivery @id.
	Delivery string
	// Lease leases to @holder for @for up to @limit deliveries of
	// endpoint @endpoint, if it is enabled, that are pending, due at @now
	// and not leased, oldest due first, and returns them.
	Lease string
	// RecordAttempt is the compare-and-set of an attempt: delivery @id,
	// pending and leased to @holder, gets @state, attempt @attempt (JSON)
	// appended, next_attempt_at @retry after @now and no lease; it returns
	// the delivery without its payload and the instant, or no row.
	RecordAttempt string
	// ClearFailing clears endpoint @id's failing mark.
	ClearFailing string
	// MarkFailing marks endpoint @id failing since @now unless it is.
	MarkFailing string
	// Disable disables endpoint @id at @now, unless disabled, if it has
	// been failing since @after before @now, saying why (@why), and
	// returns failing_since, or no row.
	Disable string
	// FailPending fails the pending deliveries of endpoint @id.
	FailPending string
	// Deliveries selects up to @limit deliveries of endpoint @endpoint,
	// without their payloads, newest first, with seq < @before unless
	// @before <= 0.
	Deliveries string
	// Remind records, at @now, the reminders of up to @limit pending
	// requests whose reminder is due at @now (@before, @frac:
	// airlock.RemindBefore) and was never recorded, and returns for each
	// the request's id, its instance_id and the instant.
	Remind string
}

func (c *Core) scanEndpoint(row Row) (airlock.Endpoint, error) {
	var (
		e                 airlock.Endpoint
		kind              string
		events            []string
		failing, disabled NullTime
	)
	if err := row.Scan(&e.Seq, &e.ID, &kind, &e.URL, c.d.Strings(&events), &e.Description, &e.Secret, c.d.Time(&e.CreatedAt),
		&e.CreatedBy, &e.AfterEvent, c.d.NullTime(&failing), c.d.NullTime(&disabled), &e.DisabledReason); err != nil {
		return airlock.Endpoint{}, err
	}
	e.Kind, e.FailingSince, e.DisabledAt = airlock.EndpointKind(kind), failing.Ptr(), disabled.Ptr()
	for _, t := range events {
		e.Events = append(e.Events, airlock.NotifyType(t))
	}
	return e, nil
}

// scanDelivery reads a delivery, with its payload when payload is set,
// then into extra.
func (c *Core) scanDelivery(row Row, payload bool, extra ...any) (airlock.Delivery, error) {
	var (
		d           airlock.Delivery
		event       sql.NullInt64
		typ, state  string
		attempts    []byte
		leaseUntil  NullTime
		destPayload []any
	)
	if payload {
		destPayload = []any{&d.Payload}
	}
	dest := []any{&d.Seq, &d.ID, &d.EndpointID, &event, &d.MessageID, &typ, &d.RequestID, &state, &attempts,
		c.d.Time(&d.CreatedAt), c.d.Time(&d.NextAttemptAt), &d.LeaseHolder, c.d.NullTime(&leaseUntil)}
	if err := row.Scan(append(append(dest, destPayload...), extra...)...); err != nil {
		return airlock.Delivery{}, err
	}
	if err := json.Unmarshal(attempts, &d.Attempts); err != nil {
		return airlock.Delivery{}, fmt.Errorf("delivery %s: stored attempts: %w", d.ID, err)
	}
	if len(d.Attempts) == 0 {
		d.Attempts = nil
	}
	d.EventID, d.Type, d.State, d.LeaseUntil = event.Int64, airlock.NotifyType(typ), airlock.DeliveryState(state), leaseUntil.Ptr()
	return d, nil
}

func (c *Core) scanDeliveryWithPayload(row Row) (airlock.Delivery, error) {
	return c.scanDelivery(row, true)
}

// CreateEndpoint stores a new endpoint that receives the events after the
// last one committed (on PostgreSQL, the last one visible: an event drawn
// earlier whose transaction commits later is raced by the creation, and
// not delivered to it).
func (c *Core) CreateEndpoint(ctx context.Context, e airlock.Endpoint) (airlock.Endpoint, error) {
	if e.ID == "" || e.Kind == "" || e.URL == "" {
		return airlock.Endpoint{}, airlock.Invalid("endpoint", "an endpoint needs an ID, a kind and a URL")
	}
	events := make([]string, len(e.Events))
	for i, t := range e.Events {
		events[i] = string(t)
	}
	var out airlock.Endpoint
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		out, err = c.scanEndpoint(tx.QueryRow(c.q.Notify.CreateEndpoint, Args{{"id", e.ID}, {"kind", string(e.Kind)}, {"url", e.URL},
			{"events", events}, {"description", e.Description}, {"secret", e.Secret}, {"created_by", e.CreatedBy}}))
		if err != nil {
			return err
		}
		return tx.Event(airlock.Event{Type: airlock.EventEndpointCreated, At: out.CreatedAt, Actor: e.CreatedBy, Subject: e.ID})
	})
	return out, c.d.Translate(err, "endpoint", e.ID)
}

// GetEndpoint reads an endpoint.
func (c *Core) GetEndpoint(ctx context.Context, id string) (airlock.Endpoint, error) {
	e, err := c.scanEndpoint(c.d.QueryRow(ctx, c.q.Notify.Endpoint, Args{{"id", id}}))
	return e, c.d.Translate(err, "endpoint", id)
}

// ListEndpoints lists the endpoints of kind (all when empty), oldest first.
func (c *Core) ListEndpoints(ctx context.Context, kind airlock.EndpointKind) ([]airlock.Endpoint, error) {
	out, err := all(ctx, c.d, c.scanEndpoint, c.q.Notify.Endpoints, Args{{"kind", string(kind)}})
	return out, c.d.Translate(err, "endpoints", "list")
}

// DeleteEndpoint deletes an endpoint with its deliveries.
func (c *Core) DeleteEndpoint(ctx context.Context, id, actor string) error {
	err := c.d.Write(ctx, func(tx Tx) error {
		var at time.Time
		if err := tx.QueryRow(c.q.Notify.DeleteEndpoint, Args{{"id", id}}).Scan(c.d.Time(&at)); err != nil {
			return err // sql.ErrNoRows: not_found
		}
		return tx.Event(airlock.Event{Type: airlock.EventEndpointDeleted, At: at, Actor: actor, Subject: id})
	})
	return c.d.Translate(err, "endpoint", id)
}

// EnableEndpoint enables a disabled endpoint and queues again the
// deliveries its last run of failures failed: those whose last attempt
// came at or after failing_since (a delivery failed for good records
// next_attempt_at at its last attempt; one failed by the disabling keeps
// the retry time it was waiting for) and those never attempted.
func (c *Core) EnableEndpoint(ctx context.Context, id, actor string) (airlock.Endpoint, error) {
	q := &c.q.Notify
	var out airlock.Endpoint
	err := c.d.Write(ctx, func(tx Tx) error {
		e, err := c.scanEndpoint(tx.QueryRow(q.LockEndpoint, Args{{"id", id}}))
		if err != nil || e.DisabledAt == nil {
			out = e
			return err
		}
		var at time.Time
		if err := tx.QueryRow(q.Requeue, Args{{"id", id}, {"since", e.FailedSince()}}).Scan(c.d.Time(&at)); err != nil && !noRows(err) {
			return err
		}
		if out, err = c.scanEndpoint(tx.QueryRow(q.Enable, Args{{"id", id}})); err != nil {
			return err
		}
		return tx.Event(airlock.Event{Type: airlock.EventEndpointEnabled, At: at, Actor: actor, Subject: id})
	})
	return out, c.d.Translate(err, "endpoint", id)
}

// FanOutCursor returns the last event ID whose deliveries are queued.
func (c *Core) FanOutCursor(ctx context.Context) (int64, error) {
	var n int64
	err := c.d.QueryRow(ctx, c.q.Notify.Cursor, nil).Scan(&n)
	return n, c.d.Translate(err, "fan-out cursor", "")
}

// DeliveryBacklog counts pending deliveries and the events not yet fanned
// out, in one read.
func (c *Core) DeliveryBacklog(ctx context.Context) (store.Backlog, error) {
	var b store.Backlog
	err := c.d.QueryRow(ctx, c.q.Notify.Backlog, nil).Scan(&b.Pending, &b.Unqueued)
	b.Unqueued = max(b.Unqueued, 0)
	return b, c.d.Translate(err, "deliveries", "backlog")
}

// QueueDeliveries moves the fan-out cursor from p.After to p.Upto and
// queues p.Deliveries, in one transaction, unless an endpoint the caller
// did not list would miss some of the events. Writers fanning out at
// once meet at the cursor's row: the second finds the cursor moved.
func (c *Core) QueueDeliveries(ctx context.Context, p store.QueueParams) (bool, error) {
	q := &c.q.Notify
	var moved bool
	err := c.d.Write(ctx, func(tx Tx) error {
		moved = false
		var stale bool
		if err := tx.QueryRow(q.Unlisted, Args{{"upto", p.Upto}, {"listed", append([]string{}, p.Listed...)}}).Scan(&stale); err != nil || stale {
			return err
		}
		n, err := tx.Exec(q.MoveCursor, Args{{"upto", p.Upto}, {"after", p.After}})
		if err != nil || n == 0 {
			return err
		}
		if _, err := c.insertDeliveries(tx, p.Deliveries, p.LeaseFor); err != nil {
			return err
		}
		moved = true
		return nil
	})
	return moved, c.d.Translate(err, "deliveries", "queue")
}

// insertDeliveries queues ds, each leased to its LeaseHolder for leaseFor
// when it has one, and returns how many it queued: in one statement when
// the dialect has InsertDeliveries, else one each.
func (c *Core) insertDeliveries(tx Tx, ds []airlock.Delivery, leaseFor time.Duration) (int64, error) {
	q := &c.q.Notify
	if len(ds) == 0 {
		return 0, nil
	}
	if q.InsertDeliveries != "" {
		n := len(ds)
		ids, endpoints, messages, types, requests, holders := make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n)
		events, payloads := make([]int64, n), make([][]byte, n)
		for i, d := range ds {
			ids[i], endpoints[i], messages[i], types[i], requests[i] = d.ID, d.EndpointID, d.MessageID, string(d.Type), d.RequestID
			events[i], payloads[i], holders[i] = d.EventID, d.Payload, d.LeaseHolder
			if payloads[i] == nil {
				payloads[i] = []byte{}
			}
		}
		return tx.Exec(q.InsertDeliveries, Args{{"ids", ids}, {"endpoints", endpoints}, {"events", events}, {"messages", messages},
			{"types", types}, {"requests", requests}, {"payloads", payloads}, {"holders", holders}, {"lease", leaseFor}})
	}
	var queued int64
	for _, d := range ds {
		var event any
		if d.EventID != 0 {
			event = d.EventID
		}
		payload := d.Payload
		if payload == nil {
			payload = []byte{}
		}
		n, err := tx.Exec(q.InsertDelivery, Args{{"id", d.ID}, {"endpoint", d.EndpointID}, {"event", event}, {"message", d.MessageID},
			{"type", string(d.Type)}, {"request", d.RequestID}, {"payload", payload}, {"holder", d.LeaseHolder}, {"lease", leaseFor}})
		if err != nil {
			return 0, err
		}
		queued += n
	}
	return queued, nil
}

// AddDelivery queues one delivery outside the fan-out.
func (c *Core) AddDelivery(ctx context.Context, d airlock.Delivery) (airlock.Delivery, error) {
	var out airlock.Delivery
	err := c.d.Write(ctx, func(tx Tx) error {
		n, err := c.insertDeliveries(tx, []airlock.Delivery{{ID: d.ID, EndpointID: d.EndpointID, EventID: d.EventID,
			MessageID: d.MessageID, Type: d.Type, RequestID: d.RequestID, Payload: d.Payload}}, 0)
		if err != nil {
			return err
		}
		if n == 0 {
			return airlock.NotFound("endpoint", d.EndpointID)
		}
		out, err = c.scanDelivery(tx.QueryRow(c.q.Notify.Delivery, Args{{"id", d.ID}}), true)
		return err
	})
	return out, c.d.Translate(err, "delivery", d.ID)
}

// LeaseDeliveries leases up to p.Limit due deliveries of one enabled
// endpoint to p.Holder.
func (c *Core) LeaseDeliveries(ctx context.Context, p store.LeaseParams) ([]airlock.Delivery, error) {
	var out []airlock.Delivery
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		out, err = txAll(tx, c.scanDeliveryWithPayload, c.q.Notify.Lease, Args{{"holder", p.Holder}, {"for", p.For},
			{"endpoint", p.EndpointID}, {"limit", max(p.Limit, 1)}})
		return err
	})
	if err != nil {
		return nil, c.d.Translate(err, "deliveries", "lease")
	}
	slices.SortFunc(out, compareDue)
	return out, nil
}

// RecordAttempts records attempts in one transaction.
func (c *Core) RecordAttempts(ctx context.Context, ps []store.AttemptParams) ([]airlock.Delivery, error) {
	attempts, err := store.AttemptsJSON(ps)
	if err != nil {
		return nil, err
	}
	var out []airlock.Delivery
	err = c.d.Write(ctx, func(tx Tx) (err error) {
		out, err = RecordAttempts(ps, attempts, func(p store.AttemptParams, attempt string, cleared FailingMarks) (airlock.Delivery, error) {
			return c.recordAttempt(tx, p, attempt, cleared)
		})
		return err
	})
	if err != nil {
		return nil, c.d.Translate(err, "deliveries", "record attempts")
	}
	return out, nil
}

// recordAttempt records one attempt in tx and returns the delivery without
// its payload (the writer would copy it for no one); the zero Delivery
// when the delivery is gone or no longer p.Holder's.
func (c *Core) recordAttempt(tx Tx, p store.AttemptParams, attempt string, cleared FailingMarks) (airlock.Delivery, error) {
	q := &c.q.Notify
	state, _ := p.State()
	var at time.Time
	out, err := c.scanDelivery(tx.QueryRow(q.RecordAttempt, Args{{"state", string(state)}, {"attempt", attempt},
		{"retry", p.RetryIn}, {"id", p.DeliveryID}, {"holder", p.Holder}}), false, c.d.Time(&at))
	if noRows(err) {
		return airlock.Delivery{}, nil
	}
	if err != nil {
		return airlock.Delivery{}, err
	}
	if p.Outcome == airlock.OutcomeDelivered {
		return out, cleared.Delivered(out.EndpointID, func() error {
			_, err := tx.Exec(q.ClearFailing, Args{{"id", out.EndpointID}})
			return err
		})
	}
	cleared.Failed(out.EndpointID)
	if _, err := tx.Exec(q.MarkFailing, Args{{"id", out.EndpointID}, {Now, at}}); err != nil {
		return airlock.Delivery{}, err
	}
	if p.DisableAfter <= 0 {
		return out, nil
	}
	// The stores keep microseconds: DisableAfter rounds up to one, so that
	// "failing for at least DisableAfter" never holds sooner than asked (a
	// nanosecond would otherwise round to nothing and disable at the
	// first failure).
	after := p.DisableAfter
	if r := after % time.Microsecond; r != 0 {
		after += time.Microsecond - r
	}
	var since time.Time
	err = tx.QueryRow(q.Disable, Args{{"id", out.EndpointID}, {Now, at}, {"after", after}, {"why", p.Attempt.Error}}).Scan(c.d.Time(&since))
	if noRows(err) {
		return out, nil
	}
	if err != nil {
		return airlock.Delivery{}, err
	}
	if _, err := tx.Exec(q.FailPending, Args{{"id", out.EndpointID}}); err != nil {
		return airlock.Delivery{}, err
	}
	return out, tx.Event(airlock.Event{Type: airlock.EventEndpointDisabled, At: at, Actor: airlock.ActorNotify, Subject: out.EndpointID})
}

// ListDeliveries lists an endpoint's deliveries, newest first, without
// their payloads.
func (c *Core) ListDeliveries(ctx context.Context, endpointID string, beforeSeq int64, limit int) ([]airlock.Delivery, bool, error) {
	limit = store.RequestFilter{Limit: limit}.PageSize()
	out, err := all(ctx, c.d, func(row Row) (airlock.Delivery, error) { return c.scanDelivery(row, false) },
		c.q.Notify.Deliveries, Args{{"endpoint", endpointID}, {"before", beforeSeq}, {"limit", limit + 1}})
	if err != nil {
		return nil, false, c.d.Translate(err, "deliveries", "list")
	}
	return out[:min(len(out), limit)], len(out) > limit, nil
}

// RemindDue records and announces the reminders that are due. Writers
// that find one due at once both try to record it; the primary key keeps
// one, and only the write that recorded it appends the event.
func (c *Core) RemindDue(ctx context.Context, r airlock.RemindBefore, limit int) ([]string, error) {
	if r.IsZero() {
		return nil, nil
	}
	ids, err := c.eventPerChange(ctx, c.q.Notify.Remind, Args{{"before", r.Before}, {"frac", r.Fraction}, {"limit", store.Batch(limit)}},
		airlock.EventRequestReminder, airlock.ActorNotify, false)
	return ids, c.d.Translate(err, "reminders", "record")
}

// eventPerChange runs query, a write that changes pending requests and
// yields them as pendingChange rows, and appends for each an event of typ
// by actor in the same transaction. It returns their IDs. announce tells
// waiters that each changed: an escalation widens who may decide it, while
// a reminder changes nothing a waiter reads.
func (c *Core) eventPerChange(ctx context.Context, query string, args Args, typ airlock.EventType, actor string, announce bool) ([]string, error) {
	var ids []string
	err := c.d.Write(ctx, func(tx Tx) error {
		ids = nil
		rows, err := tx.Query(query, args)
		if err != nil {
			return err
		}
		due, err := pendingChanges(c, rows)
		if err != nil {
			return err
		}
		for _, d := range due {
			if err := tx.Event(airlock.Event{Type: typ, At: d.at, Actor: actor,
				RequestID: d.id, InstanceID: d.instance, State: airlock.StatePending}); err != nil {
				return err
			}
			if announce {
				tx.Changed(d.id)
			}
			ids = append(ids, d.id)
		}
		return nil
	})
	return ids, err
}

// pendingChange is a pending request a statement changed (a reminder
// recorded, an escalation): its ID, its instance's and the instant.
type pendingChange struct {
	id, instance string
	at           time.Time
}

// pendingChanges reads every row of rows as a pendingChange, and closes
// rows.
func pendingChanges(c *Core, rows Rows) ([]pendingChange, error) {
	defer rows.Close()
	return Collect(rows, func() (pendingChange, error) {
		var p pendingChange
		err := rows.Scan(&p.id, &p.instance, c.d.Time(&p.at))
		return p, err
	})
}
