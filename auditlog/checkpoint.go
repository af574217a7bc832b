package auditlog

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// Checkpoint is a signed statement of the tree (C2SP tlog-checkpoint): the
// log's origin, the tree's size and its root after that many leaves.
type Checkpoint struct {
	// Origin names the log. Airlock's checkpoints are signed by a note key
	// of the same name, and OpenCheckpoint requires the two to agree.
	Origin string
	Size   int64
	Root   Hash
}

// ErrSignature is wrapped by OpenCheckpoint when the note is not signed by
// the key it was given.
var ErrSignature = errors.New("checkpoint is not signed by the key")

// GenerateKey returns a new Ed25519 note key named origin: skey, the signer
// key ("PRIVATE+KEY+origin+hash+keydata"), to keep secret, and vkey, the
// verifier key ("origin+hash+keydata"), to publish. The origin is the log's
// name, for instance its host and a path ("airlock.example.com/audit"): no
// spaces and no "+".
func GenerateKey(origin string) (skey, vkey string, err error) {
	skey, vkey, err = note.GenerateKey(rand.Reader, origin)
	if err == nil {
		// GenerateKey takes any name; a signer checks it.
		_, err = note.NewSigner(skey)
	}
	if err != nil {
		return "", "", fmt.Errorf("audit key for origin %q: %w", origin, err)
	}
	return skey, vkey, nil
}

// SignCheckpoint returns c as a signed note: the body's lines origin, size
// in decimal and the root in standard base64, a blank line, and the
// signature line of skey, whose name must be c.Origin.
func SignCheckpoint(skey string, c Checkpoint) ([]byte, error) {
	signer, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", err)
	}
	if signer.Name() != c.Origin {
		return nil, fmt.Errorf("sign checkpoint: origin %q is not the key's name %q", c.Origin, signer.Name())
	}
	if c.Size < 0 {
		return nil, fmt.Errorf("sign checkpoint: size %d", c.Size)
	}
	msg, err := note.Sign(&note.Note{Text: c.body()}, signer)
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", err)
	}
	return msg, nil
}

// body is the checkpoint's note text.
func (c Checkpoint) body() string {
	return c.Origin + "\n" + strconv.FormatInt(c.Size, 10) + "\n" + base64.StdEncoding.EncodeToString(c.Root[:]) + "\n"
}

// OpenCheckpoint verifies that msg is a checkpoint signed by vkey, the log's
// verifier key, and returns it. The body is read strictly: the origin must be
// the key's name, the size decimal without a sign or leading zeros, the root
// 32 bytes in standard base64; extension lines after them are allowed (the
// format permits them) and ignored. Signatures by other keys, such as
// witnesses' cosignatures, are allowed and not checked. A note not signed by
// vkey wraps ErrSignature.
func OpenCheckpoint(msg []byte, vkey string) (Checkpoint, error) {
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint key: %w", err)
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return Checkpoint{}, fmt.Errorf("%w %s: %v", ErrSignature, verifier.Name(), err)
		}
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := parseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != verifier.Name() {
		return Checkpoint{}, fmt.Errorf("checkpoint: origin %q is not the key's name %q", c.Origin, verifier.Name())
	}
	return c, nil
}

// parseCheckpoint reads a checkpoint's note text (already verified).
func parseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if !strings.HasSuffix(text, "\n") || len(lines) < 3 {
		return Checkpoint{}, errors.New("checkpoint: the body is not origin, size and root, each on its line")
	}
	for _, l := range lines {
		if l == "" {
			return Checkpoint{}, errors.New("checkpoint: an empty line in the body")
		}
	}
	origin, sizeText, rootText := lines[0], lines[1], lines[2]
	size, err := strconv.ParseInt(sizeText, 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != sizeText {
		return Checkpoint{}, fmt.Errorf("checkpoint: size %q is not a decimal number without leading zeros", clip(sizeText))
	}
	root, err := base64.StdEncoding.Strict().DecodeString(rootText)
	if err != nil || len(root) != len(Hash{}) {
		return Checkpoint{}, fmt.Errorf("checkpoint: root %q is not 32 bytes in standard base64", clip(rootText))
	}
	c := Checkpoint{Origin: origin, Size: size}
	copy(c.Root[:], root)
	return c, nil
}

// clip shortens a text for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// VerifyConsistency checks, with proof, that the tree of checkpoint newer
// extends the tree of checkpoint older: same origin, no fewer leaves, and
// the older tree a prefix of the newer one. Checkpoints are taken as already
// opened (OpenCheckpoint); a proof that fails wraps ErrProof.
func VerifyConsistency(older, newer Checkpoint, proof ConsistencyProof) error {
	if older.Origin != newer.Origin {
		return fmt.Errorf("%w: checkpoints of two logs, %q and %q", ErrProof, older.Origin, newer.Origin)
	}
	if older.Size > newer.Size {
		return fmt.Errorf("%w: the newer checkpoint has %d leaves, fewer than the older's %d", ErrProof, newer.Size, older.Size)
	}
	return checkConsistency(proof, older.Size, older.Root, newer.Size, newer.Root)
}
