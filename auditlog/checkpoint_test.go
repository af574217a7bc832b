package auditlog

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// A checkpoint this package signed opens with note.Open and the public key
// alone, and its body reads, by hand, as C2SP tlog-checkpoint lays it out:
// no code of this package is on the verifying side.
func TestCheckpointOpensWithNoteAndThePublicKeyAlone(t *testing.T) {
	t.Parallel()
	skey, vkey, err := GenerateKey("airlock.example.com/audit")
	if err != nil {
		t.Fatal(err)
	}
	root := Hash{1, 2, 3, 250}
	msg, err := SignCheckpoint(skey, Checkpoint{Origin: "airlock.example.com/audit", Size: 1234, Root: root})
	if err != nil {
		t.Fatal(err)
	}

	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("body %q is not three lines", n.Text)
	}
	if lines[0] != "airlock.example.com/audit" || lines[1] != "1234" {
		t.Errorf("body %q: origin or size wrong", n.Text)
	}
	if got, err := base64.StdEncoding.DecodeString(lines[2]); err != nil || string(got) != string(root[:]) {
		t.Errorf("root line %q is not the root in standard base64", lines[2])
	}
	if len(n.Sigs) != 1 || n.Sigs[0].Name != "airlock.example.com/audit" {
		t.Errorf("signatures %+v", n.Sigs)
	}
	// The whole message: body, blank line, one signature line by the origin.
	if !strings.HasPrefix(string(msg), n.Text+"\n— airlock.example.com/audit ") || !strings.HasSuffix(string(msg), "\n") {
		t.Errorf("note %q is not body, blank line, signature line", msg)
	}

	got, err := OpenCheckpoint(msg, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Checkpoint{Origin: "airlock.example.com/audit", Size: 1234, Root: root}); got != want {
		t.Errorf("OpenCheckpoint = %+v, want %+v", got, want)
	}
}

// sign signs any note text with skey, so tests can make bodies the package
// would never write.
func sign(t *testing.T, skey, text string) []byte {
	t.Helper()
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: text}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func TestOpenCheckpointRefuses(t *testing.T) {
	t.Parallel()
	const origin = "airlock.test/audit"
	skey, vkey, err := GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	otherSkey, _, err := GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	root := base64.StdEncoding.EncodeToString(make([]byte, 32))
	good, err := SignCheckpoint(skey, Checkpoint{Origin: origin, Size: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		msg           []byte
		wantSignature bool
	}{
		{"signed by another key of the same name", sign(t, otherSkey, origin+"\n5\n"+root+"\n"), true},
		{"the size changed after signing", []byte(strings.Replace(string(good), "\n5\n", "\n6\n", 1)), true},
		{"the signature changed", flipSignature(t, good), true},
		{"the size with a leading zero", sign(t, skey, origin+"\n05\n"+root+"\n"), false},
		{"the size negative", sign(t, skey, origin+"\n-5\n"+root+"\n"), false},
		{"the size with a plus", sign(t, skey, origin+"\n+5\n"+root+"\n"), false},
		{"the size not decimal", sign(t, skey, origin+"\n0x5\n"+root+"\n"), false},
		{"the root 31 bytes", sign(t, skey, origin+"\n5\n"+base64.StdEncoding.EncodeToString(make([]byte, 31))+"\n"), false},
		{"the root in base64url", sign(t, skey, origin+"\n5\n"+base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32))+"\n"), false},
		{"the root unpadded", sign(t, skey, origin+"\n5\n"+base64.RawStdEncoding.EncodeToString(make([]byte, 32))+"\n"), false},
		{"no root line", sign(t, skey, origin+"\n5\n"), false},
		{"another origin", sign(t, skey, "airlock.test/other\n5\n"+root+"\n"), false},
		{"not a note", []byte(origin + "\n5\n" + root + "\n"), false},
	} {
		_, err := OpenCheckpoint(tc.msg, vkey)
		if err == nil {
			t.Errorf("%s: opened", tc.name)
			continue
		}
		if errors.Is(err, ErrSignature) != tc.wantSignature {
			t.Errorf("%s: %v; want ErrSignature %v", tc.name, err, tc.wantSignature)
		}
	}
}

// flipSignature flips one bit of the note's signature, keeping it base64.
func flipSignature(t *testing.T, msg []byte) []byte {
	t.Helper()
	text := string(msg)
	i := strings.LastIndex(text, " ")
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(text[i+1:], "\n"))
	if err != nil {
		t.Fatal(err)
	}
	sig[len(sig)-1] ^= 1
	return []byte(text[:i+1] + base64.StdEncoding.EncodeToString(sig) + "\n")
}

func TestOpenCheckpointAllowsExtensionLinesAndCosignatures(t *testing.T) {
	t.Parallel()
	const origin = "airlock.test/audit"
	skey, vkey, err := GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	witnessSkey, _, err := note.GenerateKey(rand.Reader, "witness.example")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	witness, _ := note.NewSigner(witnessSkey)
	root := Hash{9}
	body := origin + "\n7\n" + base64.StdEncoding.EncodeToString(root[:]) + "\nextension one\n"
	msg, err := note.Sign(&note.Note{Text: body}, signer, witness)
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenCheckpoint(msg, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if got != (Checkpoint{Origin: origin, Size: 7, Root: root}) {
		t.Errorf("got %+v", got)
	}
}

func TestSignCheckpointRefusesAnotherOrigin(t *testing.T) {
	t.Parallel()
	skey, _, err := GenerateKey("airlock.test/audit")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SignCheckpoint(skey, Checkpoint{Origin: "airlock.test/other", Size: 1}); err == nil {
		t.Error("signed a checkpoint of another origin")
	}
	if _, _, err := GenerateKey("has space"); err == nil {
		t.Error("made a key whose name has a space")
	}
}

// sumGolangOrgKey is the Go checksum database's verifier key, as the go
// command holds it (cmd/go/internal/modfetch/key.go).
const sumGolangOrgKey = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"

// A checkpoint published by the Go checksum database (testdata: the go
// command's cached "latest" tree note) reads with this package's body
// parser, agreeing with tlog's own parser of that note; OpenCheckpoint
// refuses it because its origin line, "go.sum database tree", is not its
// key's name, which Airlock requires of its own checkpoints.
func TestGoChecksumDatabaseCheckpoint(t *testing.T) {
	t.Parallel()
	msg, err := os.ReadFile("testdata/sum.golang.org.note")
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := note.NewVerifier(sumGolangOrgKey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		t.Fatalf("the published note does not verify: %v", err)
	}
	c, err := parseCheckpoint(n.Text)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := tlog.ParseTree([]byte(n.Text))
	if err != nil {
		t.Fatal(err)
	}
	if c.Origin != "go.sum database tree" || c.Size != tree.N || c.Root != tree.Hash {
		t.Errorf("parsed %+v; tlog.ParseTree says size %d root %x", c, tree.N, tree.Hash)
	}
	if want := strings.Split(n.Text, "\n")[1]; strconv.FormatInt(c.Size, 10) != want {
		t.Errorf("size %d, the note says %s", c.Size, want)
	}
	if _, err := OpenCheckpoint(msg, sumGolangOrgKey); err == nil || errors.Is(err, ErrSignature) {
		t.Errorf("OpenCheckpoint: %v; want an origin refusal", err)
	}
}
