package auditlog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/passkey"
)

// signedRecord is a record of s signed by a fresh software P-256 passkey
// for relying party "airlock.example.com".
func signedRecord(t *testing.T, s passkey.Signed) PasskeyRecord {
	t.Helper()
	challenge, err := passkey.SignedChallenge(s)
	if err != nil {
		t.Fatal(err)
	}
	soft := testkit.NewSoftPasskey(t, "cred")
	a := soft.Sign(t, "webauthn.get", challenge, "airlock.example.com", "https://airlock.example.com",
		testkit.FlagUserPresent|testkit.FlagUserVerified)
	return PasskeyRecord{Assertion: passkey.Assertion{CredentialID: soft.ID, AuthenticatorData: a.AuthenticatorData,
		ClientDataJSON: a.ClientDataJSON, Signature: a.Signature}, PublicKey: soft.COSE, RPID: "airlock.example.com", Signed: s}
}

// TestVerifyPasskey: a record verifies beside the leaf of the decision it
// signs — an approval, a denial, an approving vote, a request without
// arguments (whose digest is null's), a record kept without its digest —
// and fails beside any other leaf, for another relying party, or without
// a key (ErrPasskeyKeyUnknown).
func TestVerifyPasskey(t *testing.T) {
	args, err := DigestJSON([]byte(`{"to":"acme"}`))
	if err != nil {
		t.Fatal(err)
	}
	null, err := DigestJSON([]byte("null"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(typ airlock.EventType, state airlock.State, argsDigest string) Leaf {
		return Leaf{Type: typ, UID: "u", At: time.Unix(1, 0), Actor: "tok_carol", RequestID: "apr_1", State: state,
			Payloads: &Payloads{Tool: DigestString("t"), Arguments: argsDigest, Reasoning: DigestString("")}}
	}
	signed := func(status airlock.State, digest string) passkey.Signed {
		return passkey.Signed{RequestID: "apr_1", ArgsDigest: digest, Status: status, ValidFor: "10m", Note: "ok"}
	}
	approval := signedRecord(t, signed(airlock.StateApproved, args))
	for _, tc := range []struct {
		name string
		leaf Leaf
		rec  PasskeyRecord
		want string // "" passes
	}{
		{"an approval", leaf(airlock.EventRequestApproved, airlock.StateApproved, args), approval, ""},
		{"a denial", leaf(airlock.EventRequestDenied, airlock.StateDenied, args), signedRecord(t, signed(airlock.StateDenied, args)), ""},
		{"an approving vote", leaf(airlock.EventRequestVoted, airlock.StatePending, args), approval, ""},
		{"a request without arguments", leaf(airlock.EventRequestApproved, airlock.StateApproved, ""), signedRecord(t, signed(airlock.StateApproved, null)), ""},
		{"a record kept without its digest", leaf(airlock.EventRequestApproved, airlock.StateApproved, args),
			func() PasskeyRecord { r := approval; r.Signed.ArgsDigest = ""; return r }(), ""},
		{"beside a denial", leaf(airlock.EventRequestDenied, airlock.StateDenied, args), approval, "status"},
		{"a denial beside a vote", leaf(airlock.EventRequestVoted, airlock.StatePending, args), signedRecord(t, signed(airlock.StateDenied, args)), "approving vote"},
		{"beside another request's leaf", func() Leaf {
			l := leaf(airlock.EventRequestApproved, airlock.StateApproved, args)
			l.RequestID = "apr_2"
			return l
		}(), approval, "signed request"},
		{"beside other arguments", leaf(airlock.EventRequestApproved, airlock.StateApproved, null), approval, "arguments digest"},
		{"a record kept without its digest, beside other arguments", leaf(airlock.EventRequestApproved, airlock.StateApproved, null),
			func() PasskeyRecord { r := approval; r.Signed.ArgsDigest = ""; return r }(), "challenge"},
		{"beside a creation", leaf(airlock.EventRequestCreated, airlock.StatePending, args), approval, "no decision"},
		{"another relying party", leaf(airlock.EventRequestApproved, airlock.StateApproved, args),
			func() PasskeyRecord { r := approval; r.RPID = "evil.example"; return r }(), "relying party"},
		{"no relying party", leaf(airlock.EventRequestApproved, airlock.StateApproved, args),
			func() PasskeyRecord { r := approval; r.RPID = ""; return r }(), "relying party"},
		{"a valid_for changed", leaf(airlock.EventRequestApproved, airlock.StateApproved, args),
			func() PasskeyRecord { r := approval; r.Signed.ValidFor = "1h"; return r }(), "challenge"},
	} {
		err := VerifyPasskey(tc.leaf, tc.rec)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: VerifyPasskey = %v; want %q", tc.name, err, tc.want)
		}
	}
	noKey := approval
	noKey.PublicKey = nil
	if err := VerifyPasskey(leaf(airlock.EventRequestApproved, airlock.StateApproved, args), noKey); !errors.Is(err, ErrPasskeyKeyUnknown) {
		t.Errorf("a record without a key: %v; want ErrPasskeyKeyUnknown", err)
	}
}

// TestPasskeyEntries: an entry with a record is written as one JSON line
// beside its leaf, read back as itself, and verified by VerifyEntries,
// which names the index of a record that does not verify and passes one
// without a key; a malformed record is a malformed line.
func TestPasskeyEntries(t *testing.T) {
	args, err := DigestJSON([]byte(`{"to":"acme"}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := signedRecord(t, passkey.Signed{RequestID: "apr_1", ArgsDigest: args, Status: airlock.StateDenied, Note: `<b>"no"</b>`})
	tree := &MemoryTree{}
	var entries []Entry
	for i, typ := range []airlock.EventType{airlock.EventRequestCreated, airlock.EventRequestDenied} {
		state := map[int]airlock.State{0: airlock.StatePending, 1: airlock.StateDenied}[i]
		l, err := NewLeaf(airlock.Event{Type: typ, UID: fmt.Sprint("u", i), At: time.Unix(int64(i+1), 0), Actor: "tok_carol", RequestID: "apr_1", State: state},
			&Payloads{Tool: DigestString("t"), Arguments: args, Reasoning: DigestString("")})
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Append(l); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, Entry{Index: int64(i), Leaf: l})
	}
	entries[1].Passkey = &rec
	root, err := tree.Root(2)
	if err != nil {
		t.Fatal(err)
	}
	cp := Checkpoint{Origin: "o", Size: 2, Root: root}
	write := func(es []Entry) string {
		var b []byte
		for _, e := range es {
			b = AppendEntry(b, e)
		}
		return string(b)
	}
	text := write(entries)
	read := NewEntryReader(strings.NewReader(text))
	var back []Entry
	for e, err := range read.All() {
		if err != nil {
			t.Fatal(err)
		}
		back = append(back, e)
	}
	if len(back) != 2 || back[0].Passkey != nil || back[1].Passkey == nil || write(back) != text {
		t.Fatalf("read back:\n%s\nwritten:\n%s", write(back), text)
	}
	if err := VerifyEntries(NewEntryReader(strings.NewReader(text)).All(), cp, nil); err != nil {
		t.Fatalf("a true log with a record: %v", err)
	}
	bad := rec
	bad.Signed.Note = "yes"
	entries[1].Passkey = &bad
	var ve *VerifyError
	if err := VerifyEntries(NewEntryReader(strings.NewReader(write(entries))).All(), cp, nil); !errors.As(err, &ve) || ve.Index != 1 || ve.Reason != ReasonPasskey {
		t.Errorf("a record with another note: %v; want passkey at index 1", err)
	}
	unknown := rec
	unknown.PublicKey = nil
	entries[1].Passkey = &unknown
	if err := VerifyEntries(NewEntryReader(strings.NewReader(write(entries))).All(), cp, nil); err != nil {
		t.Errorf("a record without a key: %v; want it passed (the verdict counts it)", err)
	}
	for name, line := range map[string]string{
		"bad base64":     strings.Replace(text, `"signature":"`, `"signature":"=`, 1),
		"unknown member": strings.Replace(text, `"rp_id":`, `"extra":1,"rp_id":`, 1),
		"not an object":  strings.Replace(text, `,"passkey":{`, `,"passkey":[{`, 1),
	} {
		r := NewEntryReader(strings.NewReader(line))
		if _, err := r.Next(); err != nil { // the first line has no record
			t.Fatal(err)
		}
		if _, err := r.Next(); err == nil {
			t.Errorf("a record with %s: read without an error", name)
		}
	}
}

// BenchmarkVerifyPasskeyEntries verifies 1,000 JSON lines that each carry
// a passkey record, as `airlock audit verify` reads them: the strict read
// of a line with a record, the leaf parsed, the binding checked and an
// ECDSA P-256 signature verified, per record.
func BenchmarkVerifyPasskeyEntries(b *testing.B) {
	const n = 1000
	t := &testing.T{}
	args, err := DigestJSON([]byte(`{"to":"acme"}`))
	if err != nil {
		b.Fatal(err)
	}
	tree := &MemoryTree{}
	var export []byte
	for i := range n {
		id := fmt.Sprintf("apr_%d", i)
		l, err := NewLeaf(airlock.Event{Type: airlock.EventRequestApproved, UID: fmt.Sprint("u", i), At: time.Unix(int64(i+1), 0), Actor: "tok_carol",
			RequestID: id, State: airlock.StateApproved}, &Payloads{Tool: DigestString("t"), Arguments: args, Reasoning: DigestString("")})
		if err != nil {
			b.Fatal(err)
		}
		if err := tree.Append(l); err != nil {
			b.Fatal(err)
		}
		rec := signedRecord(t, passkey.Signed{RequestID: id, ArgsDigest: args, Status: airlock.StateApproved, ValidFor: "10m", Note: "checked"})
		export = AppendEntry(export, Entry{Index: int64(i), Leaf: l, Passkey: &rec})
	}
	root, err := tree.Root(n)
	if err != nil {
		b.Fatal(err)
	}
	cp := Checkpoint{Origin: "o", Size: n, Root: root}
	b.SetBytes(int64(len(export)))
	b.ResetTimer()
	for b.Loop() {
		if err := VerifyEntries(NewEntryReader(bytes.NewReader(export)).All(), cp, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
