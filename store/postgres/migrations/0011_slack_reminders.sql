-- 0011: the Slack endpoint takes reminders (docs/notifications.md,
-- "Reminders"). An endpoint created before reminders reached Slack lists
-- its types without approval_request.reminder; it gains it here.
UPDATE endpoints SET events = array_append(events, 'approval_request.reminder')
WHERE id = 'whk_slack' AND kind = 'slack' AND cardinality(events) > 0
    AND NOT ('approval_request.reminder' = ANY (events));
