-- 0032: the instance index holds pending requests only (docs/performance.md,
-- "What a lifecycle asks of PostgreSQL"). Every read by instance asks for
-- its pending requests (the pending count, deleting an instance), so a
-- decision takes the request out of the index instead of moving it.
DROP INDEX IF EXISTS requests_instance;
CREATE INDEX IF NOT EXISTS requests_instance_pending ON requests (instance_id) WHERE state = 'pending';
