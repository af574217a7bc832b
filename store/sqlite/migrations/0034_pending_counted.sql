-- 0034: an instance's pending count is counted when read, from the partial
-- index of its pending requests (0032), as on PostgreSQL, instead of kept
-- by triggers (0003).
--
-- The triggers wrote the instance's row in every transaction that created
-- or ended a pending request: one more page in the log of every create and
-- every decision, and one more statement run. Since 0032 the count reads
-- only the instance's pending requests' index entries, so the reads that
-- want it (an instance, a list of instances, the pending gauge) pay for it
-- instead of every write (docs/performance.md, "Where the time goes").
DROP TRIGGER IF EXISTS requests_pending_created;
DROP TRIGGER IF EXISTS requests_pending_ended;
ALTER TABLE instances DROP COLUMN pending;
