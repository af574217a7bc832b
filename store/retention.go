package store

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Retention purges what agents sent once it is old enough
// (docs/operations.md, "Payload retention"): a request's arguments,
// reasoning and context go (and the adapter's preview, which no leaf
// digests), while the request keeps its state, its tool,
// its decision and the digests of what went, so the verifiable audit
// log's leaves never change (auditlog.Payloads).
type Retention interface {
	// PurgePayloads purges, in one write, the payloads of up to p.Limit
	// requests whose decision is at least p.Age old by the store's
	// clock, oldest decision first. It never purges a pending request,
	// nor an approved one that was not claimed while its approval may
	// still be claimed. Each purged request gets PurgedAt, keeps the
	// digests of its arguments, reasoning and context (what
	// UnsequencedEvents hands the sequencer from then on), and appends
	// request.purged by airlock.ActorRetention. Writers purging at once
	// take turns, and a request is purged once. It returns the IDs it
	// purged; fewer than p.Limit means none was left.
	PurgePayloads(ctx context.Context, p PurgeParams) ([]string, error)
}

// PurgeParams are a purge of payloads (Retention.PurgePayloads).
type PurgeParams struct {
	// Age is how old a request's decision must be for its payloads to
	// go: --retain-payloads.
	Age time.Duration
	// Limit bounds the requests of one purge (DefaultPurgeBatch when 0).
	// A purge also ends early once it has read MaxPurgeBytes of payloads,
	// having purged at least one request.
	Limit int
}

// DefaultPurgeBatch is PurgeParams.Limit's default: each purge is one
// write, which on SQLite holds the one writer while the purged bytes are
// digested, so it is kept short.
const DefaultPurgeBatch = 200

// MaxPurgeBatch is the most requests one purge takes.
const MaxPurgeBatch = 10_000

// MaxPurgeBytes ends a purge early once the payloads it read reach it:
// payloads reach a mebibyte each, and one purge digests them all before its write.
const MaxPurgeBytes = 8 << 20

// Validate checks p and fills in its default limit.
func (p PurgeParams) Validate() (PurgeParams, error) {
	if p.Age <= 0 {
		return p, airlock.Invalid("age", "a purge needs a positive age, not %s", p.Age)
	}
	if p.Limit < 0 || p.Limit > MaxPurgeBatch {
		return p, airlock.Invalid("limit", "a purge takes 1 to %d requests, not %d", MaxPurgeBatch, p.Limit)
	}
	if p.Limit == 0 {
		p.Limit = DefaultPurgeBatch
	}
	return p, nil
}
