package auditlog

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/passkey"
)

// PasskeyRecord is a decision or a quorum vote signed with a passkey, as
// an entry carries it beside its leaf (docs/audit.md, "Passkey-signed
// decisions"): the WebAuthn assertion, the credential's public key, the
// relying party it was made for and the fields it signed. It is not part
// of the leaf, so the tree is the same with or without it; what makes it
// evidence is the signature, which VerifyPasskey checks against the
// leaf.
type PasskeyRecord struct {
	Assertion passkey.Assertion
	// PublicKey is the credential's COSE public key; empty when the
	// server no longer has it (a decision kept before keys were kept with
	// decisions, whose passkey was deleted since).
	PublicKey []byte
	RPID      string
	Signed    passkey.Signed
}

// ErrPasskeyKeyUnknown is VerifyPasskey's answer for a record without the
// credential's public key, whose signature nobody can check.
// VerifyEntries passes it; the verdict counts it apart.
var ErrPasskeyKeyUnknown = errors.New("the passkey's public key is unknown: the decision was kept before keys were kept with decisions, and the passkey was deleted since")

// wirePasskey is a record's JSON: bytes in unpadded base64url, as
// WebAuthn's JSON writes them.
type wirePasskey struct {
	CredentialID      string     `json:"credential_id"`
	PublicKey         string     `json:"public_key"`
	AuthenticatorData string     `json:"authenticator_data"`
	ClientDataJSON    string     `json:"client_data_json"`
	Signature         string     `json:"signature"`
	RPID              string     `json:"rp_id"`
	Signed            wireSigned `json:"signed"`
}

type wireSigned struct {
	RequestID  string `json:"request_id"`
	ArgsDigest string `json:"args_digest"`
	Status     string `json:"status"`
	ValidFor   string `json:"valid_for"`
	Note       string `json:"note"`
}

// MarshalJSON writes the record.
func (r PasskeyRecord) MarshalJSON() ([]byte, error) {
	b64 := base64.RawURLEncoding.EncodeToString
	return json.Marshal(wirePasskey{
		CredentialID: b64(r.Assertion.CredentialID), PublicKey: b64(r.PublicKey),
		AuthenticatorData: b64(r.Assertion.AuthenticatorData), ClientDataJSON: b64(r.Assertion.ClientDataJSON),
		Signature: b64(r.Assertion.Signature), RPID: r.RPID,
		Signed: wireSigned{RequestID: r.Signed.RequestID, ArgsDigest: r.Signed.ArgsDigest, Status: string(r.Signed.Status),
			ValidFor: r.Signed.ValidFor, Note: r.Signed.Note},
	})
}

// parsePasskey reads a record strictly: no unknown or duplicated member,
// every byte string unpadded base64url.
func parsePasskey(data []byte) (*PasskeyRecord, error) {
	var w struct {
		CredentialID      string          `json:"credential_id"`
		PublicKey         string          `json:"public_key"`
		AuthenticatorData string          `json:"authenticator_data"`
		ClientDataJSON    string          `json:"client_data_json"`
		Signature         string          `json:"signature"`
		RPID              string          `json:"rp_id"`
		Signed            json.RawMessage `json:"signed"`
	}
	if err := airlock.DecodeObject(data, &w); err != nil {
		return nil, fmt.Errorf("passkey: %w", err)
	}
	var s wireSigned
	if err := airlock.DecodeObject(w.Signed, &s); err != nil {
		return nil, fmt.Errorf("passkey: signed: %w", err)
	}
	r := &PasskeyRecord{RPID: w.RPID, Signed: passkey.Signed{RequestID: s.RequestID, ArgsDigest: s.ArgsDigest,
		Status: airlock.State(s.Status), ValidFor: s.ValidFor, Note: s.Note}}
	for _, f := range []struct {
		name string
		in   string
		out  *[]byte
	}{{"credential_id", w.CredentialID, &r.Assertion.CredentialID}, {"public_key", w.PublicKey, &r.PublicKey},
		{"authenticator_data", w.AuthenticatorData, &r.Assertion.AuthenticatorData},
		{"client_data_json", w.ClientDataJSON, &r.Assertion.ClientDataJSON}, {"signature", w.Signature, &r.Assertion.Signature}} {
		b, err := base64.RawURLEncoding.Strict().DecodeString(f.in)
		if err != nil {
			return nil, fmt.Errorf("passkey: %s is not unpadded base64url", f.name)
		}
		*f.out = b
	}
	return r, nil
}

// VerifyPasskey checks r against the leaf it is beside: that it signs
// this leaf's decision — its request, its status (a request.voted leaf is
// an approving vote; request.approved and request.denied are the
// decision), and the arguments digest the leaf holds — and that the
// assertion verifies with the record's public key over the challenge
// recomputed from the signed fields (passkey.SignedChallenge,
// passkey.Verify: client data of type webauthn.get over that challenge,
// the relying party's hash and the user verified in the authenticator
// data, the signature over authenticatorData ‖ SHA-256(clientDataJSON)).
// A record without the signed arguments digest (kept before it was)
// takes the leaf's: then the signature says whether it was signed. A
// record without a public key is ErrPasskeyKeyUnknown.
func VerifyPasskey(l Leaf, r PasskeyRecord) error {
	s := r.Signed
	if l.RequestID == "" || s.RequestID != l.RequestID {
		return fmt.Errorf("the passkey signed request %q, not this leaf's %q", airlock.Clip(s.RequestID), l.RequestID)
	}
	switch l.Type {
	case airlock.EventRequestApproved, airlock.EventRequestDenied:
		if s.Status != l.State {
			return fmt.Errorf("the passkey signed the status %q, and the leaf's request was %s", airlock.Clip(string(s.Status)), l.State)
		}
	case airlock.EventRequestVoted:
		if s.Status != airlock.StateApproved {
			return fmt.Errorf("the passkey signed the status %q, and the leaf is an approving vote", airlock.Clip(string(s.Status)))
		}
	default:
		return fmt.Errorf("a passkey record beside a %s leaf, which is no decision", airlock.Clip(string(l.Type)))
	}
	want := l.Payloads.Arguments
	if want == "" {
		var err error
		if want, err = DigestJSON([]byte("null")); err != nil {
			return err
		}
	}
	switch s.ArgsDigest {
	case "":
		s.ArgsDigest = want
	case want:
	default:
		return fmt.Errorf("the passkey signed the arguments digest %s, and the leaf's request has %s", airlock.Clip(s.ArgsDigest), want)
	}
	if len(r.PublicKey) == 0 {
		return ErrPasskeyKeyUnknown
	}
	if r.RPID == "" {
		return errors.New("the record names no relying party")
	}
	challenge, err := passkey.SignedChallenge(s)
	if err != nil {
		return err
	}
	return passkey.Verify(r.PublicKey, r.Assertion, challenge, r.RPID)
}
