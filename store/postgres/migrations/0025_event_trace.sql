-- 0025: the trace context of the call that appended each event
-- (docs/operations.md, "Telemetry"): the W3C trace ID and span ID, as
-- lowercase hex, of the span the change was made in; empty when the call
-- was not traced. A decision made an hour later, on another replica,
-- links its span to the request's creation by them, and a delivery to
-- the event it delivers.
ALTER TABLE events ADD COLUMN IF NOT EXISTS trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN IF NOT EXISTS span_id TEXT NOT NULL DEFAULT '';
