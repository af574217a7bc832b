-- 0022: the events of one request, by an index (docs/audit.md, "A
-- request's proof"): GET /v1/approval-requests/{id}/proof reads the leaves
-- of a request's events, which without it would scan every event.
CREATE INDEX events_by_request ON events (request_id) WHERE request_id <> '';
