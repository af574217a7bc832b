-- 0026: reserved for the edit branch's migration. This placeholder
-- keeps the numbering contiguous on the tasks branch alone; it is dropped
-- when the edit migration takes its number.
SELECT 1;
