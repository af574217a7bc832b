-- 0028: the history of decisions, by an index (docs/performance.md,
-- "Reviewer statistics and suggestions"). GET /v1/reviewers/{p}/stats,
-- the metrics' start and GET /v1/suggestions read the approvals and
-- denials of a window of decision time; the index holds them in that
-- order with what the statistics need (the decider, the state, the
-- creation time, the arguments' size), so neither reads a request outside
-- the window.
CREATE INDEX IF NOT EXISTS requests_decided ON requests (decided_at, decided_by, state, created_at, octet_length(arguments))
    WHERE state IN ('approved', 'denied');
