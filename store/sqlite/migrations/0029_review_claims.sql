-- 0029: what a reviewer's client claims it showed them (docs/protocol.md,
-- "What the reviewer's client claims"): {"seen_fraction", "seconds_open"}
-- as JSON, '' for none. On a request it is the deciding decision's, written
-- by the write that decides; on a vote, that vote's. Never checked, never
-- changed.
ALTER TABLE requests ADD COLUMN decision_review TEXT NOT NULL DEFAULT '';
ALTER TABLE votes ADD COLUMN review TEXT NOT NULL DEFAULT '';
