-- 0022: payload retention (docs/operations.md, "Payload retention").
--
-- --retain-payloads purges a terminal request's arguments, reasoning and
-- context once its decision is that old; the request keeps its state,
-- gains purged_at, and keeps the digests of what was purged, which the
-- purge computes from the bytes it removes, in the same write. The audit
-- log's sequencer builds the leaf of a purged request's event from them,
-- so an event appended or sequenced after the purge still gets the leaf
-- it would have had. The digests are written only by the purge ('' until
-- then): a request that still has its bytes is digested from them. The
-- columns are added with constant defaults, which rewrite no row.
ALTER TABLE requests ADD COLUMN IF NOT EXISTS purged_at timestamptz;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS arguments_digest text NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN IF NOT EXISTS reasoning_digest text NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN IF NOT EXISTS context_digest text NOT NULL DEFAULT '';

-- The requests a purge may come to, oldest decision first. Pending
-- requests (no decided_at) and purged ones stay out of it.
CREATE INDEX IF NOT EXISTS requests_purge_due ON requests (decided_at)
    WHERE purged_at IS NULL AND decided_at IS NOT NULL;
