package sqlcore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/store"
)

// AuditSQL are the statements of store.AuditLog.
type AuditSQL struct {
	// InsertKey stores the note key (@origin, @skey, @vkey), created at
	// @now, unless one is stored; it yields nothing.
	InsertKey string
	// Key selects the note key: origin, skey, vkey, created_at.
	Key string
	// Acquire gives the lease audit_sequencer to @holder until @now +
	// @ttl if @holder holds it or it expired at or before @now, and
	// yields a row (the holder) when it did.
	Acquire string
	// LastEvent selects the largest event ID, or 0. Optional: a store
	// whose one statement sees every event below the largest it sees
	// (SQLite: one writer at a time, event IDs committed in order) leaves
	// it empty, and its Unsequenced settles the page itself (below).
	LastEvent string `sql:"optional"`
	// Unsequenced selects up to @limit events with id > @after that have
	// no leaf, in id order: the event's columns as Requests.Events has
	// them, then whether it has a request row, and the request's tool,
	// arguments, agent_reasoning and context, whether its payloads were
	// purged, and the digests the purge kept (arguments_digest,
	// reasoning_digest, context_digest). Without LastEvent, it also
	// selects the largest event if it is above @after though it has a
	// leaf, and a last column says whether the row's event has one: the
	// page's last row is then how far it settled, with no statement of
	// its own.
	Unsequenced string
	// Grow is the compare-and-set of an append: the tree's size becomes
	// @to if it is @from and @holder holds the lease audit_sequencer at
	// @now; it changes no row otherwise.
	Grow string
	// Size selects the tree's size.
	Size string
	// Holder selects the holder of the lease audit_sequencer, and
	// whether it is live at @now.
	Holder string
	// InsertLeaf stores leaf @idx of event @event_id (@leaf, @leaf_hash)
	// unless the event has a leaf; it changes no row then. Its VALUES row
	// names its parameters in that order and nothing else: AppendLeaves
	// repeats the row to store many leaves in one statement (manyRows).
	InsertLeaf string `sql:"optional"`
	// InsertLeaves, optional, is InsertLeaf for many at once, each
	// argument a list (@idxs, @event_ids, @leaves, @leaf_hashes), and
	// changes as many rows as it stores.
	InsertLeaves string `sql:"optional"`
	// InsertHash stores interior node hash @hash at @idx. A leaf's own
	// hash (level 0) is not stored here: it is the leaf's leaf_hash. Its
	// VALUES row is (@idx, @hash), repeated as InsertLeaf's is.
	InsertHash string `sql:"optional"`
	// InsertHashes, optional, is InsertHash for many at once (@idxs,
	// @hashes, each a list).
	InsertHashes string `sql:"optional"`
	// Hashes selects, in one statement, the interior node hashes whose
	// stored index is in @indexes and the leaf hashes of the leaves whose
	// idx is in @leaves (two lists): each row whether it is a leaf's
	// (true) or a node's, its idx (the leaf's, or the stored index), and
	// the hash.
	Hashes string
	// Leaves selects idx, event_id and leaf of up to @limit leaves from
	// idx @start on, in idx order.
	Leaves string
	// RequestLeaves selects idx, event_id and leaf of up to @limit leaves
	// of the events of request @request, in idx order.
	RequestLeaves string
	// InsertCheckpoint stores checkpoint @size (@note), created at @now,
	// unless one of that size is stored; it yields nothing, and changes
	// one row when it stores it.
	InsertCheckpoint string
	// Checkpoint selects checkpoint @size: size, note, created_at.
	Checkpoint string
	// LatestCheckpoint selects the checkpoint of the largest size.
	LatestCheckpoint string
}

// sequencerLease is the name of the sequencer's lease in the leases table.
const sequencerLease = "audit_sequencer"

// maxAuditPage bounds UnsequencedEvents and AuditLeaves.
const maxAuditPage = 10_000

// EnsureAuditKey stores candidate unless a key is stored, and returns the
// stored key. Replicas inserting at once conflict on the one row's key:
// one row goes in, and the others read it.
func (c *Core) EnsureAuditKey(ctx context.Context, candidate store.AuditKey) (store.AuditKey, error) {
	if err := candidate.Validate(); err != nil {
		return store.AuditKey{}, err
	}
	q := &c.q.Audit
	var out store.AuditKey
	err := c.d.Write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(q.InsertKey, Args{{"origin", candidate.Origin}, {"skey", candidate.SKey}, {"vkey", candidate.VKey}}); err != nil {
			return err
		}
		var err error
		out, err = c.scanAuditKey(tx.QueryRow(q.Key, nil))
		return err
	})
	return out, c.d.Translate(err, "audit key", "ensure")
}

// AuditKey returns the stored note key.
func (c *Core) AuditKey(ctx context.Context) (store.AuditKey, error) {
	k, err := c.scanAuditKey(c.d.QueryRow(ctx, c.q.Audit.Key, nil))
	return k, c.d.Translate(err, "audit key", "checkpoints")
}

func (c *Core) scanAuditKey(row Row) (store.AuditKey, error) {
	var k store.AuditKey
	err := row.Scan(&k.Origin, &k.SKey, &k.VKey, c.d.Time(&k.CreatedAt))
	return k, err
}

// AcquireSequencer takes or renews the sequencer's lease with one
// compare-and-set on its row.
func (c *Core) AcquireSequencer(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	if holder == "" || ttl <= 0 {
		return false, airlock.Invalid("lease", "a lease needs a holder and a positive ttl")
	}
	var got bool
	err := c.d.Write(ctx, func(tx Tx) error {
		var h string
		err := tx.QueryRow(c.q.Audit.Acquire, Args{{"holder", holder}, {"ttl", ttl}}).Scan(&h)
		switch {
		case err == nil:
			got = true
		case noRows(err):
			got = false
		default:
			return err
		}
		return nil
	})
	return got, c.d.Translate(err, "lease", sequencerLease)
}

// UnsequencedEvents reads the events without a leaf above after. How far
// the next call may start (Next) is settled before the read: the largest
// event ID, or a smaller one a recent settling left (Dialect.SettleLately),
// so that every event up to it is committed, and so seen by the read, or
// never will be.
func (c *Core) UnsequencedEvents(ctx context.Context, after int64, limit int) (store.Unsequenced, error) {
	if limit <= 0 || limit > maxAuditPage {
		limit = maxAuditPage
	}
	q := &c.q.Audit
	if q.LastEvent == "" {
		// The page settles itself: every event up to its last row is in
		// it, has a leaf, or will never commit.
		evs, _, lastRow, err := c.readUnsequenced(ctx, after, limit)
		if err != nil {
			return store.Unsequenced{}, c.d.Translate(err, "events", "unsequenced")
		}
		return store.Unsequenced{Events: evs, Next: max(lastRow, after)}, nil
	}
	var last int64
	if err := c.d.QueryRow(ctx, q.LastEvent, nil).Scan(&last); err != nil {
		return store.Unsequenced{}, c.d.Translate(err, "events", "unsequenced")
	}
	settled := last
	if last > after {
		upto, err := c.d.SettleLately(ctx, last)
		if err != nil {
			return store.Unsequenced{}, c.d.Translate(err, "events", "unsequenced")
		}
		settled = upto
	}
	evs, full, _, err := c.readUnsequenced(ctx, after, limit)
	if err != nil {
		return store.Unsequenced{}, c.d.Translate(err, "events", "unsequenced")
	}
	next := settled
	if full {
		// A full page: events between its last and settled may be
		// unsequenced still.
		next = min(next, evs[len(evs)-1].Event.ID)
	}
	return store.Unsequenced{Events: evs, Next: max(next, after)}, nil
}

// maxUnsequencedBytes ends a page of UnsequencedEvents early once its
// requests' payloads hold this many bytes: each event of a request carries
// them, and a batch of large arguments would otherwise hold gigabytes.
const maxUnsequencedBytes = 16 << 20

// readUnsequenced reads up to limit events without a leaf above after, and
// reports whether the page is full (limit rows, or ended early by
// maxUnsequencedBytes) and the ID of its last row, which without LastEvent
// may be the largest event's though it has a leaf.
func (c *Core) readUnsequenced(ctx context.Context, after int64, limit int) (out []store.UnsequencedEvent, full bool, lastRow int64, err error) {
	rows, err := c.d.Query(ctx, c.q.Audit.Unsequenced, Args{{"after", after}, {"limit", limit}})
	if err != nil {
		return nil, false, 0, err
	}
	defer rows.Close()
	var (
		n     int
		bytes int
		// One set of destinations for every row, so that a page of
		// 1,000 does not allocate each anew (Scan sets each one).
		e                  airlock.Event
		typ, state         string
		hasRequest         bool
		tool, reasoning    string
		arguments, ctxText *string
		purged             bool
		kept               auditlog.Payloads
		dst                = []any{&e.ID, &typ, c.d.Time(&e.At), &e.Actor, &e.RequestID, &e.InstanceID, &e.TokenID, &state, &e.Subject, &e.PolicyHash, &e.UID,
			&hasRequest, &tool, &arguments, &reasoning, &ctxText, &purged, &kept.Arguments, &kept.Reasoning, &kept.Context}
		sequenced bool
	)
	if c.q.Audit.LastEvent == "" {
		dst = append(dst, &sequenced)
	}
	for rows.Next() {
		if err := rows.Scan(dst...); err != nil {
			return nil, false, 0, err
		}
		n++
		lastRow = e.ID
		if sequenced {
			continue
		}
		e.Type, e.State = airlock.EventType(typ), airlock.State(state)
		u := store.UnsequencedEvent{Event: e}
		if hasRequest {
			r := &airlock.Request{ID: e.RequestID, Tool: tool, AgentReasoning: reasoning}
			if arguments != nil {
				r.Arguments = []byte(*arguments)
			}
			if ctxText != nil {
				r.Context = []byte(*ctxText)
			}
			u.Request = r
			if purged {
				p := kept
				p.Tool = auditlog.DigestString(tool)
				u.Purged = &p
			}
			bytes += len(tool) + len(reasoning) + len(r.Arguments) + len(r.Context)
		}
		out = append(out, u)
		if bytes >= maxUnsequencedBytes {
			return out, true, lastRow, nil
		}
	}
	return out, n == limit, lastRow, rows.Err()
}

// AppendLeaves grows the tree by a compare-and-set on its size, then
// writes the leaves and their hashes, in one transaction.
func (c *Core) AppendLeaves(ctx context.Context, p store.AppendLeavesParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	q := &c.q.Audit
	n := len(p.Leaves)
	err := c.d.Write(ctx, func(tx Tx) error {
		grown, err := tx.Exec(q.Grow, Args{{"from", p.From}, {"to", p.From + int64(n)}, {"holder", p.Holder}})
		if err != nil {
			return err
		}
		if grown == 0 {
			return c.appendRefused(tx, p)
		}
		idxs, events, leaves, leafHashes := make([]int64, n), make([]int64, n), make([][]byte, n), make([][]byte, n)
		for i, l := range p.Leaves {
			h := auditlog.LeafHash(l.Leaf)
			idxs[i], events[i], leaves[i], leafHashes[i] = p.From+int64(i), l.EventID, l.Leaf, h[:]
		}
		var inserted int64
		if q.InsertLeaves != "" {
			if inserted, err = tx.Exec(q.InsertLeaves, Args{{"idxs", idxs}, {"event_ids", events}, {"leaves", leaves}, {"leaf_hashes", leafHashes}}); err != nil {
				return err
			}
		} else {
			inserted, err = manyRows(tx, q.InsertLeaf, n, func(i int, vals []any) {
				vals[0], vals[1], vals[2], vals[3] = idxs[i], events[i], leaves[i], leafHashes[i]
			})
			if err != nil {
				return err
			}
		}
		if inserted != int64(n) {
			// An event of the append has a leaf already: this sequencer
			// read it unsequenced before another appended it.
			return fmt.Errorf("%w: %d of the %d events have a leaf already", store.ErrAppendRefused, int64(n)-inserted, n)
		}
		// The leaves' own hashes went in with them (leaf_hash): store the
		// interior nodes only, one row fewer per leaf. (Databases from
		// before this keep level-0 rows in audit_hashes; they are not read.)
		first := auditlog.StoredHashIndex(p.From)
		hidxs, hashes := make([]int64, 0, len(p.Hashes)), make([][]byte, 0, len(p.Hashes))
		for i := range p.Hashes {
			idx := first + int64(i)
			if leaf, ok := auditlog.LeafOfStoredHash(idx); ok {
				if k := leaf - p.From; k < 0 || k >= int64(n) || !bytes.Equal(p.Hashes[i][:], leafHashes[k]) {
					return fmt.Errorf("audit leaf %d: the sequencer's leaf hash is not the leaf's", leaf)
				}
				continue
			}
			hidxs, hashes = append(hidxs, idx), append(hashes, p.Hashes[i][:])
		}
		if len(hidxs) == 0 {
			return nil
		}
		if q.InsertHashes != "" {
			_, err := tx.Exec(q.InsertHashes, Args{{"idxs", hidxs}, {"hashes", hashes}})
			return err
		}
		_, err = manyRows(tx, q.InsertHash, len(hidxs), func(i int, vals []any) {
			vals[0], vals[1] = hidxs[i], hashes[i]
		})
		return err
	})
	if errors.Is(err, store.ErrAppendRefused) {
		return err
	}
	return c.d.Translate(err, "audit leaves", fmt.Sprint(p.From))
}

// appendRefused says why the compare-and-set of an append changed no row.
func (c *Core) appendRefused(tx Tx, p store.AppendLeavesParams) error {
	var size int64
	if err := tx.QueryRow(c.q.Audit.Size, nil).Scan(&size); err != nil {
		return err
	}
	if size != p.From {
		return fmt.Errorf("%w: the tree has %d leaves, not %d", store.ErrAppendRefused, size, p.From)
	}
	var (
		holder string
		live   bool
	)
	if err := tx.QueryRow(c.q.Audit.Holder, nil).Scan(&holder, &live); err != nil {
		return err
	}
	if !live {
		return fmt.Errorf("%w: %s's sequencer lease has expired", store.ErrAppendRefused, p.Holder)
	}
	return fmt.Errorf("%w: %s holds the sequencer lease, not %s", store.ErrAppendRefused, holder, p.Holder)
}

// TreeSize returns the tree's size.
func (c *Core) TreeSize(ctx context.Context) (int64, error) {
	var n int64
	err := c.d.QueryRow(ctx, c.q.Audit.Size, nil).Scan(&n)
	return n, c.d.Translate(err, "audit tree", "size")
}

// ReadAuditHashes reads the stored hashes at indexes, in their order.
func (c *Core) ReadAuditHashes(ctx context.Context, indexes []int64) ([]auditlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	type stored struct {
		leaf bool
		idx  int64
		hash []byte
	}
	nodes, leaves := make([]int64, 0, len(indexes)), make([]int64, 0, len(indexes))
	for _, x := range indexes {
		if leaf, ok := auditlog.LeafOfStoredHash(x); ok {
			leaves = append(leaves, leaf)
		} else {
			nodes = append(nodes, x)
		}
	}
	rows, err := all(ctx, c.d, func(row Row) (stored, error) {
		var s stored
		err := row.Scan(&s.leaf, &s.idx, &s.hash)
		return s, err
	}, c.q.Audit.Hashes, Args{{"indexes", nodes}, {"leaves", leaves}})
	if err != nil {
		return nil, c.d.Translate(err, "audit hashes", "read")
	}
	byIdx := make(map[int64]auditlog.Hash, len(rows))
	for _, r := range rows {
		var h auditlog.Hash
		if len(r.hash) != len(h) {
			return nil, fmt.Errorf("audit hash %d: %d bytes", r.idx, len(r.hash))
		}
		copy(h[:], r.hash)
		idx := r.idx
		if r.leaf {
			idx = auditlog.StoredHashIndex(r.idx)
		}
		byIdx[idx] = h
	}
	out := make([]auditlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := byIdx[x]
		if !ok {
			return nil, fmt.Errorf("audit hash %d: not stored", x)
		}
		out[i] = h
	}
	return out, nil
}

// AuditLeaves reads up to limit leaves from index start on.
func (c *Core) AuditLeaves(ctx context.Context, start int64, limit int) ([]store.AuditLeaf, error) {
	if limit <= 0 || limit > maxAuditPage {
		limit = maxAuditPage
	}
	out, err := all(ctx, c.d, func(row Row) (store.AuditLeaf, error) {
		var l store.AuditLeaf
		err := row.Scan(&l.Index, &l.EventID, &l.Leaf)
		return l, err
	}, c.q.Audit.Leaves, Args{{"start", max(start, 0)}, {"limit", limit}})
	return out, c.d.Translate(err, "audit leaves", fmt.Sprint(start))
}

// SaveCheckpoint stores checkpoint p.Size unless one of that size is
// stored, with its deliveries when it does, and returns the stored one.
func (c *Core) SaveCheckpoint(ctx context.Context, p store.SaveCheckpointParams) (store.AuditCheckpoint, error) {
	if err := p.Validate(); err != nil {
		return store.AuditCheckpoint{}, err
	}
	q := &c.q.Audit
	var out store.AuditCheckpoint
	err := c.d.Write(ctx, func(tx Tx) error {
		stored, err := tx.Exec(q.InsertCheckpoint, Args{{"size", p.Size}, {"note", p.Note}})
		if err != nil {
			return err
		}
		if stored == 1 && len(p.Deliveries) > 0 {
			if _, err := c.insertDeliveries(tx, p.Deliveries, 0); err != nil {
				return err
			}
		}
		out, err = c.scanCheckpoint(tx.QueryRow(q.Checkpoint, Args{{"size", p.Size}}))
		return err
	})
	return out, c.d.Translate(err, "checkpoint", fmt.Sprint(p.Size))
}

// RequestLeaves reads up to limit leaves of request id's events.
func (c *Core) RequestLeaves(ctx context.Context, id string, limit int) ([]store.AuditLeaf, error) {
	if limit <= 0 || limit > maxAuditPage {
		limit = maxAuditPage
	}
	out, err := all(ctx, c.d, func(row Row) (store.AuditLeaf, error) {
		var l store.AuditLeaf
		err := row.Scan(&l.Index, &l.EventID, &l.Leaf)
		return l, err
	}, c.q.Audit.RequestLeaves, Args{{"request", id}, {"limit", limit}})
	return out, c.d.Translate(err, "audit leaves", id)
}

// LatestCheckpoint returns the checkpoint of the largest tree.
func (c *Core) LatestCheckpoint(ctx context.Context) (store.AuditCheckpoint, error) {
	cp, err := c.scanCheckpoint(c.d.QueryRow(ctx, c.q.Audit.LatestCheckpoint, nil))
	return cp, c.d.Translate(err, "checkpoint", "latest")
}

func (c *Core) scanCheckpoint(row Row) (store.AuditCheckpoint, error) {
	var cp store.AuditCheckpoint
	err := row.Scan(&cp.Size, &cp.Note, c.d.Time(&cp.CreatedAt))
	return cp, err
}
