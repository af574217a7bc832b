-- 0012: the Slack endpoint takes reminders (docs/notifications.md,
-- "Reminders"). An endpoint created before reminders reached Slack lists
-- its types without approval_request.reminder; it gains it here.
UPDATE endpoints SET events = json_insert(events, '$[#]', 'approval_request.reminder')
WHERE id = 'whk_slack' AND kind = 'slack' AND json_array_length(events) > 0
    AND NOT EXISTS (SELECT 1 FROM json_each(endpoints.events) WHERE value = 'approval_request.reminder');
