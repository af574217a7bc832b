-- 0033: nothing on SQLite. PostgreSQL's 0033 adds a partial index of
-- pending requests by seq for the reviewer's first page; SQLite's planner
-- already answers WHERE state = 'pending' ORDER BY seq DESC from
-- requests_state (state, seq), reading only the page's entries, so it
-- needs none. The number is kept so that both stores' versions agree.
SELECT 1;
