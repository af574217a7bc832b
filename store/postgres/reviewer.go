package postgres

import "github.com/airlockhq/airlock/store/sqlcore"

// Reviewer links and Slack messages (docs/notifications.md, "Slack").

const (
	linkCols  = `l.principal, coalesce(l.slack_user_id, ''), coalesce(l.email, ''), l.updated_at, l.updated_by`
	slackCols = `m.request_id, m.channel, m.ts, m.posted_at`
)

var reviewerSQL = sqlcore.ReviewerSQL{
	DeleteLink:      tickCTE + `DELETE FROM reviewer_links WHERE principal = @principal RETURNING (SELECT now FROM tick)`,
	LinkedElsewhere: `SELECT principal FROM reviewer_links WHERE slack_user_id = @slack AND principal <> @principal`,
	PutLink: tickCTE + `INSERT INTO reviewer_links AS l (principal, slack_user_id, email, updated_at, updated_by)
SELECT @principal, @slack, @email, tick.now, @by FROM tick
ON CONFLICT (principal) DO UPDATE SET slack_user_id = excluded.slack_user_id, email = excluded.email,
	updated_at = excluded.updated_at, updated_by = excluded.updated_by
RETURNING ` + linkCols,
	ListLinks:   `SELECT ` + linkCols + ` FROM reviewer_links l ORDER BY l.principal`,
	LinkBySlack: `SELECT ` + linkCols + ` FROM reviewer_links l WHERE l.slack_user_id = @slack`,
	PutSlackMessage: tickCTE + `INSERT INTO slack_messages AS m (request_id, channel, ts, posted_at)
SELECT @request, @channel, @ts, tick.now FROM tick ON CONFLICT (request_id) DO NOTHING RETURNING ` + slackCols,
	SlackMessage: `SELECT ` + slackCols + ` FROM slack_messages m WHERE m.request_id = @request`,
}
