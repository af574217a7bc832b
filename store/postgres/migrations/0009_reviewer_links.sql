-- 0009: reviewer links and Slack messages (docs/notifications.md, "Slack").
-- A link ties a reviewer principal to a Slack user and an email address;
-- a Slack message row says where a request's message was posted, so that
-- it can be updated to the outcome.

CREATE TABLE reviewer_links (
    principal     text        PRIMARY KEY,
    slack_user_id text,                   -- NULL when none
    email         text,                   -- NULL when none
    updated_at    timestamptz NOT NULL,
    updated_by    text        NOT NULL
);

-- One Slack user decides as one principal.
CREATE UNIQUE INDEX reviewer_links_slack ON reviewer_links (slack_user_id) WHERE slack_user_id IS NOT NULL;

CREATE TABLE slack_messages (
    request_id text        PRIMARY KEY,
    channel    text        NOT NULL,
    ts         text        NOT NULL,
    posted_at  timestamptz NOT NULL
);
