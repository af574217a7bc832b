package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// Notifications (docs/notifications.md): endpoints, the delivery queue
// fed from the audit log, and reminders. The store has one writer, so the
// fan-out cursor's compare-and-set and the reminders' primary key are what
// keep two processes on one file from queueing or reminding twice.

const endpointCols = `seq, id, kind, url, events, description, secret, created_at, created_by, after_event,
	failing_since, disabled_at, disabled_reason`

// deliveryCols are a delivery's columns; payload last, so that lists can
// leave it out (deliveryColsNoPayload).
const (
	deliveryColsNoPayload = `seq, id, endpoint_id, event_id, message_id, type, request_id, state, attempts, created_at,
	next_attempt_at, lease_holder, lease_until`
	deliveryCols = deliveryColsNoPayload + `, payload`
)

var endpointSQL = sqlcore.NotifySQL{
	CreateEndpoint: `INSERT INTO endpoints (id, kind, url, events, description, secret, created_at, created_by, after_event)
VALUES (@id, @kind, @url, @events, @description, @secret, @now, @created_by, (SELECT coalesce(max(id), 0) FROM events))
RETURNING ` + endpointCols,
	Endpoint:       `SELECT ` + endpointCols + ` FROM endpoints WHERE id = @id`,
	LockEndpoint:   `SELECT ` + endpointCols + ` FROM endpoints WHERE id = @id`,
	Endpoints:      `SELECT ` + endpointCols + ` FROM endpoints WHERE @kind = '' OR kind = @kind ORDER BY seq`,
	DeleteEndpoint: `DELETE FROM endpoints WHERE id = @id RETURNING @now`,
	Requeue: `UPDATE deliveries SET state = 'pending', next_attempt_at = @now, lease_holder = '', lease_until = NULL
WHERE endpoint_id = @id AND state = 'failed' AND (next_attempt_at >= @since OR attempts = '[]')`,
	Enable: `UPDATE endpoints SET disabled_at = NULL, disabled_reason = '', failing_since = NULL
WHERE id = @id RETURNING ` + endpointCols,
	Cursor: `SELECT event_id FROM fanout_cursor WHERE id = 1`,
	Backlog: `SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending'),
	(SELECT coalesce(max(id), 0) FROM events) - (SELECT event_id FROM fanout_cursor WHERE id = 1)`,
	Unlisted: `SELECT EXISTS (SELECT 1 FROM endpoints
	WHERE disabled_at IS NULL AND after_event < @upto AND id NOT IN (SELECT value FROM json_each(@listed)))`,
	MoveCursor: `UPDATE fanout_cursor SET event_id = @upto WHERE id = 1 AND event_id = @after`,
	InsertDelivery: `INSERT INTO deliveries (id, endpoint_id, event_id, message_id, type, request_id, payload, created_at, next_attempt_at,
	lease_holder, lease_until)
SELECT @id, @endpoint, @event, @message, @type, @request, @payload, @now, @now, @holder,
	CASE WHEN @holder = '' THEN NULL ELSE @now + @lease END
WHERE EXISTS (SELECT 1 FROM endpoints WHERE id = @endpoint AND disabled_at IS NULL)
ON CONFLICT (endpoint_id, event_id) DO NOTHING`,
	Delivery: `SELECT ` + deliveryCols + ` FROM deliveries WHERE id = @id`,
	Lease: `UPDATE deliveries SET lease_holder = @holder, lease_until = @now + @for
WHERE id IN (SELECT d.id FROM deliveries d
	WHERE d.endpoint_id = @endpoint AND d.state = 'pending' AND d.next_attempt_at <= @now
		AND (d.lease_until IS NULL OR d.lease_until <= @now)
	ORDER BY d.next_attempt_at, d.seq LIMIT @limit)
	AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = @endpoint AND e.disabled_at IS NULL)
RETURNING ` + deliveryCols,
	RecordAttempt: `UPDATE deliveries SET state = @state,
	attempts = json_insert(attempts, '$[#]', json(@attempt)), next_attempt_at = @now + @retry, lease_holder = '', lease_until = NULL
WHERE id = @id AND lease_holder = @holder AND state = 'pending' RETURNING ` + deliveryColsNoPayload + `, @now`,
	ClearFailing: `UPDATE endpoints SET failing_since = NULL WHERE id = @id AND failing_since IS NOT NULL`,
	MarkFailing:  `UPDATE endpoints SET failing_since = @now WHERE id = @id AND failing_since IS NULL`,
	Disable: `UPDATE endpoints SET disabled_at = @now,
	disabled_reason = 'failing since ' || strftime('%Y-%m-%dT%H:%M:%SZ', failing_since / 1000000, 'unixepoch') || ': ' || @why
WHERE id = @id AND disabled_at IS NULL AND failing_since <= @now - @after RETURNING failing_since`,
	FailPending: `UPDATE deliveries SET state = 'failed', lease_holder = '', lease_until = NULL
WHERE endpoint_id = @id AND state = 'pending'`,
	Deliveries: `SELECT ` + deliveryColsNoPayload + ` FROM deliveries
WHERE endpoint_id = @endpoint AND (@before <= 0 OR seq < @before) ORDER BY seq DESC LIMIT @limit`,
	// A reminder is due once now is at least its lead before the
	// deadline; the widest lead bounds the index range.
	Remind: `INSERT INTO reminders (request_id, at)
SELECT r.id, @now FROM requests r
WHERE r.state = 'pending' AND r.deadline_at > @now
	AND r.deadline_at - max(@before, CAST((r.deadline_at - r.created_at) * @frac AS INTEGER)) <= @now
	AND NOT EXISTS (SELECT 1 FROM reminders m WHERE m.request_id = r.id)
ORDER BY r.deadline_at, r.seq LIMIT @limit
ON CONFLICT DO NOTHING
RETURNING request_id, (SELECT q.instance_id FROM requests q WHERE q.id = reminders.request_id), at`,
}
