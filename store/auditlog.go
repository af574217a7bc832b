package store

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
)

// AuditLog keeps the verifiable audit log (package auditlog,
// docs/architecture.md "The audit log"): every committed event as a leaf
// of an RFC 6962 tree at a gapless index, the tree's stored hashes, the
// signed checkpoints and their note key, and the lease of the one
// sequencer, across every replica sharing the store, that appends. The
// sequencer works after commit, apart from the request path: an event is
// committed without its leaf, and gets it a moment later. Times are the
// store's clock.
type AuditLog interface {
	// EnsureAuditKey stores candidate as the checkpoints' note key unless
	// a key is stored already, and returns the stored key either way: of
	// replicas starting at once, one candidate wins and every replica
	// signs with it.
	EnsureAuditKey(ctx context.Context, candidate AuditKey) (AuditKey, error)
	// AuditKey returns the checkpoints' note key; not_found before
	// EnsureAuditKey stored one.
	AuditKey(ctx context.Context) (AuditKey, error)

	// AcquireSequencer takes the sequencer's lease for holder until ttl
	// from the store's now, with one conditional write, and reports
	// whether holder has it: it renews holder's own lease and takes one
	// that has expired, and leaves another holder's live lease alone
	// (false).
	AcquireSequencer(ctx context.Context, holder string, ttl time.Duration) (bool, error)
	// UnsequencedEvents returns up to limit committed events with IDs
	// above after that have no leaf, in ID order, each with what
	// auditlog.NewLeaf needs. Which events are unsequenced is asked of
	// the leaves, not of the largest ID sequenced: on PostgreSQL an event
	// may commit after one with a larger ID, and it is then simply
	// sequenced later. Next says how far the next call may start.
	UnsequencedEvents(ctx context.Context, after int64, limit int) (Unsequenced, error)
	// AppendLeaves appends p.Leaves at indexes p.From, p.From+1, … with
	// their stored hashes, in one transaction, only while p.Holder holds
	// the sequencer's lease and only if the tree has exactly p.From
	// leaves: otherwise it appends nothing and returns an error wrapping
	// ErrAppendRefused. An event that has a leaf already is refused the
	// same way (each event is in the tree once).
	AppendLeaves(ctx context.Context, p AppendLeavesParams) error
	// TreeSize returns the number of leaves in the tree.
	TreeSize(ctx context.Context) (int64, error)
	// ReadAuditHashes returns the stored hashes at indexes
	// (auditlog.StoredHashIndex numbering), in their order; an index the
	// tree does not hold yet is an error. HashReader adapts it to
	// auditlog.HashReader.
	ReadAuditHashes(ctx context.Context, indexes []int64) ([]auditlog.Hash, error)
	// AuditLeaves returns up to limit leaves from index start on, in
	// index order: the entries of an export or of a verifier.
	AuditLeaves(ctx context.Context, start int64, limit int) ([]AuditLeaf, error)
	// RequestLeaves returns up to limit leaves of the events of request
	// id, in index order: what its proof proves. Events not yet
	// sequenced have none.
	RequestLeaves(ctx context.Context, id string, limit int) ([]AuditLeaf, error)
	// SaveCheckpoint stores a signed checkpoint of the tree of p.Size
	// leaves, dated by the store's now, unless one of that size is stored
	// (a note key signs one body always alike). No event is appended: the
	// checkpoint is about the log, and an event of it would be a leaf
	// that calls for another checkpoint, for ever. When it stores the
	// checkpoint, it queues p.Deliveries (the webhook event
	// audit.checkpoint) in the same transaction, each only while its
	// endpoint exists and is enabled; when the checkpoint was stored
	// already, it queues none (who stored it queued them).
	SaveCheckpoint(ctx context.Context, p SaveCheckpointParams) (AuditCheckpoint, error)
	// LatestCheckpoint returns the checkpoint of the largest tree;
	// not_found before the first.
	LatestCheckpoint(ctx context.Context) (AuditCheckpoint, error)
}

// ErrAppendRefused is wrapped by AppendLeaves when it appends nothing
// because the caller is not the sequencer it believes it is: its lease
// expired and another took it, or the tree is not the size it read.
var ErrAppendRefused = errors.New("audit log: append refused")

// AuditKey is the Ed25519 note key checkpoints are signed with
// (auditlog.GenerateKey).
type AuditKey struct {
	// Origin is the log's name, and the key's.
	Origin string
	// SKey is the signer key. It is never served, and String leaves it
	// out, so a key printed by mistake leaks nothing.
	SKey string
	// VKey is the verifier key, published for auditors.
	VKey      string
	CreatedAt time.Time
}

// Validate checks what a store needs of k before it writes it.
func (k AuditKey) Validate() error {
	switch {
	case k.Origin == "" || len(k.Origin) > 256:
		return airlock.Invalid("audit key", "an audit key needs an origin of at most 256 bytes")
	case k.SKey == "" || k.VKey == "":
		return airlock.Invalid("audit key", "an audit key needs its signer and verifier keys")
	}
	return nil
}

// String names the key by its verifier key only.
func (k AuditKey) String() string { return "audit key " + k.VKey }

// GoString is String for %#v: the signer key stays out of every format.
func (k AuditKey) GoString() string { return k.String() }

// Unsequenced is a page of UnsequencedEvents.
type Unsequenced struct {
	Events []UnsequencedEvent
	// Next is the after of the next call once Events are in the tree:
	// every event with an ID up to Next then has a leaf, or never will
	// exist (its transaction rolled back). It is never below the after
	// asked with.
	Next int64
}

// UnsequencedEvent is an event without a leaf, with the payloads of its
// request when it has one.
type UnsequencedEvent struct {
	Event airlock.Event
	// Request is the event's request with only ID, Tool, Arguments,
	// AgentReasoning and Context set (auditlog.RequestPayloads); nil
	// when the event has no request.
	Request *airlock.Request
	// Purged holds the digests a purge kept (Retention.PurgePayloads)
	// when the request's payloads are purged: Request then has its tool
	// but no arguments, reasoning or context, and the leaf takes these.
	// Nil while the request has its payloads.
	Purged *auditlog.Payloads
}

// AppendLeavesParams are an append to the audit tree.
type AppendLeavesParams struct {
	// Holder is the sequencer's lease holder (AcquireSequencer).
	Holder string
	// From is the tree's size the leaves were built for: the index of
	// the first.
	From   int64
	Leaves []NewAuditLeaf
	// Hashes are the stored hashes the leaves add, in order from
	// auditlog.StoredHashIndex(From): for each leaf, what
	// auditlog.StoredHashes returned.
	Hashes []auditlog.Hash
}

// Validate checks that p's hashes are exactly those its leaves add.
func (p AppendLeavesParams) Validate() error {
	switch {
	case p.Holder == "":
		return airlock.Invalid("holder", "an append needs the sequencer's lease holder")
	case p.From < 0:
		return airlock.Invalid("from", "a tree has no size %d", p.From)
	case len(p.Leaves) == 0:
		return airlock.Invalid("leaves", "an append needs a leaf")
	}
	want := auditlog.StoredHashIndex(p.From+int64(len(p.Leaves))) - auditlog.StoredHashIndex(p.From)
	if int64(len(p.Hashes)) != want {
		return airlock.Invalid("hashes", "%d leaves from %d add %d stored hashes, not %d", len(p.Leaves), p.From, want, len(p.Hashes))
	}
	for _, l := range p.Leaves {
		if l.EventID <= 0 || len(l.Leaf) == 0 {
			return airlock.Invalid("leaves", "a leaf needs its event and its bytes")
		}
	}
	return nil
}

// NewAuditLeaf is a leaf to append: an event's leaf (auditlog.NewLeaf).
type NewAuditLeaf struct {
	EventID int64
	Leaf    []byte
}

// AuditLeaf is a leaf of the tree.
type AuditLeaf struct {
	Index   int64
	EventID int64
	// Leaf is the leaf's canonical bytes, which the tree hashes.
	Leaf []byte
}

// SaveCheckpointParams are a checkpoint to store.
type SaveCheckpointParams struct {
	Size int64
	// Note is the signed note (auditlog.SignCheckpoint).
	Note []byte
	// Deliveries are the checkpoint's webhook deliveries (ID, EndpointID,
	// MessageID, Type, Payload), one per subscribed endpoint; they have
	// no event.
	Deliveries []airlock.Delivery
}

// Validate checks what a store needs of p before it writes it.
func (p SaveCheckpointParams) Validate() error {
	if p.Size < 0 || len(p.Note) == 0 {
		return airlock.Invalid("checkpoint", "a checkpoint needs a size and its note")
	}
	for _, d := range p.Deliveries {
		if d.ID == "" || d.EndpointID == "" || d.EventID != 0 || len(d.Payload) == 0 {
			return airlock.Invalid("deliveries", "a checkpoint's delivery needs an ID, an endpoint and a payload, and has no event")
		}
	}
	return nil
}

// AuditCheckpoint is a stored signed checkpoint.
type AuditCheckpoint struct {
	Size int64
	// Note is the signed note (auditlog.SignCheckpoint), as served.
	Note      []byte
	CreatedAt time.Time
}

// HashReader returns a reader of the stored hashes of a, with ctx, as
// an auditlog.HashReader (which has no context): what auditlog.TreeHash,
// StoredHashes and the proofs read the tree through.
func HashReader(ctx context.Context, a AuditLog) auditlog.HashReader {
	return hashReader{ctx: ctx, a: a}
}

type hashReader struct {
	ctx context.Context
	a   AuditLog
}

func (r hashReader) ReadHashes(indexes []int64) ([]auditlog.Hash, error) {
	return r.a.ReadAuditHashes(r.ctx, indexes)
}
