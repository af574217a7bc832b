package passkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
)

// TestChallenge holds Challenge to the canonical JSON written out by
// hand: keys in order, the arguments' digest over their own canonical
// form, and any field changed changing the challenge.
func TestChallenge(t *testing.T) {
	d := Decision{RequestID: "apr_1", Arguments: []byte(`{"b": [2], "a": 1.0}`), Status: airlock.StateApproved, ValidFor: "10m", Note: "ok ✓"}
	args := sha256.Sum256([]byte(`{"a":1,"b":[2]}`))
	want := sha256.Sum256([]byte(`{"args_digest":"sha256:` + base64.RawURLEncoding.EncodeToString(args[:]) +
		`","note":"ok ✓","request_id":"apr_1","status":"approved","valid_for":"10m"}`))
	got, err := Challenge(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[:]) {
		t.Fatalf("Challenge = %x, want %x", got, want)
	}
	for name, change := range map[string]func(*Decision){
		"request":   func(d *Decision) { d.RequestID = "apr_2" },
		"arguments": func(d *Decision) { d.Arguments = []byte(`{"a":2,"b":[2]}`) },
		"status":    func(d *Decision) { d.Status = airlock.StateDenied },
		"valid_for": func(d *Decision) { d.ValidFor = "1h" },
		"note":      func(d *Decision) { d.Note = "ok" },
	} {
		other := d
		change(&other)
		c, err := Challenge(other)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(c, got) {
			t.Errorf("another %s has the same challenge", name)
		}
	}
	if _, err := Challenge(Decision{RequestID: "apr_1", Arguments: []byte(`{`)}); err == nil {
		t.Error("Challenge of arguments that are not JSON: no error")
	}
}

// authenticator is a software passkey (testkit.SoftPasskey) whose
// assertions come as this package's Assertion.
type authenticator struct {
	soft *testkit.SoftPasskey
	cose []byte
}

func newAuthenticator(t *testing.T) authenticator {
	soft := testkit.NewSoftPasskey(t, "cred")
	return authenticator{soft: soft, cose: soft.COSE}
}

// assert signs challenge for rpID with flags, as an authenticator does.
func (a authenticator) assert(t *testing.T, challenge []byte, rpID, typ string, flags byte) Assertion {
	t.Helper()
	s := a.soft.Sign(t, typ, challenge, rpID, "https://airlock.example.com", flags)
	return Assertion{CredentialID: a.soft.ID, AuthenticatorData: s.AuthenticatorData, ClientDataJSON: s.ClientDataJSON, Signature: s.Signature}
}

// TestVerify: an assertion over the decision's challenge verifies with
// its key; one made for another decision, another relying party, without
// user verification, of a registration, with an altered signature or
// authenticator data, or checked with another key, does not.
func TestVerify(t *testing.T) {
	a := newAuthenticator(t)
	ch, err := Challenge(Decision{RequestID: "apr_1", Arguments: []byte(`{}`), Status: airlock.StateApproved})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Challenge(Decision{RequestID: "apr_2", Arguments: []byte(`{}`), Status: airlock.StateApproved})
	const rp = "airlock.example.com"
	good := a.assert(t, ch, rp, "webauthn.get", 0x05)
	if err := Verify(a.cose, good, ch, rp); err != nil {
		t.Fatalf("a good assertion: %v", err)
	}
	if err := Verify(a.cose, good, other, rp); !errors.Is(err, ErrChallenge) {
		t.Errorf("checked against another decision's challenge: %v", err)
	}
	if err := Verify(a.cose, a.assert(t, other, rp, "webauthn.get", 0x05), ch, rp); !errors.Is(err, ErrChallenge) {
		t.Errorf("an assertion made for another decision: %v", err)
	}
	if err := Verify(a.cose, good, ch, "evil.example"); err == nil {
		t.Error("an assertion for another relying party verified")
	}
	if err := Verify(a.cose, a.assert(t, ch, rp, "webauthn.get", 0x01), ch, rp); err == nil {
		t.Error("an assertion without user verification verified")
	}
	if err := Verify(a.cose, a.assert(t, ch, rp, "webauthn.create", 0x05), ch, rp); err == nil {
		t.Error("a registration's client data verified as an assertion")
	}
	bad := good
	bad.Signature = bytes.Clone(good.Signature)
	bad.Signature[len(bad.Signature)-1] ^= 1
	if err := Verify(a.cose, bad, ch, rp); !errors.Is(err, ErrSignature) {
		t.Errorf("an altered signature: %v", err)
	}
	bad = good
	bad.AuthenticatorData = bytes.Clone(good.AuthenticatorData)
	bad.AuthenticatorData[36]++ // the counter
	if err := Verify(a.cose, bad, ch, rp); !errors.Is(err, ErrSignature) {
		t.Errorf("altered authenticator data: %v", err)
	}
	if err := Verify(newAuthenticator(t).cose, good, ch, rp); !errors.Is(err, ErrSignature) {
		t.Errorf("checked with another passkey's key: %v", err)
	}
}
