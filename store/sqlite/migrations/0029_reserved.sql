-- 0029: reserved for another branch's migration (MCP). This placeholder
-- keeps the numbering contiguous on the batch branch alone; it is dropped
-- when that branch's migration takes its number.
SELECT 1;
