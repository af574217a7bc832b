// Package sequencer appends Airlock's committed events to the verifiable
// audit log's tree (package auditlog), through the store's contract
// (store.AuditLog), and signs checkpoints of it. It is the work of one
// sequencer at a time, whichever replica holds the store's lease; the
// provider runs the loop around it (provider/auditlog.go), and the store's
// conformance suite races it across replicas.
//
// Appends are safe even when two sequencers believe they hold the lease:
// the store appends only at the tree's size the sequencer read, and only
// events without a leaf, so a stale sequencer's append is refused
// (store.ErrAppendRefused) and it reads again.
package sequencer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/store"
)

// DefaultBatch is how many events Step appends at most in one transaction.
const DefaultBatch = 1000

// Step appends to the tree, as holder, up to limit events without a leaf
// whose IDs are above after, in ID order, in one transaction. It returns
// the after of the next Step (store.Unsequenced.Next) and how many events
// it appended. When it appends nothing, next is still after or larger.
// An append the store refused wraps store.ErrAppendRefused; next is then
// after, unchanged.
func Step(ctx context.Context, s store.AuditLog, holder string, after int64, limit int) (next int64, appended int, err error) {
	b, err := StepBatch(ctx, s, holder, after, limit)
	if err != nil {
		return after, 0, err
	}
	return b.Next, len(b.At), nil
}

// Batch is what one StepBatch appended.
type Batch struct {
	// Next is the after of the next step (store.Unsequenced.Next).
	Next int64
	// At are the appended events' times, in the tree's order: with the
	// time of the append, how long each waited for its leaf.
	At []time.Time
}

// StepBatch is Step, returning the appended events' times beside the next
// after. It reads the tree's size and right edge from the store; a
// sequencer that steps again and again keeps them in an Edge instead.
func StepBatch(ctx context.Context, s store.AuditLog, holder string, after int64, limit int) (Batch, error) {
	return new(Edge).Step(ctx, s, holder, after, limit)
}

// Edge is what a sequencer keeps of the tree between its steps while it
// holds the lease: the tree's size as its last append left it, and the
// hashes of the tree's right edge at that size (auditlog.RightEdge), which
// are all the next append reads. A step with a known edge reads neither,
// so a round's fixed cost is the read of the new events and the one write
// transaction (docs/performance.md, "The audit log").
//
// Memory is trusted only while nothing else can have appended: the caller
// forgets the edge whenever its lease was lost, retaken or may have lapsed,
// and a step forgets it on any error. Should the size still be stale, the
// store's compare-and-set on the size refuses the append
// (store.ErrAppendRefused) and nothing is written: a stored hash never
// changes once its leaf is appended, so an edge of the right size is the
// store's.
type Edge struct {
	known bool
	size  int64
	// hashes are the tree's right edge at size, by stored index; nil
	// until a step with events to append reads them.
	hashes map[int64]auditlog.Hash
}

// Forget drops the edge: the next step reads the size, and the right
// edge once it has events to append, from the store.
func (e *Edge) Forget() { *e = Edge{} }

// readHashes reads the right edge at the edge's size from the store, in
// one statement.
func (e *Edge) readHashes(ctx context.Context, s store.AuditLog) error {
	hashes := map[int64]auditlog.Hash{}
	if e.size > 0 {
		indexes := auditlog.RightEdge(e.size)
		read, err := s.ReadAuditHashes(ctx, indexes)
		if err != nil {
			return err
		}
		for i, x := range indexes {
			hashes[x] = read[i]
		}
	}
	e.hashes = hashes
	return nil
}

// Step is StepBatch from the edge: it appends after the size the edge
// holds, reading the size from the store only when the edge holds none,
// and keeps the right edge of the tree it leaves.
func (e *Edge) Step(ctx context.Context, s store.AuditLog, holder string, after int64, limit int) (Batch, error) {
	b, err := e.step(ctx, s, holder, after, limit)
	if err != nil {
		e.Forget()
	}
	return b, err
}

func (e *Edge) step(ctx context.Context, s store.AuditLog, holder string, after int64, limit int) (Batch, error) {
	if !e.known {
		size, err := s.TreeSize(ctx)
		if err != nil {
			return Batch{}, err
		}
		*e = Edge{known: true, size: size}
	}
	size := e.size
	page, err := s.UnsequencedEvents(ctx, after, limit)
	if err != nil {
		return Batch{}, err
	}
	if len(page.Events) == 0 {
		return Batch{Next: page.Next}, nil
	}
	leaves := make([]store.NewAuditLeaf, len(page.Events))
	at := make([]time.Time, len(page.Events))
	digested := map[string]*auditlog.Payloads{}
	for i, u := range page.Events {
		leaf, err := leafOf(u, digested)
		if err != nil {
			return Batch{}, err
		}
		leaves[i] = store.NewAuditLeaf{EventID: u.Event.ID, Leaf: leaf}
		at[i] = u.Event.At
	}
	if e.hashes == nil {
		// Read once the step has events to append, not every step.
		if err := e.readHashes(ctx, s); err != nil {
			return Batch{}, err
		}
	}
	r := &batchReader{base: store.HashReader(ctx, s), start: auditlog.StoredHashIndex(size), cache: e.hashes}
	for i, l := range leaves {
		hs, err := auditlog.StoredHashes(size+int64(i), l.Leaf, r)
		if err != nil {
			return Batch{}, err
		}
		r.batch = append(r.batch, hs...)
	}
	err = s.AppendLeaves(ctx, store.AppendLeavesParams{Holder: holder, From: size, Leaves: leaves, Hashes: r.batch})
	if err != nil {
		return Batch{}, err
	}
	// The appended tree's right edge: the batch's new nodes, and the
	// older roots it left alone.
	grown := size + int64(len(leaves))
	edge := make(map[int64]auditlog.Hash, 8)
	for _, x := range auditlog.RightEdge(grown) {
		if h, ok := r.cached(x); ok {
			edge[x] = h
		}
	}
	e.size, e.hashes = grown, edge
	return Batch{Next: page.Next, At: at}, nil
}

// Leaf returns the leaf of an unsequenced event (auditlog.NewLeaf), with
// its request's payload digests when it has a request.
func Leaf(u store.UnsequencedEvent) ([]byte, error) { return leafOf(u, nil) }

// leafOf is Leaf, digesting a request's payloads once for all its events in
// digested (keyed by request ID; nil digests every time): a batch often
// holds a request's creation, decision and claim together.
func leafOf(u store.UnsequencedEvent, digested map[string]*auditlog.Payloads) ([]byte, error) {
	var payloads *auditlog.Payloads
	if id := u.Event.RequestID; id != "" {
		switch {
		case u.Request == nil:
			return nil, fmt.Errorf("event %d: its request %s is not in the store", u.Event.ID, id)
		case u.Purged != nil:
			// The request's payloads are purged: its leaves take the
			// digests the purge kept, as they were before it.
			payloads = u.Purged
		case digested[id] != nil:
			payloads = digested[id]
		default:
			p, err := auditlog.RequestPayloads(*u.Request)
			if err != nil {
				return nil, fmt.Errorf("event %d: %w", u.Event.ID, err)
			}
			payloads = &p
			if digested != nil {
				digested[id] = payloads
			}
		}
	}
	leaf, err := auditlog.NewLeaf(u.Event, payloads)
	if err != nil {
		return nil, fmt.Errorf("event %d: %w", u.Event.ID, err)
	}
	return leaf, nil
}

// batchReader reads the stored hashes of the tree as it will be once a
// batch is appended: the store's below start, and the batch's from start
// on. The store's are cached, since each leaf of a batch reads the same
// few hashes at the tree's right edge; the cache starts as the Edge's.
type batchReader struct {
	base  auditlog.HashReader
	start int64
	batch []auditlog.Hash
	cache map[int64]auditlog.Hash
}

// cached returns the hash at stored index x if the batch made it or the
// store's was read or given.
func (r *batchReader) cached(x int64) (auditlog.Hash, bool) {
	if x >= r.start {
		if x-r.start < int64(len(r.batch)) {
			return r.batch[x-r.start], true
		}
		return auditlog.Hash{}, false
	}
	h, ok := r.cache[x]
	return h, ok
}

// ReadHashes implements auditlog.HashReader.
func (r *batchReader) ReadHashes(indexes []int64) ([]auditlog.Hash, error) {
	out := make([]auditlog.Hash, len(indexes))
	var missing []int64
	for i, x := range indexes {
		switch h, ok := r.cache[x]; {
		case x >= r.start && x-r.start < int64(len(r.batch)):
			out[i] = r.batch[x-r.start]
		case x >= r.start:
			return nil, fmt.Errorf("stored hash %d: not computed yet", x)
		case ok:
			out[i] = h
		default:
			missing = append(missing, x)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	read, err := r.base.ReadHashes(missing)
	if err != nil {
		return nil, err
	}
	for i, x := range missing {
		r.cache[x] = read[i]
	}
	for i, x := range indexes {
		if x < r.start {
			out[i] = r.cache[x]
		}
	}
	return out, nil
}

// Checkpoint signs a checkpoint of the tree as it is now with key, and
// stores it, unless the tree is empty or the latest checkpoint already
// has its size. deliveries, when set, returns the webhook deliveries of
// the checkpoint (audit.checkpoint), which the store queues in the same
// transaction as the checkpoint. It returns the checkpoint and whether it
// made one.
func Checkpoint(ctx context.Context, s store.AuditLog, key store.AuditKey, deliveries func(size int64, note []byte) ([]airlock.Delivery, error)) (store.AuditCheckpoint, bool, error) {
	size, err := s.TreeSize(ctx)
	if err != nil {
		return store.AuditCheckpoint{}, false, err
	}
	latest, err := s.LatestCheckpoint(ctx)
	switch {
	case airlock.ErrorCode(err) == airlock.CodeNotFound:
	case err != nil:
		return store.AuditCheckpoint{}, false, err
	case latest.Size >= size:
		return latest, false, nil
	}
	if size == 0 {
		return store.AuditCheckpoint{}, false, nil
	}
	root, err := auditlog.TreeHash(size, store.HashReader(ctx, s))
	if err != nil {
		return store.AuditCheckpoint{}, false, err
	}
	note, err := auditlog.SignCheckpoint(key.SKey, auditlog.Checkpoint{Origin: key.Origin, Size: size, Root: root})
	if err != nil {
		return store.AuditCheckpoint{}, false, err
	}
	p := store.SaveCheckpointParams{Size: size, Note: note}
	if deliveries != nil {
		if p.Deliveries, err = deliveries(size, note); err != nil {
			return store.AuditCheckpoint{}, false, err
		}
	}
	cp, err := s.SaveCheckpoint(ctx, p)
	if err != nil {
		return store.AuditCheckpoint{}, false, err
	}
	return cp, true, nil
}

// Refused reports whether err is an append the store refused: the caller
// is not the sequencer it believed it was, and should take the lease again
// before it appends.
func Refused(err error) bool { return errors.Is(err, store.ErrAppendRefused) }
