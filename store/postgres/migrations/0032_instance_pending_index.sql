-- 0032: the instance index holds pending requests only (docs/performance.md,
-- "What a lifecycle asks of PostgreSQL").
--
-- A decision changes a request's state, which indexes hold, so it is never a
-- heap-only update: the decided row version gets an entry in every index
-- whose predicate it meets. Every read by instance asks for its pending
-- requests (the pending count, deleting an instance, a session's pending
-- calls), so a decided request need not be in this index at all.
DROP INDEX IF EXISTS requests_instance;
CREATE INDEX IF NOT EXISTS requests_instance_pending ON requests (instance_id) WHERE state = 'pending';
