-- 0025: reserved for the telemetry branch's migration. This placeholder
-- keeps the numbering contiguous on the edit branch alone; it is dropped
-- when the telemetry migration takes its number.
SELECT 1;
