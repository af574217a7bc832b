-- Notifications (docs/notifications.md; sqlcore.NotifySQL): endpoints,
-- the delivery queue fed from the audit log, and reminders, shared by
-- every replica. The fan-out cursor moves by compare-and-set, deliveries
-- are leased with FOR UPDATE SKIP LOCKED and a lease expiry (a dead
-- replica's lease lapses and another takes the delivery over), and a
-- reminder's primary key makes replicas that find it due together record
-- it once.

-- name: endpointCols
e.seq, e.id, e.kind, e.url, e.events, e.description, e.secret, e.created_at, e.created_by,
	e.after_event, e.failing_since, e.disabled_at, e.disabled_reason

-- name: deliveryColsNoPayload
d.seq, d.id, d.endpoint_id, d.event_id, d.message_id, d.type, d.request_id, d.state, d.attempts,
	d.created_at, d.next_attempt_at, d.lease_holder, d.lease_until

-- name: Notify.CreateEndpoint
{{tick}}
INSERT INTO endpoints AS e (id, kind, url, events, description, secret,
	created_at, created_by, after_event)
SELECT @id, @kind, @url, @events::text[], @description, @secret, tick.now, @created_by, (SELECT coalesce(max(id), 0) FROM events)
FROM tick RETURNING {{endpointCols}}

-- name: Notify.Endpoint
SELECT {{endpointCols}} FROM endpoints e WHERE e.id = @id

-- name: Notify.LockEndpoint
SELECT {{endpointCols}} FROM endpoints e WHERE e.id = @id FOR UPDATE

-- name: Notify.Endpoints
SELECT {{endpointCols}} FROM endpoints e WHERE @kind = '' OR e.kind = @kind ORDER BY e.seq

-- name: Notify.DeleteEndpoint
{{tick}}
DELETE FROM endpoints WHERE id = @id RETURNING (SELECT now FROM tick)

-- name: Notify.Requeue
{{tick}}
, requeued AS (UPDATE deliveries d SET state = 'pending', next_attempt_at = tick.now,
	lease_holder = '', lease_until = NULL
FROM tick WHERE d.endpoint_id = @id AND d.state = 'failed' AND (d.next_attempt_at >= @since OR jsonb_array_length(d.attempts) = 0)
RETURNING d.id)
SELECT now FROM tick

-- name: Notify.Enable
UPDATE endpoints e SET disabled_at = NULL, disabled_reason = '', failing_since = NULL
WHERE e.id = @id RETURNING {{endpointCols}}

-- name: Notify.Cursor
SELECT event_id FROM fanout_cursor WHERE id = 1

-- name: Notify.Backlog
SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending'),
	(SELECT coalesce(max(id), 0) FROM events) - (SELECT event_id FROM fanout_cursor WHERE id = 1)

-- name: Notify.Unlisted
SELECT EXISTS (SELECT 1 FROM endpoints e
	WHERE e.disabled_at IS NULL AND e.after_event < @upto AND NOT (e.id = ANY(@listed::text[])))

-- name: Notify.MoveCursor
-- Replicas fanning out at once meet at the cursor's row: the second waits
-- for the first's commit and then finds the cursor moved.
UPDATE fanout_cursor SET event_id = @upto WHERE id = 1 AND event_id = @after

-- name: Notify.InsertDeliveries
-- One statement queues a fan-out's deliveries, in one round trip.
{{tick}}
INSERT INTO deliveries (id, endpoint_id, event_id, message_id, type, request_id, payload,
	created_at, next_attempt_at, lease_holder, lease_until)
SELECT d.id, d.endpoint_id, nullif(d.event_id, 0), d.message_id, d.type, d.request_id, d.payload, tick.now, tick.now,
	d.holder, CASE WHEN d.holder = '' THEN NULL ELSE tick.now + @lease::interval END
FROM tick, unnest(@ids::text[], @endpoints::text[], @events::bigint[], @messages::text[], @types::text[], @requests::text[],
	@payloads::bytea[], @holders::text[]) AS d(id, endpoint_id, event_id, message_id, type, request_id, payload, holder)
WHERE EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id AND e.disabled_at IS NULL)
ON CONFLICT (endpoint_id, event_id) DO NOTHING

-- name: Notify.Delivery
SELECT {{deliveryColsNoPayload}}, d.payload FROM deliveries d WHERE d.id = @id

-- name: Notify.Lease
-- Rows another replica is leasing now are skipped.
{{tick}}
, due AS (
	SELECT d.seq FROM deliveries d, tick
	WHERE d.endpoint_id = @endpoint AND d.state = 'pending' AND d.next_attempt_at <= tick.now
		AND (d.lease_until IS NULL OR d.lease_until <= tick.now)
		AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = @endpoint AND e.disabled_at IS NULL)
	ORDER BY d.next_attempt_at, d.seq LIMIT @limit
	FOR UPDATE OF d SKIP LOCKED)
UPDATE deliveries d SET lease_holder = @holder, lease_until = tick.now + @for::interval
FROM due, tick WHERE d.seq = due.seq
RETURNING {{deliveryColsNoPayload}}, d.payload

-- name: Notify.RecordAttempt
{{tick}}
UPDATE deliveries d SET state = @state,
	attempts = d.attempts || jsonb_build_array(@attempt::jsonb),
	next_attempt_at = tick.now + @retry::interval, lease_holder = '', lease_until = NULL
FROM tick WHERE d.id = @id AND d.lease_holder = @holder AND d.state = 'pending'
RETURNING {{deliveryColsNoPayload}}, tick.now

-- name: Notify.ClearFailing
UPDATE endpoints SET failing_since = NULL WHERE id = @id AND failing_since IS NOT NULL

-- name: Notify.MarkFailing
UPDATE endpoints SET failing_since = @now WHERE id = @id AND failing_since IS NULL

-- name: Notify.Disable
UPDATE endpoints SET disabled_at = @now,
	disabled_reason = 'failing since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ': ' || @why::text
WHERE id = @id AND disabled_at IS NULL AND failing_since <= @now::timestamptz - @after::interval
RETURNING failing_since

-- name: Notify.FailPending
UPDATE deliveries SET state = 'failed', lease_holder = '', lease_until = NULL
WHERE endpoint_id = @id AND state = 'pending'

-- name: Notify.Deliveries
SELECT {{deliveryColsNoPayload}} FROM deliveries d
WHERE d.endpoint_id = @endpoint AND (@before::bigint <= 0 OR d.seq < @before::bigint) ORDER BY d.seq DESC LIMIT @limit

-- name: Notify.Remind
-- Replicas that find a reminder due at once both try to insert it; the
-- primary key keeps one, and only the insert that happened returns a row
-- (and appends the event).
{{tick}}
, due AS (
	SELECT r.id FROM requests r, tick
	WHERE r.state = 'pending' AND r.deadline_at > tick.now
		AND r.deadline_at - greatest(@before::interval, (r.deadline_at - r.created_at) * @frac::float8) <= tick.now
		AND NOT EXISTS (SELECT 1 FROM reminders m WHERE m.request_id = r.id)
	ORDER BY r.deadline_at, r.seq LIMIT @limit)
INSERT INTO reminders AS m (request_id, at) SELECT due.id, tick.now FROM due, tick
ON CONFLICT DO NOTHING
RETURNING m.request_id, (SELECT r.instance_id FROM requests r WHERE r.id = m.request_id), m.at
