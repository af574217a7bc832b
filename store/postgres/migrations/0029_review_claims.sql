-- 0029: what a reviewer's client claims it showed them (docs/protocol.md,
-- "What the reviewer's client claims"): {"seen_fraction", "seconds_open"}
-- as JSON, '' for none. On a request it is the deciding decision's, written
-- by the write that decides; on a vote, that vote's. Never checked, never
-- changed. The columns are added with constant defaults, which rewrite no
-- row.
ALTER TABLE requests ADD COLUMN IF NOT EXISTS decision_review text NOT NULL DEFAULT '';
ALTER TABLE votes ADD COLUMN IF NOT EXISTS review text NOT NULL DEFAULT '';
