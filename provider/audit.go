package provider

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/store"
)

// Reading the verifiable audit log (docs/audit.md): its latest checkpoint,
// its note key, its entries, inclusion and consistency proofs, a request's
// proof and the export. Auditors and admins only; nothing here writes,
// but for the note key, made at its first read when no checkpoint has
// made it yet.

// Bounds of the audit log's reads.
const (
	// DefaultAuditEntries is how many entries a page of AuditEntries has
	// when the caller names no limit; MaxAuditEntries the most it may ask
	// for (a page of leaves is held whole while it is written).
	DefaultAuditEntries = 1000
	MaxAuditEntries     = 10_000
	// MaxRequestProofEntries is how many of a request's events its proof
	// carries at most; a request has a few dozen.
	MaxRequestProofEntries = 1000
)

func auditorOnly(c airlock.Caller) error {
	if !c.Role.MayReadAuditLog() {
		return forbidden("only auditor and admin tokens read the audit log")
	}
	return nil
}

// AuditCheckpoint returns the latest signed checkpoint (auditors and
// admins); not_found before the first.
func (s *Service) AuditCheckpoint(ctx context.Context, c airlock.Caller) (store.AuditCheckpoint, error) {
	if err := auditorOnly(c); err != nil {
		return store.AuditCheckpoint{}, err
	}
	cp, err := s.storeFor(c).LatestCheckpoint(ctx)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return store.AuditCheckpoint{}, airlock.Errorf(airlock.CodeNotFound,
			"no checkpoint yet: the first is signed within --checkpoint-interval of the first event")
	}
	return cp, err
}

// AuditVerifierKey returns the note verifier key checkpoints are signed
// with (auditors and admins): the one key an auditor needs, to be kept
// apart from the server. It is made now if no replica has made it yet,
// so that it can be pinned before the first checkpoint.
func (s *Service) AuditVerifierKey(ctx context.Context, c airlock.Caller) (string, error) {
	if err := auditorOnly(c); err != nil {
		return "", err
	}
	k, err := s.storeFor(c).AuditKey(ctx)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		k, err = s.loadAuditKey(ctx)
	}
	if err != nil {
		return "", err
	}
	return k.VKey, nil
}

// AuditEntries returns up to limit entries of the tree from index start
// on (auditors and admins): DefaultAuditEntries when limit is 0, at most
// MaxAuditEntries. A start at or beyond the tree's size gives none. A page
// is a heavy read (HeavyRead): its slot is held until the caller calls
// release, once the page is written; on an error there is nothing to
// release.
func (s *Service) AuditEntries(ctx context.Context, c airlock.Caller, start int64, limit int) (entries []auditlog.Entry, release func(), err error) {
	if err := auditorOnly(c); err != nil {
		return nil, nil, err
	}
	switch {
	case start < 0:
		return nil, nil, airlock.Invalid("start", "start is an index of the tree: 0 or more, not %d", start)
	case limit < 0 || limit > MaxAuditEntries:
		return nil, nil, airlock.Invalid("limit", "limit is 1 to %d entries, not %d", MaxAuditEntries, limit)
	case limit == 0:
		limit = DefaultAuditEntries
	}
	release, err = s.HeavyRead(c)
	if err != nil {
		return nil, nil, err
	}
	st := s.storeFor(c)
	leaves, err := st.AuditLeaves(ctx, start, limit)
	if err == nil {
		entries, err = s.withPasskeys(ctx, st, leaves)
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return entries, release, nil
}

// AuditProof is an inclusion or a consistency proof: the hashes an
// auditor combines (RFC 6962, golang.org/x/mod/sumdb/tlog's order) to
// reach a tree's root.
type AuditProof struct {
	// Index and TreeSize are an inclusion proof's leaf and tree; From and
	// TreeSize a consistency proof's older and newer trees.
	Index, From, TreeSize int64
	Hashes                []auditlog.Hash
}

// treeSizeAtMost checks that size is a tree the log has had: 1 to its
// size now. Checking it before the proof gives the caller the reason,
// rather than a stored hash that is missing.
func (s *Service) treeSizeAtMost(ctx context.Context, a store.AuditLog, field string, size int64) error {
	if size < 1 {
		return airlock.Invalid(field, "%s is a tree size: 1 or more, not %d", field, size)
	}
	now, err := a.TreeSize(ctx)
	if err != nil {
		return err
	}
	if size > now {
		return airlock.Invalid(field, "%s %d is beyond the tree, which has %d leaves", field, size, now)
	}
	return nil
}

// AuditInclusionProof proves that the leaf at index is in the tree of
// treeSize leaves (auditors and admins).
func (s *Service) AuditInclusionProof(ctx context.Context, c airlock.Caller, index, treeSize int64) (AuditProof, error) {
	if err := auditorOnly(c); err != nil {
		return AuditProof{}, err
	}
	a := s.storeFor(c)
	if err := s.treeSizeAtMost(ctx, a, "tree_size", treeSize); err != nil {
		return AuditProof{}, err
	}
	if index < 0 || index >= treeSize {
		return AuditProof{}, airlock.Invalid("index", "index %d is not in a tree of %d leaves (0 to %d)", index, treeSize, treeSize-1)
	}
	p, err := auditlog.ProveInclusion(index, treeSize, store.HashReader(ctx, a))
	if err != nil {
		return AuditProof{}, fmt.Errorf("audit log: %w", err)
	}
	return AuditProof{Index: index, TreeSize: treeSize, Hashes: p}, nil
}

// AuditConsistencyProof proves that the tree of from leaves is a prefix
// of the tree of to leaves (auditors and admins). From 0, the proof is
// empty.
func (s *Service) AuditConsistencyProof(ctx context.Context, c airlock.Caller, from, to int64) (AuditProof, error) {
	if err := auditorOnly(c); err != nil {
		return AuditProof{}, err
	}
	a := s.storeFor(c)
	if err := s.treeSizeAtMost(ctx, a, "to", to); err != nil {
		return AuditProof{}, err
	}
	if from < 0 || from > to {
		return AuditProof{}, airlock.Invalid("from", "from is a tree size from 0 to to (%d), not %d", to, from)
	}
	p, err := auditlog.ProveConsistency(from, to, store.HashReader(ctx, a))
	if err != nil {
		return AuditProof{}, fmt.Errorf("audit log: %w", err)
	}
	return AuditProof{From: from, TreeSize: to, Hashes: p}, nil
}

// RequestProof is what proves a request's history: its events' leaves
// with their inclusion proofs against one checkpoint.
type RequestProof struct {
	RequestID  string
	Checkpoint store.AuditCheckpoint
	// Entries are the leaves of the request's events that the checkpoint
	// covers, each with its inclusion proof in the checkpoint's tree.
	Entries []ProvedEntry
	// Later are the indexes of its events' leaves after the checkpoint:
	// in the tree, not yet covered by a checkpoint. Events not yet
	// sequenced have no leaf, and are in neither.
	Later []int64
}

// ProvedEntry is a leaf with its inclusion proof, and the passkey record
// of a decision or vote signed with one.
type ProvedEntry struct {
	store.AuditLeaf
	Proof   []auditlog.Hash
	Passkey *auditlog.PasskeyRecord
}

// AuditRequestProof returns the proof of request id's events against the
// latest checkpoint (auditors and admins); not_found for an unknown
// request, or before the first checkpoint.
func (s *Service) AuditRequestProof(ctx context.Context, c airlock.Caller, id string) (RequestProof, error) {
	if err := auditorOnly(c); err != nil {
		return RequestProof{}, err
	}
	a := s.storeFor(c)
	if _, err := a.GetRequest(ctx, id); err != nil {
		return RequestProof{}, err
	}
	cp, err := s.AuditCheckpoint(ctx, c)
	if err != nil {
		return RequestProof{}, err
	}
	leaves, err := a.RequestLeaves(ctx, id, MaxRequestProofEntries)
	if err != nil {
		return RequestProof{}, err
	}
	entries, err := s.withPasskeys(ctx, a, leaves)
	if err != nil {
		return RequestProof{}, err
	}
	out := RequestProof{RequestID: id, Checkpoint: cp, Entries: []ProvedEntry{}, Later: []int64{}}
	r := store.HashReader(ctx, a)
	for i, l := range leaves {
		if l.Index >= cp.Size {
			out.Later = append(out.Later, l.Index)
			continue
		}
		p, err := auditlog.ProveInclusion(l.Index, cp.Size, r)
		if err != nil {
			return RequestProof{}, fmt.Errorf("audit log: %w", err)
		}
		out.Entries = append(out.Entries, ProvedEntry{AuditLeaf: l, Proof: p, Passkey: entries[i].Passkey})
	}
	return out, nil
}
