-- 0005: requests listed by state, newest first, use an index again.
--
-- 0004 dropped requests_due (state, deadline_at), and with it the only
-- index that began with state: ListRequests filtered by a state other than
-- pending (the inbox's decided and expired views, the API's ?state=) then
-- walked the whole table newest-first, which for a rare state over a long
-- history reads every row. (state, seq) serves the filter and the order
-- together, as PostgreSQL's requests_state does. Each state change moves
-- one entry; measured, that is within the noise of a write's cost, which
-- is its commit (docs/performance.md).

CREATE INDEX requests_state ON requests (state, seq);
