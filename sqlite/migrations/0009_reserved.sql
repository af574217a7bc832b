-- 0009: reserved for the grants branch, which replaces this file with its
-- own 0009 when it merges. Migrations must be numbered without gaps.
SELECT 1;
