-- The statements' clock (sqlcore.Now): @now is NULL, so that a
-- statement reads clock_timestamp() once, unless a test clock is set.

-- name: tick
-- tick starts every statement that judges or stamps time: one reading of
-- the clock per statement (a MATERIALIZED CTE is evaluated once), so a
-- decision is checked against the deadline and stamped with the very same
-- instant.
WITH tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now)

-- name: lockedTick
-- lockedTick starts a compare-and-set on the request @id: it locks the
-- row, and only then reads the clock. Under READ COMMITTED an UPDATE that
-- meets a row locked by another writer waits for it; a clock read before
-- that wait could be stale by the wait, and a decision checked against it
-- could commit after the deadline (say the other writer was a replica that
-- froze mid-transaction and was rolled back a minute later). Read after the
-- lock, the instant a change is judged and stamped by is at most the few
-- statements before its COMMIT old. The UPDATE then re-checks its WHERE
-- against the row as the last writer left it, so a loser finds the row no
-- longer in the state it starts from.
WITH locked AS MATERIALIZED (SELECT l.id FROM requests l WHERE l.id = @id FOR UPDATE),
tick AS MATERIALIZED (SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now FROM locked)
