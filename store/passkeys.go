package store

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Passkeys keeps reviewers' WebAuthn credentials and the ceremonies in
// progress (docs/phone.md, "Passkeys").
type Passkeys interface {
	// AddPasskey stores p, dated the store's now, and appends
	// passkey.registered by p.Principal in the same transaction.
	// invalid_request (field credential_id) when a passkey of that ID is
	// stored already, of any principal, and (field passkeys) when the
	// principal has MaxPasskeysPerPrincipal already.
	AddPasskey(ctx context.Context, p airlock.Passkey) (airlock.Passkey, error)
	// Passkey reads a passkey by credential ID; not_found.
	Passkey(ctx context.Context, id []byte) (airlock.Passkey, error)
	// ListPasskeys lists a principal's passkeys, oldest first.
	ListPasskeys(ctx context.Context, principal string) ([]airlock.Passkey, error)
	// UsePasskey records a use of passkey id whose assertion carried
	// signCount: the stored count becomes signCount and LastUsedAt the
	// store's now, if signCount is above the stored count or both are 0
	// (an authenticator that counts nothing). Otherwise it writes nothing
	// and answers unauthorized: a counter that did not advance is a
	// cloned authenticator's or a replayed assertion's. not_found when
	// there is no such passkey (deleted meanwhile).
	UsePasskey(ctx context.Context, id []byte, signCount uint32) (airlock.Passkey, error)
	// DeletePasskey deletes principal's passkey id and appends
	// passkey.deleted by actor; not_found when principal has none of
	// that ID.
	DeletePasskey(ctx context.Context, principal string, id []byte, actor string) error

	// PutPasskeyCeremony stores c, lasting ttl by the store's clock,
	// after deleting up to 100 that are over. unavailable when maxLive
	// are in progress already.
	PutPasskeyCeremony(ctx context.Context, c airlock.PasskeyCeremony, ttl time.Duration, maxLive int) error
	// TakePasskeyCeremony deletes and returns the live ceremony of a
	// challenge hash, so a challenge serves one answer at most;
	// not_found when there is none or it is over.
	TakePasskeyCeremony(ctx context.Context, challengeHash []byte) (airlock.PasskeyCeremony, error)

	// PasskeyDecisions lists the decisions and votes of a request that
	// were signed with a passkey (DecideParams.Passkey), by time.
	PasskeyDecisions(ctx context.Context, requestID string) ([]airlock.PasskeyDecision, error)
	// PasskeyDecisionsOf lists the passkey-signed decisions and votes of
	// up to MaxPasskeyDecisionsOf requests (the requests of a page of the
	// audit log), by request ID and time; invalid_request for more.
	PasskeyDecisionsOf(ctx context.Context, requestIDs []string) ([]airlock.PasskeyDecision, error)
}

// MaxPasskeyDecisionsOf bounds the requests of one PasskeyDecisionsOf: a
// page of the audit log's entries (at most 10,000) names no more.
const MaxPasskeyDecisionsOf = 10_000
