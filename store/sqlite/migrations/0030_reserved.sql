-- 0030: reserved for a branch at work beside the passkeys branch. This
-- placeholder keeps the numbering contiguous on the passkeys branch alone;
-- it is dropped when that branch's migration takes its number.
SELECT 1;
