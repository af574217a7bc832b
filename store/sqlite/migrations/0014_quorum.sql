-- 0014: reviewer groups and quorum (docs/teams.md, "Groups, routing and
-- quorum"). A request keeps the groups that may decide it (reviewers, one
-- name a line, '' for anyone) and how many approvals it needs (approvals;
-- 0 or 1 for one decision). approved_votes counts the approving votes so far:
-- the decision's conditional write reads and bumps it, so the vote that
-- completes the quorum is the write that ends the request.
--
-- votes keeps each vote of a request that needs several approvals; its
-- primary key lets a principal vote once per request.

ALTER TABLE requests ADD COLUMN reviewers TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN approvals INTEGER NOT NULL DEFAULT 0 CHECK (approvals >= 0);
ALTER TABLE requests ADD COLUMN approved_votes INTEGER NOT NULL DEFAULT 0;

CREATE TABLE votes (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT    NOT NULL,
    principal  TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    status     TEXT    NOT NULL CHECK (status IN ('approved', 'denied')),
    note       TEXT    NOT NULL DEFAULT '',
    at         INTEGER NOT NULL,
    UNIQUE (request_id, principal)
) STRICT;
