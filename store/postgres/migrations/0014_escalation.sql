-- 0014: escalation (docs/teams.md, "Groups, routing and quorum"). A
-- request routed to groups may name groups to widen to (escalate_to, one
-- name a line) once it has waited escalate_after since its creation;
-- escalated_at records that it was, so that it happens once. Every
-- statement may run again (IF NOT EXISTS).

ALTER TABLE requests ADD COLUMN IF NOT EXISTS escalate_to text NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN IF NOT EXISTS escalate_after interval NOT NULL DEFAULT '0';
ALTER TABLE requests ADD COLUMN IF NOT EXISTS escalated_at timestamptz;

-- The sweep reads only the pending requests still to escalate.
CREATE INDEX IF NOT EXISTS requests_to_escalate ON requests (seq)
WHERE state = 'pending' AND escalate_to <> '' AND escalated_at IS NULL;
