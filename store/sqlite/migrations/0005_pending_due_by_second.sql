-- 0005: sweeps take due requests by the second of their deadline, then in
-- creation order.
--
-- requests_pending_due ordered pending requests by their exact deadline.
-- Requests due within moments of each other were created at different
-- times, so in that order they lie all over the table and its indexes: a
-- sweep of 200 due requests rewrote about 200 table pages and as many
-- index pages, and writing those pages to the WAL was most of its time
-- (docs/performance.md, "Expiry of a large backlog"). Within one second of
-- deadlines, this index keeps them in creation order (seq), the table's own
-- order, so that a sweep rewrites neighbouring rows. deadline_at is last so
-- that a sweep tells which entries of the current second are due without
-- reading the row.

DROP INDEX requests_pending_due;

CREATE INDEX requests_pending_by_second ON requests (deadline_at / 1000000, seq, deadline_at)
    WHERE state = 'pending';
