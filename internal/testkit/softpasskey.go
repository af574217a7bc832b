package testkit

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
)

// SoftPasskey is a software WebAuthn authenticator for tests: a P-256
// key, its public key in COSE form (as a passkey is stored) and a
// signature counter it advances at each assertion, as a platform
// authenticator does.
type SoftPasskey struct {
	ID      []byte
	Key     *ecdsa.PrivateKey
	COSE    []byte
	Counter uint32
}

// Authenticator data flags of an assertion (WebAuthn §6.1).
const (
	FlagUserPresent  byte = 0x01
	FlagUserVerified byte = 0x04
)

// NewSoftPasskey makes a passkey whose credential ID is id.
func NewSoftPasskey(t testing.TB, id string) *SoftPasskey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := k.PublicKey.Bytes() // uncompressed: 0x04 ‖ X ‖ Y
	if err != nil {
		t.Fatal(err)
	}
	cose, err := webauthncbor.Marshal(webauthncose.EC2PublicKeyData{
		PublicKeyData: webauthncose.PublicKeyData{KeyType: int64(webauthncose.EllipticKey), Algorithm: int64(webauthncose.AlgES256)},
		Curve:         1, XCoord: pub[1:33], YCoord: pub[33:]})
	if err != nil {
		t.Fatal(err)
	}
	return &SoftPasskey{ID: []byte(id), Key: k, COSE: cose}
}

// Assertion is what an authenticator answers: the bytes a relying party
// checks.
type Assertion struct {
	AuthenticatorData, ClientDataJSON, Signature []byte
}

// Sign makes an assertion of type typ ("webauthn.get" for a sign-in or a
// signed decision) over challenge for relying party rpID, made on origin,
// with flags (FlagUserPresent|FlagUserVerified as a passkey sets them),
// the counter advanced.
func (p *SoftPasskey) Sign(t testing.TB, typ string, challenge []byte, rpID, origin string, flags byte) Assertion {
	t.Helper()
	p.Counter++
	rp := sha256.Sum256([]byte(rpID))
	authData := binary.BigEndian.AppendUint32(append(rp[:], flags), p.Counter)
	cd := fmt.Appendf(nil, `{"type":%q,"challenge":%q,"origin":%q,"crossOrigin":false}`,
		typ, base64.RawURLEncoding.EncodeToString(challenge), origin)
	h := sha256.Sum256(cd)
	signed := sha256.Sum256(append(bytes.Clone(authData), h[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, p.Key, signed[:])
	if err != nil {
		t.Fatal(err)
	}
	return Assertion{AuthenticatorData: authData, ClientDataJSON: cd, Signature: sig}
}
