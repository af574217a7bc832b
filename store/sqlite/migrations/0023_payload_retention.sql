-- 0023: payload retention (docs/operations.md, "Payload retention").
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

-- A request's payloads change only by one purge, of a decided request,
-- that takes all three and keeps their digests; a purged request stays
-- purged. The purge's own WHERE already guarantees it; this makes a future
-- mistake fail loudly, as requests_terminal_is_final does.
CREATE TRIGGER requests_purged_once
BEFORE UPDATE OF arguments, agent_reasoning, context, purged_at, arguments_digest, reasoning_digest, context_digest ON requests
WHEN OLD.purged_at IS NOT NULL
    OR (NEW.purged_at IS NULL AND (
           NEW.arguments IS NOT OLD.arguments
        OR NEW.agent_reasoning IS NOT OLD.agent_reasoning
        OR NEW.context IS NOT OLD.context
        OR NEW.arguments_digest IS NOT OLD.arguments_digest
        OR NEW.reasoning_digest IS NOT OLD.reasoning_digest
        OR NEW.context_digest IS NOT OLD.context_digest))
    OR (NEW.purged_at IS NOT NULL AND (
           OLD.state = 'pending'
        OR NEW.arguments IS NOT NULL
        OR NEW.agent_reasoning <> ''
        OR NEW.context IS NOT NULL))
BEGIN
    SELECT RAISE(ABORT, 'a request''s payloads change only by one purge of a decided request');
END;
