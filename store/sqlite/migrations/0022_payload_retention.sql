-- 0022: payload retention (docs/operations.md, "Payload retention").
--
-- --retain-payloads purges a terminal request's arguments, reasoning and
-- context once its decision is that old; the request keeps its state,
-- gains purged_at, and keeps the digests of what was purged, which the
-- purge computes from the bytes it removes, in the same write. The audit
-- log's sequencer builds the leaf of a purged request's event from them,
-- so an event appended or sequenced after the purge still gets the leaf
-- it would have had. The digests are written only by the purge ('' until
-- then): a request that still has its bytes is digested from them.
ALTER TABLE requests ADD COLUMN purged_at INTEGER;
ALTER TABLE requests ADD COLUMN arguments_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN reasoning_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN context_digest TEXT NOT NULL DEFAULT '';

-- The requests a purge may come to, oldest decision first. Pending
-- requests (no decided_at) and purged ones stay out of it.
CREATE INDEX requests_purge_due ON requests (decided_at)
    WHERE purged_at IS NULL AND decided_at IS NOT NULL;
