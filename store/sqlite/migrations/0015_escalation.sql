-- 0015: escalation (docs/teams.md, "Groups, routing and quorum"). A
-- request routed to groups may name groups to widen to (escalate_to, one
-- name a line) once it has waited escalate_after (microseconds) since its
-- creation; escalated_at records that it was, so that it happens once.

ALTER TABLE requests ADD COLUMN escalate_to TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN escalate_after INTEGER NOT NULL DEFAULT 0;
ALTER TABLE requests ADD COLUMN escalated_at INTEGER;

-- The sweep reads only the pending requests still to escalate.
CREATE INDEX requests_to_escalate ON requests (seq)
WHERE state = 'pending' AND escalate_to <> '' AND escalated_at IS NULL;
