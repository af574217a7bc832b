// Package store is the storage contract: what the provider, the delivery
// worker, the inbox and the Slack app ask of a database, split by concern
// (Requests, Tokens, Sessions, Board, Notify, Grants, WebSessions,
// Reviewers, SigningKeys, PushKeys, TokenUses, AuditLog, Retention, Tasks, History, Passkeys). Store is all of them; every driver (store/sqlite,
// store/postgres) implements all of it, and the conformance suite
// (store/storetest) checks all of it on every driver. Consumers take the
// part they use.
//
// The parameters here are the contract's; the rules they apply are the
// domain's (package airlock), called from their Validate methods, so a
// rule lives once.
package store

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Store keeps instances, requests, audit events and tokens, MCP sessions,
// the work board, notifications, reviewers, grants, the inbox's
// sign-ins with the OIDC sign-ins in progress, the keys approval
// tokens are signed with, the key pushes are signed with, the tokens'
// single use, the verifiable audit log's tree, the purge of old
// payloads, MCP tasks, the history of decisions read back, and
// reviewers' passkeys with the ceremonies in progress. Every state change is one
// conditional write decided by the store, never a read followed by a
// write in Go; every change appends its audit event in the same
// transaction.
//
// It is the whole contract: every driver implements all of it, and the
// conformance suite (storetest) checks all of it on every driver. What
// only some drivers have is not found by type assertion, which a wrapper
// around a store would silently hide, but named by Extras.
//
// Errors are *airlock.Error: not_found for missing rows, for lost
// transitions the code and State of what holds, and unavailable (with the
// driver's error as Err) when the store cannot serve now: a full disk, an
// I/O error, a database that cannot be reached.
type Store interface {
	Requests
	Tokens
	Sessions
	Board
	Notify
	Reviewers
	Grants
	WebSessions
	OIDCLogins
	SigningKeys
	PushKeys
	TokenUses
	AuditLog
	Retention
	Tasks
	History
	Passkeys

	// Extras returns the parts of the store that only some drivers have.
	// A wrapper around a store passes them on by embedding it, or says
	// otherwise by overriding Extras.
	Extras() Extras

	// Ping checks that the store can serve: that it answers a read and,
	// once a write has failed because the store could not write (a full
	// disk, a database that cannot be reached), that a write commits
	// again. It returns CodeUnavailable while the store cannot serve, and
	// turns nil by itself once it can: no reopening is needed.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// Extras are the parts of a store that only some drivers have, each nil
// when the driver lacks it. The provider takes them from Store.Extras when
// it is built, and logs which it got.
type Extras struct {
	// TokenStamp tells, without a query, whether any token changed
	// (SQLite): the provider then keeps live tokens between calls.
	TokenStamp TokenStamper
	// Events tells the one process of a store without a change feed
	// (SQLite) when its writes appended events, whichever call made them:
	// the provider then wakes its event streams and the audit log's
	// sequencer. A store with a feed announces them there.
	Events EventWatcher
	// TokenCheck checks a token the provider took from memory within a
	// call's first round trip (PostgreSQL): the provider then remembers
	// the tokens it has looked up.
	TokenCheck TokenChecker
	// Feed announces every committed change, made by any process sharing
	// the store (PostgreSQL), so that waiters on every replica wake.
	Feed ChangeFeed
	// SweepTarget is how long one expiry sweep (ExpireDue) should take;
	// zero leaves the provider's default, sized for SQLite, whose sweep
	// holds the one writer every other write waits for. PostgreSQL's
	// sweep holds only its own due rows' locks, which SKIP LOCKED lets
	// other replicas' sweeps pass, and pays a fixed cost per transaction
	// (round trips, the commit) that a target of SQLite's size would leave
	// it sweeping the fewest rows at a time.
	SweepTarget time.Duration
	// SequencerGap is the least time between two rounds of the audit
	// log's sequencer that changes woke; zero leaves the provider's
	// default, sized for SQLite, where a round's append holds the one
	// writer and its reads take a core from the requests: short rounds
	// keep what waits behind them short. On PostgreSQL an append holds no
	// other write, and each round costs the database its round trips
	// whatever it appends.
	SequencerGap time.Duration
}

// EventWatcher is the part of a store without a change feed (SQLite) that
// tells its process when committed writes appended events.
type EventWatcher interface {
	// WatchEvents calls appended after each commit that appended events,
	// before the calls whose writes it committed return. appended must
	// not block: it runs on the store's write path.
	WatchEvents(appended func())
}

// TokenStamper tells without a query whether any token was revoked or
// replaced since an earlier stamp: in this process or in another one on
// the same database. The stamp changes once such a change has committed,
// before the call that made it returns, so a caller that reads the same
// stamp before and after looking a token up may keep what it found until
// the stamp changes; a revocation still takes effect at the next call.
// Stores that cannot answer cheaply have none (Extras.TokenStamp), and
// their tokens are looked up on every call.
type TokenStamper interface {
	TokenStamp() (uint64, error)
}

// TokenChecker is the part of a store (Extras.TokenCheck) that checks a
// token the provider took from memory within a call's first round trip.
type TokenChecker interface {
	// Checking returns the store as a call with check pending sees it: the
	// first round trip of its calls makes check, before any of their
	// effects, and fails the call with airlock.TokenRefused when the token
	// is not live; once the check is made, its calls are the store's own.
	// It is the same store: closing it closes the store. (A wrapper around
	// a store that must see every call wraps these views too, in the
	// TokenChecker its Extras returns.)
	Checking(check *airlock.TokenCheck) Store
	// CheckToken makes check now, in a round trip of its own, for a call
	// that made no other; nil when check is not pending, TokenRefused
	// when the token is not live.
	CheckToken(ctx context.Context, check *airlock.TokenCheck) error
}

// ChangeFeed announces the changes of a store shared by several provider
// replicas (PostgreSQL). Every committed change to a request is announced
// to every replica, so a waiter on one replica hears a decision made on
// another.
type ChangeFeed interface {
	// Listen calls changed with the IDs of requests changed by any replica,
	// until ctx ends. It calls changed(nil) when notifications may have been
	// missed (a dropped connection): every waiter must then re-read.
	Listen(ctx context.Context, changed func(ids []string)) error
}

// Tokens keeps API tokens.
type Tokens interface {
	// CreateToken stores a token.
	CreateToken(ctx context.Context, t airlock.Token) error
	// PutToken stores t under its ID, replacing the hash and clearing any
	// revocation when it exists (the bootstrap admin token).
	PutToken(ctx context.Context, t airlock.Token) error
	// TokenByHash finds a token, revoked or not, by its secret's hash; not_found.
	TokenByHash(ctx context.Context, hash []byte) (airlock.Token, error)
	// GetToken reads a token by ID; not_found.
	GetToken(ctx context.Context, id string) (airlock.Token, error)
	// ListTokens lists every token, newest first.
	ListTokens(ctx context.Context) ([]airlock.Token, error)
	// RevokeToken marks a token revoked; revoking twice keeps the first time.
	RevokeToken(ctx context.Context, id, actor string) (airlock.Token, error)
}
