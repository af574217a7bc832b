-- 0015: no change to the schema. SQLite's history has one migration more
-- than PostgreSQL's (its pending count took three steps where PostgreSQL
-- took two), so their numbers stood one apart. From this version on, a
-- migration that both stores need has the same number in both
-- (internal/migrate's TestDialectsShareVersions), so that one number names
-- one change of the schema whichever store runs it.
SELECT 1;
