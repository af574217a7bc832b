-- 0010: reviewer links and Slack messages (docs/notifications.md, "Slack").
-- A link ties a reviewer principal to a Slack user and an email address;
-- a Slack message row says where a request's message was posted, so that
-- it can be updated to the outcome.

CREATE TABLE reviewer_links (
    principal     TEXT    PRIMARY KEY,
    slack_user_id TEXT,                 -- NULL when none
    email         TEXT,                 -- NULL when none
    updated_at    INTEGER NOT NULL,
    updated_by    TEXT    NOT NULL
) STRICT;

-- One Slack user decides as one principal.
CREATE UNIQUE INDEX reviewer_links_slack ON reviewer_links (slack_user_id) WHERE slack_user_id IS NOT NULL;

CREATE TABLE slack_messages (
    request_id TEXT    PRIMARY KEY,
    channel    TEXT    NOT NULL,
    ts         TEXT    NOT NULL,
    posted_at  INTEGER NOT NULL
) STRICT;
