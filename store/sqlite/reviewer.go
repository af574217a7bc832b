package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// Reviewer links and Slack messages (docs/notifications.md, "Slack").

const (
	linkCols  = `principal, coalesce(slack_user_id, ''), coalesce(email, ''), updated_at, updated_by`
	slackCols = `request_id, channel, ts, posted_at`
)

var reviewerSQL = sqlcore.ReviewerSQL{
	DeleteLink:      `DELETE FROM reviewer_links WHERE principal = @principal RETURNING @now`,
	LinkedElsewhere: `SELECT principal FROM reviewer_links WHERE slack_user_id = @slack AND principal <> @principal`,
	PutLink: `INSERT INTO reviewer_links (principal, slack_user_id, email, updated_at, updated_by)
VALUES (@principal, @slack, @email, @now, @by) ON CONFLICT (principal) DO UPDATE SET slack_user_id = excluded.slack_user_id,
	email = excluded.email, updated_at = excluded.updated_at, updated_by = excluded.updated_by
RETURNING ` + linkCols,
	ListLinks:   `SELECT ` + linkCols + ` FROM reviewer_links ORDER BY principal`,
	LinkBySlack: `SELECT ` + linkCols + ` FROM reviewer_links WHERE slack_user_id = @slack`,
	PutSlackMessage: `INSERT INTO slack_messages (request_id, channel, ts, posted_at) VALUES (@request, @channel, @ts, @now)
ON CONFLICT (request_id) DO NOTHING RETURNING ` + slackCols,
	SlackMessage: `SELECT ` + slackCols + ` FROM slack_messages WHERE request_id = @request`,
}
