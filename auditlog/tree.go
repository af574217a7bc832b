package auditlog

import (
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// Hash is a SHA-256 hash of the tree: a leaf hash, an interior node or a root.
type Hash = tlog.Hash

// HashReader is what the store implements to serve the tree: ReadHashes
// returns the stored hashes at the given indexes (tlog.StoredHashIndex
// numbering), in order, or an error. The hashes of leaf n are stored, once,
// at StoredHashIndex(n) onward, as StoredHashes returns them.
type HashReader = tlog.HashReader

// InclusionProof proves that a leaf is in a tree at its index (RFC 6962's
// audit path, in tlog's form).
type InclusionProof = tlog.RecordProof

// ConsistencyProof proves that a tree of one size is a prefix of a tree of a
// larger size (RFC 6962's consistency proof, in tlog's form).
type ConsistencyProof = tlog.TreeProof

// LeafHash returns the RFC 6962 leaf hash of a leaf's bytes: SHA-256 of 0x00
// and the bytes.
func LeafHash(leaf []byte) Hash { return tlog.RecordHash(leaf) }

// StoredHashIndex returns where the first of leaf index's stored hashes goes:
// StoredHashes(index, …)[i] is stored at StoredHashIndex(index)+i.
func StoredHashIndex(index int64) int64 { return tlog.StoredHashIndex(0, index) }

// LeafOfStoredHash reports whether the stored hash at idx is a leaf's own
// hash (level 0 of the tree) and of which leaf. A store may keep those
// with their leaves rather than among the interior nodes.
func LeafOfStoredHash(idx int64) (leaf int64, ok bool) {
	level, n := tlog.SplitStoredHashIndex(idx)
	return n, level == 0
}

// RightEdge returns the stored indexes of the tree's right edge at size:
// the root of each complete subtree the first size leaves make, one per
// bit set in size, largest first. They are every stored hash that
// appending to that tree reads (StoredHashes) and all that its root needs
// (TreeHash), so a sequencer that keeps them between appends need read no
// hash of the tree.
func RightEdge(size int64) []int64 {
	var out []int64
	for level := 62; level >= 0; level-- {
		if size>>level&1 == 1 {
			out = append(out, tlog.StoredHashIndex(level, size>>level-1))
		}
	}
	return out
}

// StoredHashes returns the hashes to store when leaf is appended at index:
// its leaf hash and the interior nodes it completes. r must hold the hashes of
// every earlier leaf. The store writes them, in the same transaction that
// records the leaf, at StoredHashIndex(index) onward.
func StoredHashes(index int64, leaf []byte, r HashReader) ([]Hash, error) {
	hashes, err := tlog.StoredHashes(index, leaf, r)
	if err != nil {
		return nil, fmt.Errorf("stored hashes of leaf %d: %w", index, err)
	}
	return hashes, nil
}

// TreeHash returns the root of the tree of the first size leaves, read from
// the stored hashes in r. The root of the empty tree is SHA-256 of nothing.
func TreeHash(size int64, r HashReader) (Hash, error) {
	h, err := tlog.TreeHash(size, r)
	if err != nil {
		return Hash{}, fmt.Errorf("root of tree size %d: %w", size, err)
	}
	return h, nil
}

// ProveInclusion returns the proof that leaf index is in the tree of size
// leaves, read from r.
func ProveInclusion(index, size int64, r HashReader) (InclusionProof, error) {
	if index < 0 || index >= size {
		return nil, fmt.Errorf("inclusion proof: index %d is not in a tree of size %d", index, size)
	}
	p, err := tlog.ProveRecord(size, index, r)
	if err != nil {
		return nil, fmt.Errorf("inclusion proof of %d in %d: %w", index, size, err)
	}
	return p, nil
}

// ErrProof is wrapped by every refusal of a proof: the proof does not show
// what it was offered for.
var ErrProof = errors.New("proof does not verify")

// CheckInclusion checks that leaf is the leaf at index of the tree cp
// commits to, with proof p.
func CheckInclusion(p InclusionProof, index int64, leaf []byte, cp Checkpoint) error {
	if index < 0 || index >= cp.Size {
		return fmt.Errorf("%w: index %d is not in a tree of size %d", ErrProof, index, cp.Size)
	}
	if err := tlog.CheckRecord(p, cp.Size, cp.Root, index, LeafHash(leaf)); err != nil {
		return fmt.Errorf("%w: leaf %d in tree size %d: %v", ErrProof, index, cp.Size, err)
	}
	return nil
}

// ProveConsistency returns the proof that the tree of from leaves is a
// prefix of the tree of to leaves, read from r. From the empty tree the
// proof is empty.
func ProveConsistency(from, to int64, r HashReader) (ConsistencyProof, error) {
	if from < 0 || from > to {
		return nil, fmt.Errorf("consistency proof: from %d to %d", from, to)
	}
	if from == 0 {
		return ConsistencyProof{}, nil
	}
	p, err := tlog.ProveTree(to, from, r)
	if err != nil {
		return nil, fmt.Errorf("consistency proof from %d to %d: %w", from, to, err)
	}
	return p, nil
}

// checkConsistency checks that the tree of size from with root fromRoot is
// a prefix of the tree of size to with root toRoot.
func checkConsistency(p ConsistencyProof, from int64, fromRoot Hash, to int64, toRoot Hash) error {
	switch {
	case from < 0 || from > to:
		return fmt.Errorf("%w: tree size %d cannot be a prefix of tree size %d", ErrProof, from, to)
	case from == 0:
		// The empty tree is a prefix of every tree, and its root is fixed.
		if fromRoot != emptyRoot() || len(p) != 0 {
			return fmt.Errorf("%w: the empty tree has root %s and an empty proof", ErrProof, emptyRoot())
		}
		return nil
	}
	if err := tlog.CheckTree(p, to, toRoot, from, fromRoot); err != nil {
		return fmt.Errorf("%w: tree size %d is not a prefix of tree size %d: %v", ErrProof, from, to, err)
	}
	return nil
}

// emptyRoot is the root of the empty tree.
func emptyRoot() Hash {
	h, _ := tlog.TreeHash(0, nil) // reads nothing, so cannot fail
	return h
}

// MemoryTree is a tree held in memory: what the verifier builds from the
// entries it reads, and a HashReader for tests. It keeps two hashes per leaf
// (64 bytes), not the leaves.
type MemoryTree struct {
	hashes []Hash
	size   int64
}

// Append adds leaf as the next leaf.
func (t *MemoryTree) Append(leaf []byte) error {
	return t.AppendHash(LeafHash(leaf))
}

// AppendHash adds the leaf whose leaf hash is h as the next leaf.
func (t *MemoryTree) AppendHash(h Hash) error {
	hashes, err := tlog.StoredHashesForRecordHash(t.size, h, t)
	if err != nil {
		return fmt.Errorf("append leaf %d: %w", t.size, err)
	}
	t.hashes = append(t.hashes, hashes...)
	t.size++
	return nil
}

// Size returns the number of leaves.
func (t *MemoryTree) Size() int64 { return t.size }

// Root returns the root of the tree of its first size leaves.
func (t *MemoryTree) Root(size int64) (Hash, error) {
	if size < 0 || size > t.size {
		return Hash{}, fmt.Errorf("root of tree size %d: the tree has %d leaves", size, t.size)
	}
	return TreeHash(size, t)
}

// ReadHashes implements HashReader.
func (t *MemoryTree) ReadHashes(indexes []int64) ([]Hash, error) {
	out := make([]Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(t.hashes)) {
			return nil, fmt.Errorf("stored hash %d: the tree holds %d", x, len(t.hashes))
		}
		out[i] = t.hashes[x]
	}
	return out, nil
}
