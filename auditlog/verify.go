package auditlog

import (
	"errors"
	"fmt"
	"iter"
)

// Reason says why VerifyEntries refused a log, in one word the CLI and the
// API can print and tests can match.
type Reason string

// Reasons a log is refused.
const (
	// ReasonOrder: the entry at this position carries another index: an
	// entry was deleted, moved or repeated.
	ReasonOrder Reason = "order"
	// ReasonMalformed: the entry at this position is not an entry, or its
	// leaf is not a leaf (ParseLeaf).
	ReasonMalformed Reason = "malformed"
	// ReasonLeafHash: the leaf at this index is not the leaf the checkpoint's
	// tree holds there, though every leaf before it is: it was changed, or
	// an entry was deleted, inserted or moved here.
	ReasonLeafHash Reason = "leaf_hash"
	// ReasonRoot: the entries' root is not the checkpoint's, and nothing was
	// at hand to tell which leaf differs (Index is -1).
	ReasonRoot Reason = "root"
	// ReasonExtra: an entry beyond the checkpoint's tree size, which the
	// checkpoint does not cover.
	ReasonExtra Reason = "extra"
	// ReasonMissing: the entries end before the checkpoint's tree size.
	ReasonMissing Reason = "missing"
	// ReasonSignature: a checkpoint is not signed by the log's key
	// (OpenCheckpoint), or is not a checkpoint.
	ReasonSignature Reason = "signature"
	// ReasonConsistency: a checkpoint kept earlier is not of a prefix of
	// the tree the entries and the newer checkpoint agree on: the log was
	// rewritten or cut short between the two.
	ReasonConsistency Reason = "consistency"
	// ReasonPasskey: the passkey record beside the leaf at this index
	// does not sign that leaf's decision, or its signature does not
	// verify (VerifyPasskey).
	ReasonPasskey Reason = "passkey"
)

// VerifyError is a log that does not match its checkpoint: the first index
// that does not, and why.
type VerifyError struct {
	// Index is the first index that does not match, or -1 when only the
	// root tells (ReasonRoot).
	Index  int64
	Reason Reason
	Err    error
}

// Error says where and why, as "index 41: leaf_hash: …".
func (e *VerifyError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%s: %v", e.Reason, e.Err)
	}
	return fmt.Sprintf("index %d: %s: %v", e.Index, e.Reason, e.Err)
}

// Unwrap returns the detail.
func (e *VerifyError) Unwrap() error { return e.Err }

// Prover answers consistency proofs in the tree a checkpoint commits to:
// that the tree of from leaves is a prefix of the tree of to leaves. The
// server answers them (GET /v1/audit/proofs/consistency), and so does a
// tree built from the store's hashes or from an export kept earlier
// (TreeProver). A prover need not be trusted: every answer is checked
// against the signed checkpoint, so a lying prover can make VerifyEntries
// name an index too early, never pass a log that does not match.
type Prover func(from, to int64) (ConsistencyProof, error)

// TreeProver returns a Prover that reads r, the hashes of a tree of at least
// the checkpoint's size.
func TreeProver(r HashReader) Prover {
	return func(from, to int64) (ConsistencyProof, error) { return ProveConsistency(from, to, r) }
}

// VerifyEntries checks that entries are exactly the leaves of the tree cp
// commits to: indexes 0, 1, 2, … without a gap, each leaf well formed
// (ParseLeaf), as many as cp.Size, and their root cp.Root; and that each
// passkey record beside a leaf signs that leaf's decision (VerifyPasskey;
// one whose public key is unknown passes, and the caller counts it). cp must come from
// OpenCheckpoint, which checked its signature. It returns nil or a
// *VerifyError naming the first index that does not match and why.
//
// Why it needs prover to name some indexes. A checkpoint is one root: it
// says whether all the leaves match, not which one does not. Some tampering
// shows in the entries themselves and is named without help: an index out of
// place (an entry deleted, moved or repeated in an export that keeps the
// indexes), a malformed leaf, an entry beyond the checkpoint (one appended),
// entries that stop short (deleted at the end). A leaf changed in place, or
// entries renumbered after a deletion or a move, leave the indexes intact and
// change only the root; then a checkpoint alone can say no more than "root"
// (Index -1). Given a prover, VerifyEntries finds the first index by
// bisection: the entries' prefix of m leaves is the tree's exactly when the
// prefix's root, which it computes, is consistent with cp (a consistency
// proof from m to cp.Size, checked against cp.Root); that holds for every m
// up to the first bad index and for none after, so about log2(cp.Size)
// proofs name it. Trusting hashes served beside the leaves instead would
// trust what the tamperer also wrote. A problem found in the entries is
// reported at its index once the prefix before it is shown to be the tree's
// (with a prover), or as it is (without one: then an earlier changed leaf
// would go unnamed, but the log still fails).
//
// Memory is 64 bytes a leaf (MemoryTree); the leaves are not kept.
func VerifyEntries(entries iter.Seq2[Entry, error], cp Checkpoint, prover Prover) error {
	_, err := verifyEntries(entries, cp, prover)
	return err
}

// VerifyEntriesSince is VerifyEntries, then a check that previous, a
// checkpoint of the same log kept earlier (by an auditor, or from the
// audit.checkpoint webhook), is of a prefix of the tree the entries are:
// the log was only appended to between the two. The entries' own tree
// answers it, so no proof is needed. Both checkpoints come from
// OpenCheckpoint. A previous checkpoint that does not fit is a
// *VerifyError with ReasonConsistency and Index -1: a root says that the
// prefix differs, not where.
func VerifyEntriesSince(previous Checkpoint, entries iter.Seq2[Entry, error], cp Checkpoint, prover Prover) error {
	if previous.Origin != cp.Origin {
		return &VerifyError{-1, ReasonConsistency, fmt.Errorf("the previous checkpoint is of log %q, this one of %q", previous.Origin, cp.Origin)}
	}
	if previous.Size > cp.Size {
		return &VerifyError{-1, ReasonConsistency, fmt.Errorf("the previous checkpoint has %d entries, this one %d: the log was cut short", previous.Size, cp.Size)}
	}
	tree, err := verifyEntries(entries, cp, prover)
	if err != nil {
		return err
	}
	root, err := tree.Root(previous.Size)
	if err != nil {
		return err
	}
	if root != previous.Root {
		return &VerifyError{-1, ReasonConsistency, fmt.Errorf("the first %d entries' root is %s, the previous checkpoint's %s: the log was rewritten since", previous.Size, root, previous.Root)}
	}
	return nil
}

// verifyEntries is VerifyEntries, returning the entries' tree when they
// match.
func verifyEntries(entries iter.Seq2[Entry, error], cp Checkpoint, prover Prover) (*MemoryTree, error) {
	tree := &MemoryTree{}
	var found *VerifyError
	for e, err := range entries {
		next := tree.Size()
		switch {
		case err != nil:
			found = &VerifyError{next, ReasonMalformed, err}
		case e.Index != next:
			found = &VerifyError{next, ReasonOrder, fmt.Errorf("entry %d is where entry %d belongs: an entry was deleted, moved or repeated", e.Index, next)}
		case next >= cp.Size:
			found = &VerifyError{next, ReasonExtra, fmt.Errorf("the checkpoint covers %d entries; this one is beyond them", cp.Size)}
		}
		if found == nil && (!e.parsed || e.Passkey != nil) {
			l, perr := ParseLeaf(e.Leaf)
			switch {
			case perr != nil:
				found = &VerifyError{next, ReasonMalformed, perr}
			case e.Passkey != nil:
				if err := VerifyPasskey(l, *e.Passkey); err != nil && !errors.Is(err, ErrPasskeyKeyUnknown) {
					found = &VerifyError{next, ReasonPasskey, err}
				}
			}
		}
		if found != nil {
			break
		}
		if err := tree.AppendHash(LeafHash(e.Leaf)); err != nil {
			return nil, err
		}
	}
	n := tree.Size()
	if found == nil && n < cp.Size {
		found = &VerifyError{n, ReasonMissing, fmt.Errorf("the entries end at %d; the checkpoint covers %d", n, cp.Size)}
	}
	if found != nil && n < cp.Size && prover == nil {
		return nil, found
	}
	v := verifier{tree: tree, cp: cp, prover: prover}
	ok, err := v.prefixMatches(n)
	if err != nil && found != nil {
		// No proof to be had (a store that lost a leaf loses its hash
		// with it): the problem the entries show is reported as it is,
		// as without a prover.
		return nil, found
	}
	if err != nil {
		return nil, err
	}
	if ok {
		if found != nil {
			return nil, found
		}
		return tree, nil
	}
	return nil, v.firstDifference(n)
}

// verifier bisects a tree against a checkpoint.
type verifier struct {
	tree   *MemoryTree
	cp     Checkpoint
	prover Prover
}

// prefixMatches reports whether the tree's first m leaves are the
// checkpoint tree's: by its root when m is the whole tree, else by a
// consistency proof from the prover.
func (v verifier) prefixMatches(m int64) (bool, error) {
	root, err := v.tree.Root(m)
	if err != nil {
		return false, err
	}
	if m == v.cp.Size {
		return root == v.cp.Root, nil
	}
	if m == 0 {
		return true, nil
	}
	proof, err := v.prover(m, v.cp.Size)
	if err != nil {
		return false, &VerifyError{-1, ReasonRoot, fmt.Errorf("the entries do not match the checkpoint, and the proof that would say where could not be had: %w", err)}
	}
	return checkConsistency(proof, m, root, v.cp.Size, v.cp.Root) == nil, nil
}

// firstDifference names the first leaf that is not the checkpoint tree's,
// given that the first hi leaves are not all the tree's.
func (v verifier) firstDifference(hi int64) error {
	if v.prover == nil {
		root, _ := v.tree.Root(hi)
		return &VerifyError{-1, ReasonRoot, fmt.Errorf("the %d entries' root is %s, the checkpoint's %s: a leaf was changed, or entries deleted, inserted or moved; a prover (the server, or an export kept earlier) names the first", hi, root, v.cp.Root)}
	}
	lo := int64(0) // the first lo leaves are the tree's
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := v.prefixMatches(mid)
		if err != nil {
			return err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return &VerifyError{lo, ReasonLeafHash, fmt.Errorf("leaf %d is not the checkpoint tree's leaf %d, though every leaf before it is: it was changed, or entries were deleted, inserted or moved", lo, lo)}
}
