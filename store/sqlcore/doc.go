// Package sqlcore is the one implementation of what both SQL store
// drivers (store/sqlite, store/postgres) do alike: which statements a
// store.Store method runs, in which order and in which transaction; how a
// compare-and-set that changed no row is told apart ("someone else won":
// read the row, name its state); which audit events a change appends; the
// bookkeeping of votes and delivery attempts; the loops that read lists;
// and how columns become domain values. Core holds it, and a driver's
// Store embeds a Core.
//
// What differs between the engines is a driver's Dialect, and its
// Statements:
//
//   - the statements: SQL text per operation, in one struct per concern
//     (ReviewerSQL, BoardSQL, …), each naming its arguments @name, written
//     in Go or, where that reads better, in .sql files of named blocks
//     that LoadStatements reads (PostgreSQL's);
//   - the write engine (Dialect.Write, Tx): SQLite's one writer, whose
//     concurrent writes share a transaction and its fsync (group commit),
//     or PostgreSQL's transactions, pipelined so that a write is as few
//     round trips as it can be and retried on transient failures; and the
//     reads (Dialect.Query), on SQLite's read pool or behind PostgreSQL's
//     pending token check;
//   - values (Values, and the arguments a dialect binds): times as int64
//     microseconds or timestamptz, durations as microseconds or
//     intervals, lists as JSON text or text[];
//   - error translation (Dialect.Translate), one function per driver.
//
// The clock is the statements': every statement that judges or stamps
// time reads @now (Now), which the dialect supplies, and a statement that
// changes a row returns the instant it used, so that the change and its
// audit event carry the same time: SQLite's @now is the injected clock,
// read once its one writer holds the write lock; PostgreSQL's is the
// database's clock_timestamp(), read once per statement after its row
// locks are held.
//
// A driver keeps in its own package only what is its engine's: the
// statements, the write engine, the read pool, error translation, and
// the fast paths only one engine has (below). Where the two engines
// truly differ in what they do, not only in SQL, the difference stays in
// the driver, with a comment that says why.
//
// # Fast paths
//
// What only one engine does to save time, and the conformance cases
// (store/storetest; Run's groups, then RunMCP's) that force it and the
// path without it, on every driver. An optional statement a dialect
// leaves empty is the path without it.
//
//	PostgreSQL
//	  RequestSQL.CreatePending: a pending create and its event in one statement,
//	    sent with COMMIT: one round trip
//	    with:    T01_Lifecycle, Create/seq_orders_creation (any pending create)
//	    without: Create/policy_approval_at_creation, Grants/a_create_covered_by_a_grant_…
//	  RequestSQL.DecideOnce: a decision that needs nothing but itself, and its
//	    event, in one statement sent with COMMIT
//	    with:    T01_Lifecycle/decisions_record_who,_when_and_what
//	    without: T01_Lifecycle/decisions_the_check_refuses_change_nothing, Quorum,
//	             Commands, Instructions (RunMCP)
//	  NotifySQL.InsertDeliveries: a fan-out's deliveries in one statement
//	    with:    Notify/fan-out_queues_each_event_once,_…, Notify/test_deliveries_…
//	  the token check in the pipeline of a call's first statement
//	    with:    Extras/TokenCheck (Extras.TokenCheck)
//	  a write's events appended in one statement in the pipeline of COMMIT
//	    with:    Events, and every write
//	SQLite
//	  RequestSQL.ExpireDueEvents, ExpireByIDEvents: a sweep's events in one
//	    INSERT … SELECT before its UPDATE, instructions after (Tx.Instructions)
//	    with:    Expiry/expires_what_is_due,_earliest_first,
//	             Expiry/ExpireRequests_expires_the_due_among_them,_once
//	  Tx.StateEvents in one INSERT from JSON: a close's expiries and cancellations
//	    with:    Instances/delete_cancels_pending_requests_only,
//	             Instances/delete_expires_overdue_requests_rather_than_cancel_them
//	  no instruction query for a request linked to no session (Tx.RequestEvent)
//	    with:    T01_Lifecycle; a request with one: Instructions/approve,_deny_and_… (RunMCP)
//	  the token stamp: one stat(2) tells whether any token changed
//	    with:    Extras/TokenStamp (Extras.TokenStamp)
//	  group commit: concurrent writes share one transaction and its fsync
//	    with:    Races/approve,_deny_and_cancel_race, and every write
//	  no AuditSQL.LastEvent: the sequencer's page of unsequenced events holds
//	    the largest event too, and settles up to it in its own statement
//	    with:    AuditLog/a_page_below_the_largest_event,_which_has_a_leaf,_…,
//	             AuditLog/unsequenced_events_are_those_without_a_leaf,_…
//	    without: the same cases on PostgreSQL
//
// A created request is built from what was written (insertedRequest)
// rather than read back from RETURNING, on both engines now.
//
// A change here is a change to both stores at once, as the conformance
// suite (storetest) expects.
package sqlcore
