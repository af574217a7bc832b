-- 0013: reviewer groups and quorum (docs/teams.md, "Groups, routing and
-- quorum"). A request keeps the groups that may decide it (reviewers, one
-- name a line, '' for anyone) and how many approvals it needs (approvals;
-- 0 or 1 for one decision). approved_votes counts the approving votes so far:
-- the decision's conditional write (which locks the row first) reads and
-- bumps it, so concurrent votes on any replica are counted one after the
-- other, and the vote that completes the quorum is the write that ends the
-- request.
--
-- votes keeps each vote of a request that needs several approvals; its
-- primary key lets a principal vote once per request. Every statement may
-- run again (IF NOT EXISTS): a test re-applies the migrations after 0011.

ALTER TABLE requests ADD COLUMN IF NOT EXISTS reviewers text NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN IF NOT EXISTS approvals integer NOT NULL DEFAULT 0 CHECK (approvals >= 0);
ALTER TABLE requests ADD COLUMN IF NOT EXISTS approved_votes integer NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS votes (
    request_id text        NOT NULL,
    principal  text        NOT NULL,
    actor      text        NOT NULL,
    status     text        NOT NULL CHECK (status IN ('approved', 'denied')),
    note       text        NOT NULL DEFAULT '',
    at         timestamptz NOT NULL,
    seq        bigint      GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (request_id, principal)
);
