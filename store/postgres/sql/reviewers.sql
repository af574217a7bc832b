-- Reviewer links and Slack messages (docs/notifications.md, "Slack";
-- sqlcore.ReviewerSQL).

-- name: linkCols
l.principal, coalesce(l.slack_user_id, ''), coalesce(l.email, ''), l.updated_at, l.updated_by

-- name: slackCols
m.request_id, m.channel, m.ts, m.posted_at

-- name: Reviewers.DeleteLink
{{tick}}
DELETE FROM reviewer_links WHERE principal = @principal RETURNING (SELECT now FROM tick)

-- name: Reviewers.LinkedElsewhere
SELECT principal FROM reviewer_links WHERE slack_user_id = @slack AND principal <> @principal

-- name: Reviewers.PutLink
{{tick}}
INSERT INTO reviewer_links AS l (principal, slack_user_id, email, updated_at, updated_by)
SELECT @principal, @slack, @email, tick.now, @by FROM tick
ON CONFLICT (principal) DO UPDATE SET slack_user_id = excluded.slack_user_id, email = excluded.email,
	updated_at = excluded.updated_at, updated_by = excluded.updated_by
RETURNING {{linkCols}}

-- name: Reviewers.ListLinks
SELECT {{linkCols}} FROM reviewer_links l ORDER BY l.principal

-- name: Reviewers.LinkBySlack
SELECT {{linkCols}} FROM reviewer_links l WHERE l.slack_user_id = @slack

-- name: Reviewers.PutSlackMessage
{{tick}}
INSERT INTO slack_messages AS m (request_id, channel, ts, posted_at)
SELECT @request, @channel, @ts, tick.now FROM tick ON CONFLICT (request_id) DO NOTHING RETURNING {{slackCols}}

-- name: Reviewers.SlackMessage
SELECT {{slackCols}} FROM slack_messages m WHERE m.request_id = @request
