-- 0003: sweeps take due requests by the second of their deadline, then in
-- creation order, as the SQLite driver's 0005 does.
--
-- requests_due ordered pending requests by their exact deadline. Requests
-- due within moments of each other were created at different times, so in
-- that order they lie all over the table: a sweep rewrote about one heap
-- page per row, and after each checkpoint logged a full image of each.
-- Within one second of deadlines, this index keeps them in creation order
-- (seq), the order they were inserted in. The second is taken in UTC
-- (date_trunc of a timestamptz depends on the session's time zone, and an
-- index needs an immutable expression); deadline_at is last so that a
-- sweep tells which entries of the current second are due from the index.

DROP INDEX requests_due;

CREATE INDEX requests_pending_by_second
    ON requests ((date_trunc('second', deadline_at AT TIME ZONE 'UTC')), seq, deadline_at)
    WHERE state = 'pending';
