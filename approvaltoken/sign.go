package approvaltoken

import (
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/go-jose/go-jose/v4"
)

// Key is one Ed25519 signing key and the id tokens name it by.
type Key struct {
	// ID is the key's "kid": its RFC 7638 thumbprint, so the same key
	// always has the same id on every replica.
	ID      string
	Private ed25519.PrivateKey
	// header is the token's first part, the base64url protected header,
	// as go-jose's signer writes it for this key: made once by NewKey,
	// so a signature costs the claims' JSON and one Ed25519 signature.
	// Sign makes it for a Key built otherwise.
	header string
}

// NewKey wraps an Ed25519 private key and computes its id.
func NewKey(private ed25519.PrivateKey) (Key, error) {
	if len(private) != ed25519.PrivateKeySize {
		return Key{}, fmt.Errorf("an Ed25519 private key has %d bytes, not %d", ed25519.PrivateKeySize, len(private))
	}
	id, err := KeyID(private.Public().(ed25519.PublicKey))
	if err != nil {
		return Key{}, err
	}
	header, err := protectedHeader(id, private)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: id, Private: private, header: header}, nil
}

// protectedHeader is the first part of every token the key signs: the
// base64url protected header go-jose's signer writes, alg EdDSA, typ Type
// and kid id. go-jose makes it, once per key, so the header is go-jose's
// to the byte; it holds nothing that changes per token, so every
// signature reuses it (TestSignIsGoJOSE holds the tokens to go-jose's own).
func protectedHeader(id string, private ed25519.PrivateKey) (string, error) {
	signer, err := newSigner(id, private)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign([]byte("{}"))
	if err != nil {
		return "", fmt.Errorf("approval token header: %w", err)
	}
	compact, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("approval token header: %w", err)
	}
	header, _, _ := strings.Cut(compact, ".")
	return header, nil
}

// newSigner makes go-jose's signer of the key: header alg EdDSA, typ Type
// and kid id.
func newSigner(id string, private ed25519.PrivateKey) (jose.Signer, error) {
	// A JSONWebKey with an id makes go-jose put "kid" in the header.
	key := jose.JSONWebKey{Key: private, KeyID: id}
	opts := (&jose.SignerOptions{}).WithType(Type)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key}, opts)
	if err != nil {
		return nil, fmt.Errorf("approval token signer: %w", err)
	}
	return signer, nil
}

// KeyID returns the RFC 7638 JWK thumbprint of an Ed25519 public key,
// unpadded base64url.
func KeyID(public ed25519.PublicKey) (string, error) {
	sum, err := (&jose.JSONWebKey{Key: public}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("thumbprint of the public key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}

// Public returns the key's public half as a JWK for the key set.
func (k Key) Public() jose.JSONWebKey {
	return jose.JSONWebKey{
		Key:       k.Private.Public(),
		KeyID:     k.ID,
		Algorithm: string(jose.EdDSA),
		Use:       "sig",
	}
}

// String names the key without its secret, so a key printed by mistake
// leaks nothing.
func (k Key) String() string { return "Ed25519 key " + k.ID }

// GoString is String for %#v.
func (k Key) GoString() string { return k.String() }

// Sign returns the compact JWS of c signed with k: header alg EdDSA, typ
// Type and kid k.ID.
//
// A compact JWS is header.payload.signature, each part base64url, the
// signature over "header.payload" (RFC 7515, section 7.1). The header is
// the key's, made by go-jose once; Ed25519 is deterministic, so the token
// is the one go-jose's signer would make, without its per-call JSON of
// the header.
func Sign(k Key, c Claims) (string, error) {
	if err := c.check(); err != nil {
		return "", err
	}
	if len(k.Private) != ed25519.PrivateKeySize {
		return "", fmt.Errorf("sign approval token: an Ed25519 private key has %d bytes, not %d", ed25519.PrivateKeySize, len(k.Private))
	}
	header := k.header
	if header == "" {
		var err error
		if header, err = protectedHeader(k.ID, k.Private); err != nil {
			return "", err
		}
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("approval token claims: %w", err)
	}
	enc := base64.RawURLEncoding
	n := len(header) + 1 + enc.EncodedLen(len(payload))
	buf := make([]byte, n, n+1+enc.EncodedLen(ed25519.SignatureSize))
	copy(buf, header)
	buf[len(header)] = '.'
	enc.Encode(buf[len(header)+1:], payload)
	sig := ed25519.Sign(k.Private, buf)
	buf = append(buf, '.')
	buf = enc.AppendEncode(buf, sig)
	return string(buf), nil
}

// check refuses claims a verifier could not hold to anything.
func (c Claims) check() error {
	switch {
	case c.Issuer == "" || c.Subject == "" || c.ID == "":
		return errors.New("approval token claims need iss, sub and jti")
	case c.Tool == "" || c.ArgsDigest == "":
		return errors.New("approval token claims need the tool and the arguments' digest")
	case c.Expiry <= c.IssuedAt:
		return fmt.Errorf("approval token expires (%d) at or before it is issued (%d)", c.Expiry, c.IssuedAt)
	}
	return nil
}

// FromSeed returns the key of a 32-byte Ed25519 seed, as the store keeps
// it.
func FromSeed(seed []byte) (Key, error) {
	if len(seed) != ed25519.SeedSize {
		return Key{}, fmt.Errorf("an Ed25519 seed has %d bytes, not %d", ed25519.SeedSize, len(seed))
	}
	return NewKey(ed25519.NewKeyFromSeed(seed))
}

// Generate returns a new random key.
func Generate() (Key, error) {
	_, private, err := ed25519.GenerateKey(nil)
	if err != nil {
		return Key{}, fmt.Errorf("generate an Ed25519 key: %w", err)
	}
	return NewKey(private)
}

// ParsePrivateKeyPEM reads an Ed25519 private key in PKCS #8 PEM, as
// `openssl genpkey -algorithm ed25519` writes it.
func ParsePrivateKeyPEM(data []byte) (Key, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return Key{}, errors.New(`not a PEM "PRIVATE KEY" block: make one with openssl genpkey -algorithm ed25519`)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return Key{}, fmt.Errorf("PKCS #8 private key: %w", err)
	}
	private, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return Key{}, fmt.Errorf("the key is %T, not Ed25519: make one with openssl genpkey -algorithm ed25519", parsed)
	}
	return NewKey(private)
}
