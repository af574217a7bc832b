-- 0004: the expiry index holds pending requests only.
--
-- requests_due indexed every request by (state, deadline_at), so expiring a
-- request moved its entry from 'pending' to 'expired': a delete and an
-- insert in the index for every row a sweep expires. Only pending requests
-- are ever looked up by deadline (ExpireDue, NextDeadline, the pending
-- count), so a partial index serves them all, and a request leaving pending
-- only deletes its entry. seq orders requests due at the same instant, as
-- the sweep does.

DROP INDEX requests_due;

CREATE INDEX requests_pending_due ON requests (deadline_at, seq) WHERE state = 'pending';
