package auditlog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
)

// The RFC 6962 reference tree: the leaves and roots that Certificate
// Transparency's implementations share (transparency-dev/merkle's
// testonly.LeafInputs and RootHashes, from the CT reference code), and their
// inclusion and consistency proofs (its proof/verify_test.go). Leaf numbers in
// the proofs are 1-based, as there.
var (
	rfcLeaves = []string{"", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"}
	rfcRoots  = []string{
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
		"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
		"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
		"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
	}
	rfcInclusion = []struct {
		leaf, size int64
		proof      []string
	}{
		{1, 8, []string{"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
		{6, 8, []string{"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
		{3, 3, []string{"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
		{2, 5, []string{"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
	}
	rfcConsistency = []struct {
		from, to int64
		proof    []string
	}{
		{1, 1, nil},
		{1, 8, []string{"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
		{6, 8, []string{"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
		{2, 5, []string{"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
		{6, 7, []string{"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
	}
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hashOf(t *testing.T, s string) Hash {
	t.Helper()
	var h Hash
	if copy(h[:], unhex(t, s)) != len(h) {
		t.Fatalf("%s is not a hash", s)
	}
	return h
}

// refRoot is RFC 6962 section 2.1's Merkle Tree Hash written from the RFC,
// sharing no code with tlog: MTH({}) = SHA-256(), MTH({d}) = SHA-256(0x00 ||
// d), MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])) for the largest
// power of two k < n.
func refRoot(leaves [][]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0}, leaves[0]...))
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := refRoot(leaves[:k]), refRoot(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// storeReader is a HashReader over a map, as a store's table of hashes
// keyed by stored-hash index is: it fails on an index never written.
type storeReader map[int64]Hash

func (s storeReader) ReadHashes(indexes []int64) ([]Hash, error) {
	out := make([]Hash, len(indexes))
	for i, x := range indexes {
		h, ok := s[x]
		if !ok {
			return nil, fmt.Errorf("no stored hash %d", x)
		}
		out[i] = h
	}
	return out, nil
}

// appendToStore appends leaf at index as a store does with StoredHashes.
func appendToStore(t *testing.T, s storeReader, index int64, leaf []byte) {
	t.Helper()
	hashes, err := StoredHashes(index, leaf, s)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hashes {
		s[StoredHashIndex(index)+int64(i)] = h
	}
}

func TestTreeMatchesRFC6962ReferenceRoots(t *testing.T) {
	t.Parallel()
	tree := &MemoryTree{}
	s := storeReader{}
	for i, l := range rfcLeaves {
		if err := tree.Append(unhex(t, l)); err != nil {
			t.Fatal(err)
		}
		appendToStore(t, s, int64(i), unhex(t, l))
	}
	for size := range int64(len(rfcLeaves) + 1) {
		want := hashOf(t, rfcRoots[size])
		got, err := tree.Root(size)
		if err != nil {
			t.Fatal(err)
		}
		fromStore, err := TreeHash(size, s)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || fromStore != want {
			t.Errorf("size %d: root %x (memory), %x (store), RFC 6962 says %x", size, got, fromStore, want)
		}
	}
}

func TestProofsMatchRFC6962ReferenceProofs(t *testing.T) {
	t.Parallel()
	tree := &MemoryTree{}
	for _, l := range rfcLeaves {
		if err := tree.Append(unhex(t, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range rfcInclusion {
		p, err := ProveInclusion(v.leaf-1, v.size, tree)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != len(v.proof) {
			t.Fatalf("leaf %d of %d: proof of %d hashes, want %d", v.leaf, v.size, len(p), len(v.proof))
		}
		for i := range p {
			if p[i] != hashOf(t, v.proof[i]) {
				t.Errorf("leaf %d of %d: proof[%d] = %x, want %s", v.leaf, v.size, i, p[i], v.proof[i])
			}
		}
		cp := Checkpoint{Size: v.size, Root: hashOf(t, rfcRoots[v.size])}
		if err := CheckInclusion(p, v.leaf-1, unhex(t, rfcLeaves[v.leaf-1]), cp); err != nil {
			t.Errorf("leaf %d of %d: %v", v.leaf, v.size, err)
		}
		if err := CheckInclusion(p, v.leaf-1, []byte("another leaf"), cp); err == nil {
			t.Errorf("leaf %d of %d: another leaf passed", v.leaf, v.size)
		}
		if v.leaf < v.size {
			if err := CheckInclusion(p, v.leaf, unhex(t, rfcLeaves[v.leaf-1]), cp); err == nil {
				t.Errorf("leaf %d of %d: passed at the next index", v.leaf, v.size)
			}
		}
	}
	for _, v := range rfcConsistency {
		p, err := ProveConsistency(v.from, v.to, tree)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != len(v.proof) {
			t.Fatalf("%d to %d: proof of %d hashes, want %d", v.from, v.to, len(p), len(v.proof))
		}
		for i := range p {
			if p[i] != hashOf(t, v.proof[i]) {
				t.Errorf("%d to %d: proof[%d] = %x, want %s", v.from, v.to, i, p[i], v.proof[i])
			}
		}
		older := Checkpoint{Origin: "o", Size: v.from, Root: hashOf(t, rfcRoots[v.from])}
		newer := Checkpoint{Origin: "o", Size: v.to, Root: hashOf(t, rfcRoots[v.to])}
		if err := VerifyConsistency(older, newer, p); err != nil {
			t.Errorf("%d to %d: %v", v.from, v.to, err)
		}
		if len(p) > 0 {
			bad := append(ConsistencyProof{}, p...)
			bad[0][0] ^= 0x10
			if err := VerifyConsistency(older, newer, bad); err == nil {
				t.Errorf("%d to %d: a proof with a flipped bit passed", v.from, v.to)
			}
		}
	}
}

// The tree a store builds with StoredHashes has the root RFC 6962 defines
// for every size up to 70 (every shape of a ragged right edge), and every
// inclusion and consistency proof read from it checks.
func TestStoredHashesAgainstIndependentRoot(t *testing.T) {
	t.Parallel()
	s := storeReader{}
	var leaves [][]byte
	for i := range int64(70) {
		leaf := fmt.Appendf(nil, `{"leaf":%d}`, i)
		appendToStore(t, s, i, leaf)
		leaves = append(leaves, leaf)
	}
	roots := make([]Hash, len(leaves)+1)
	for size := range int64(len(leaves) + 1) {
		got, err := TreeHash(size, s)
		if err != nil {
			t.Fatal(err)
		}
		if want := refRoot(leaves[:size]); got != want {
			t.Fatalf("size %d: root %x, RFC 6962 from first principles says %x", size, got, want)
		}
		roots[size] = got
	}
	for size := int64(1); size <= 33; size++ {
		cp := Checkpoint{Origin: "o", Size: size, Root: roots[size]}
		for i := range size {
			p, err := ProveInclusion(i, size, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckInclusion(p, i, leaves[i], cp); err != nil {
				t.Errorf("leaf %d of %d: %v", i, size, err)
			}
			if err := CheckInclusion(p, i, leaves[(i+1)%size], cp); err == nil && size > 1 {
				t.Errorf("leaf %d of %d: leaf %d passed in its place", i, size, (i+1)%size)
			}
		}
		for from := range size + 1 {
			p, err := ProveConsistency(from, size, s)
			if err != nil {
				t.Fatal(err)
			}
			older := Checkpoint{Origin: "o", Size: from, Root: roots[from]}
			if err := VerifyConsistency(older, cp, p); err != nil {
				t.Errorf("%d to %d: %v", from, size, err)
			}
			if from > 0 && from < size {
				forked := older
				forked.Root[0] ^= 1
				if err := VerifyConsistency(forked, cp, p); err == nil {
					t.Errorf("%d to %d: a forked older root passed", from, size)
				}
			}
		}
	}
}

func TestVerifyConsistencyRefuses(t *testing.T) {
	t.Parallel()
	tree := &MemoryTree{}
	for _, l := range rfcLeaves {
		if err := tree.Append(unhex(t, l)); err != nil {
			t.Fatal(err)
		}
	}
	at := func(origin string, size int64) Checkpoint {
		return Checkpoint{Origin: origin, Size: size, Root: hashOf(t, rfcRoots[size])}
	}
	proof, err := ProveConsistency(3, 8, tree)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		older, newer Checkpoint
		proof        ConsistencyProof
	}{
		{"the newer checkpoint is of another log", at("a", 3), at("b", 8), proof},
		{"the newer checkpoint is smaller", at("a", 8), at("a", 3), proof},
		{"the proof is for other sizes", at("a", 4), at("a", 8), proof},
		{"the proof is empty", at("a", 3), at("a", 8), nil},
		{"the same size with another root", at("a", 3), Checkpoint{Origin: "a", Size: 3, Root: hashOf(t, rfcRoots[4])}, nil},
		{"the empty tree with a wrong root", Checkpoint{Origin: "a"}, at("a", 8), nil},
		{"the empty tree with a proof", at("a", 0), at("a", 8), proof},
	} {
		if err := VerifyConsistency(tc.older, tc.newer, tc.proof); err == nil {
			t.Errorf("%s: passed", tc.name)
		}
	}
}

// recordingReader serves a MemoryTree's hashes and records which it read.
type recordingReader struct {
	tree *MemoryTree
	read map[int64]bool
}

func (r *recordingReader) ReadHashes(indexes []int64) ([]Hash, error) {
	for _, x := range indexes {
		r.read[x] = true
	}
	return r.tree.ReadHashes(indexes)
}

// TestRightEdge: the right edge at each size is what the root of that tree
// reads, and every hash that appending the next leaf reads is on it, so a
// sequencer keeping the edge reads no hash of the tree.
func TestRightEdge(t *testing.T) {
	tree := &MemoryTree{}
	for size := int64(0); size <= 300; size++ {
		edge := map[int64]bool{}
		for _, x := range RightEdge(size) {
			edge[x] = true
		}
		r := &recordingReader{tree: tree, read: map[int64]bool{}}
		if _, err := TreeHash(size, r); err != nil {
			t.Fatal(err)
		}
		if len(r.read) != len(edge) {
			t.Fatalf("size %d: the root reads %v; the right edge is %v", size, r.read, edge)
		}
		for x := range r.read {
			if !edge[x] {
				t.Fatalf("size %d: the root reads %d, not on the right edge %v", size, x, edge)
			}
		}
		leaf := fmt.Appendf(nil, "leaf %d", size)
		r.read = map[int64]bool{}
		if _, err := StoredHashes(size, leaf, r); err != nil {
			t.Fatal(err)
		}
		for x := range r.read {
			if !edge[x] {
				t.Fatalf("appending leaf %d reads %d, not on the right edge %v", size, x, edge)
			}
		}
		if err := tree.Append(leaf); err != nil {
			t.Fatal(err)
		}
	}
}
