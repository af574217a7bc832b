// Package passkey is what a passkey-signed decision is (docs/phone.md,
// "Passkeys"): the challenge a reviewer's authenticator signs, which binds
// the assertion to exactly one decision of one request's arguments, and
// the check of a stored assertion against the credential's public key,
// which needs nothing but the assertion, the key and the decision: the
// server that verified it live, or an auditor reading the export later.
package passkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-webauthn/webauthn/protocol/webauthncose"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
)

// Decision is what a passkey-signed decision signs.
type Decision struct {
	RequestID string
	// Arguments are the request's arguments as stored (JSON); their
	// digest is the approval token's (approvaltoken.ArgsDigest), so the
	// signed digest and the token's name the same bytes.
	Arguments json.RawMessage
	Status    airlock.State
	ValidFor  string
	Note      string
}

// Challenge is the WebAuthn challenge of d: the SHA-256 of the RFC 8785
// canonical JSON of {"request_id", "args_digest", "status", "valid_for",
// "note"}. Two decisions differing in any of them have different
// challenges, so an assertion made for one is refused for any other.
func Challenge(d Decision) ([]byte, error) {
	digest, err := approvaltoken.ArgsDigest(d.Arguments)
	if err != nil {
		return nil, err
	}
	return SignedChallenge(Signed{RequestID: d.RequestID, ArgsDigest: digest, Status: d.Status, ValidFor: d.ValidFor, Note: d.Note})
}

// Signed are the fields a passkey-signed decision's challenge is made of,
// with the arguments as their digest: what the audit log's export carries
// beside the decision's leaf, from which anyone recomputes the challenge.
type Signed struct {
	RequestID  string
	ArgsDigest string
	Status     airlock.State
	ValidFor   string
	Note       string
}

// SignedChallenge is Challenge of the fields s, the arguments given by
// their digest.
func SignedChallenge(s Signed) ([]byte, error) {
	obj, err := json.Marshal(map[string]string{"request_id": s.RequestID, "args_digest": s.ArgsDigest,
		"status": string(s.Status), "valid_for": s.ValidFor, "note": s.Note})
	if err != nil {
		return nil, err
	}
	canonical, err := approvaltoken.Canonical(obj)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canonical)
	return sum[:], nil
}

// Assertion is a WebAuthn assertion as stored with a decision and
// exported with the audit log: the authenticator's bytes, as signed.
type Assertion = airlock.PasskeyAssertion

// Errors of Verify.
var (
	ErrChallenge = errors.New("the assertion was made for another challenge (another request, arguments or decision)")
	ErrSignature = errors.New("the assertion's signature does not verify with the passkey's public key")
)

// Verify checks a against the credential's COSE public key: that its
// client data is an assertion's ("webauthn.get") over challenge, that its
// authenticator data is for the relying party rpID with the user present
// and verified, and that its signature over authenticatorData ‖
// SHA-256(clientDataJSON) verifies. It does not judge the origin or the
// counter, which only the live ceremony can.
func Verify(publicKey []byte, a Assertion, challenge []byte, rpID string) error {
	var cd struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal(a.ClientDataJSON, &cd); err != nil {
		return fmt.Errorf("the assertion's client data is not JSON: %w", err)
	}
	if cd.Type != "webauthn.get" {
		return fmt.Errorf("the assertion's client data is of type %q, not webauthn.get", cd.Type)
	}
	if cd.Challenge != base64.RawURLEncoding.EncodeToString(challenge) {
		return ErrChallenge
	}
	// authenticatorData: rpIdHash (32), flags (1), signCount (4), ...
	if len(a.AuthenticatorData) < 37 {
		return errors.New("the assertion's authenticator data is too short")
	}
	rp := sha256.Sum256([]byte(rpID))
	if !bytes.Equal(a.AuthenticatorData[:32], rp[:]) {
		return fmt.Errorf("the assertion was made for another relying party than %q", rpID)
	}
	const userPresent, userVerified = 0x01, 0x04
	if flags := a.AuthenticatorData[32]; flags&userPresent == 0 || flags&userVerified == 0 {
		return errors.New("the assertion's authenticator did not verify its user")
	}
	key, err := webauthncose.ParsePublicKey(publicKey)
	if err != nil {
		return fmt.Errorf("the passkey's public key: %w", err)
	}
	cdHash := sha256.Sum256(a.ClientDataJSON)
	ok, err := webauthncose.VerifySignature(key, append(bytes.Clone(a.AuthenticatorData), cdHash[:]...), a.Signature)
	if err != nil || !ok {
		return ErrSignature
	}
	return nil
}
