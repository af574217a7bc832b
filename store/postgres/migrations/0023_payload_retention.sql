-- 0023: payload retention (docs/operations.md, "Payload retention").
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

-- A request's payloads change only by one purge, of a decided request,
-- that takes all three and keeps their digests; a purged request stays
-- purged. The purge's own WHERE already guarantees it; this makes a future
-- mistake fail loudly, as requests_terminal_is_final does.
CREATE OR REPLACE FUNCTION requests_purged_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.purged_at IS NOT NULL
        OR (NEW.purged_at IS NULL AND (
               NEW.arguments IS DISTINCT FROM OLD.arguments
            OR NEW.agent_reasoning IS DISTINCT FROM OLD.agent_reasoning
            OR NEW.context IS DISTINCT FROM OLD.context
            OR NEW.arguments_digest IS DISTINCT FROM OLD.arguments_digest
            OR NEW.reasoning_digest IS DISTINCT FROM OLD.reasoning_digest
            OR NEW.context_digest IS DISTINCT FROM OLD.context_digest))
        OR (NEW.purged_at IS NOT NULL AND (
               OLD.state = 'pending'
            OR NEW.arguments IS NOT NULL
            OR NEW.agent_reasoning <> ''
            OR NEW.context IS NOT NULL)) THEN
        RAISE EXCEPTION 'a request''s payloads change only by one purge of a decided request' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS requests_purged_once ON requests;
CREATE TRIGGER requests_purged_once
BEFORE UPDATE OF arguments, agent_reasoning, context, purged_at, arguments_digest, reasoning_digest, context_digest ON requests
FOR EACH ROW EXECUTE FUNCTION requests_purged_once();
