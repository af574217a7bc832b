-- 0034: nothing on PostgreSQL. SQLite's 0034 stops keeping an instance's
-- pending count by triggers and counts it from requests_instance_pending
-- when read, as PostgreSQL always has (instances.sql, instanceCols). The
-- number is kept so that both stores' versions agree.
SELECT 1;
