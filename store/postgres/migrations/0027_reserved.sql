-- 0027: reserved for a migration of another branch (telemetry 0025, edits
-- 0026, MCP tasks 0027). This placeholder keeps the numbering contiguous
-- on the fatigue branch alone; it is dropped when that migration lands.
SELECT 1;
