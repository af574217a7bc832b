package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// passkey returns a passkey of principal with a distinct ID.
func passkey(principal string, n int) airlock.Passkey {
	return airlock.Passkey{
		ID: fmt.Appendf(nil, "cred-%s-%d", principal, n), Principal: principal, TokenID: "tok_" + principal, Name: fmt.Sprintf("key %d", n),
		PublicKey: fmt.Appendf(nil, "cose-%d", n), SignCount: 7, Transports: []string{"internal", "hybrid"},
		AAGUID: bytes.Repeat([]byte{byte(n)}, 16), BackupEligible: true,
	}
}

// testPasskeys checks reviewers' passkeys and the ceremonies in progress
// (store.Passkeys).
func (s *suite) testPasskeys(t *testing.T) {
	runAll(t, []test{
		{"a passkey is stored, listed, read and deleted", s.passkeyLifecycle},
		{"a credential ID is registered once", s.passkeyOnce},
		{"a principal has at most 20 passkeys", s.passkeyLimit},
		{"a use advances the counter or is refused", s.passkeyCounter},
		{"bad passkeys are refused", s.passkeyRefused},
		{"a ceremony is taken once, while live", s.passkeyCeremonyOnce},
		{"ceremonies in progress are bounded", s.passkeyCeremoniesBounded},
		{"a signed decision keeps its assertion in its transaction", s.passkeyDecision},
		{"signed quorum votes keep one assertion each", s.passkeyVotes},
		{"a signed decision keeps its key after the passkey is deleted", s.passkeyDecisionKeepsKey},
		{"signed decisions of a page of requests", s.passkeyDecisionsOf},
	})
}

func (s *suite) passkeyLifecycle(t *testing.T) {
	b := s.setup(t)
	at := b.clock.Now().Truncate(time.Microsecond)
	a := passkey("ada", 1)
	got, err := b.store.AddPasskey(b.ctx, a)
	wantOK(t, err)
	if !bytes.Equal(got.ID, a.ID) || got.Principal != "ada" || got.TokenID != "tok_ada" || got.Name != "key 1" || !bytes.Equal(got.PublicKey, a.PublicKey) ||
		got.SignCount != 7 || !slices.Equal(got.Transports, a.Transports) || !bytes.Equal(got.AAGUID, a.AAGUID) ||
		!got.BackupEligible || got.BackupState || !got.CreatedAt.Equal(at) || got.LastUsedAt != nil {
		t.Fatalf("AddPasskey = %s", show(got))
	}
	b.clock.Advance(time.Second)
	plain := airlock.Passkey{ID: []byte("cred-plain"), Principal: "ada", PublicKey: []byte("cose")}
	second, err := b.store.AddPasskey(b.ctx, plain)
	wantOK(t, err)
	if second.Transports != nil || second.AAGUID != nil || second.Name != "" {
		t.Fatalf("a passkey without transports, AAGUID or name reads back as %s", show(second))
	}
	_, err = b.store.AddPasskey(b.ctx, passkey("bob", 1))
	wantOK(t, err)

	list, err := b.store.ListPasskeys(b.ctx, "ada")
	wantOK(t, err)
	if len(list) != 2 || show(list[0]) != show(got) || show(list[1]) != show(second) {
		t.Fatalf("ListPasskeys(ada) = %s; want the two of ada, oldest first", show(list))
	}
	read, err := b.store.Passkey(b.ctx, a.ID)
	wantOK(t, err)
	if show(read) != show(got) {
		t.Fatalf("Passkey = %s; want %s", show(read), show(got))
	}
	// Only the owner's passkey of that ID is deleted.
	if err := b.store.DeletePasskey(b.ctx, "bob", a.ID, "bob"); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("DeletePasskey of another principal's passkey = %v; want not_found", err)
	}
	wantOK(t, b.store.DeletePasskey(b.ctx, "ada", a.ID, "ada"))
	if _, err := b.store.Passkey(b.ctx, a.ID); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("Passkey after its deletion = %v; want not_found", err)
	}
	if err := b.store.DeletePasskey(b.ctx, "ada", a.ID, "ada"); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("DeletePasskey twice = %v; want not_found", err)
	}
	var events []string
	for _, e := range b.events(t) {
		if e.Type == airlock.EventPasskeyRegistered || e.Type == airlock.EventPasskeyDeleted {
			events = append(events, fmt.Sprintf("%s %s by %s", e.Type, e.Subject, e.Actor))
		}
	}
	id, plainID, bobID := airlock.PasskeyIDString(a.ID), airlock.PasskeyIDString(plain.ID), airlock.PasskeyIDString(passkey("bob", 1).ID)
	if want := []string{"passkey.registered " + id + " by ada", "passkey.registered " + plainID + " by ada",
		"passkey.registered " + bobID + " by bob", "passkey.deleted " + id + " by ada"}; !slices.Equal(events, want) {
		t.Fatalf("events %q; want %q", events, want)
	}
}

func (s *suite) passkeyOnce(t *testing.T) {
	b := s.setup(t)
	a := passkey("ada", 1)
	_, err := b.store.AddPasskey(b.ctx, a)
	wantOK(t, err)
	// The same credential registered by anyone else is refused, and
	// changes nothing.
	stolen := a
	stolen.Principal, stolen.PublicKey = "mallory", []byte("other key")
	_, err = b.store.AddPasskey(b.ctx, stolen)
	if e, ok := err.(*airlock.Error); !ok || e.Code != airlock.CodeInvalidRequest || e.Field != "credential_id" {
		t.Fatalf("AddPasskey of a stored credential ID = %v; want invalid_request on credential_id", err)
	}
	read, err := b.store.Passkey(b.ctx, a.ID)
	wantOK(t, err)
	if read.Principal != "ada" || !bytes.Equal(read.PublicKey, a.PublicKey) {
		t.Fatalf("the stored passkey became %s", show(read))
	}
}

func (s *suite) passkeyLimit(t *testing.T) {
	b := s.setup(t)
	for n := range airlock.MaxPasskeysPerPrincipal {
		_, err := b.store.AddPasskey(b.ctx, passkey("ada", n))
		wantOK(t, err)
	}
	_, err := b.store.AddPasskey(b.ctx, passkey("ada", 99))
	if e, ok := err.(*airlock.Error); !ok || e.Code != airlock.CodeInvalidRequest || e.Field != "passkeys" {
		t.Fatalf("AddPasskey beyond the limit = %v; want invalid_request on passkeys", err)
	}
	_, err = b.store.AddPasskey(b.ctx, passkey("bob", 99))
	wantOK(t, err)
}

func (s *suite) passkeyCounter(t *testing.T) {
	b := s.setup(t)
	a := passkey("ada", 1)
	_, err := b.store.AddPasskey(b.ctx, a)
	wantOK(t, err)
	b.clock.Advance(time.Minute)
	at := b.clock.Now().Truncate(time.Microsecond)
	used, err := b.store.UsePasskey(b.ctx, a.ID, 8)
	wantOK(t, err)
	if used.SignCount != 8 || used.LastUsedAt == nil || !used.LastUsedAt.Equal(at) {
		t.Fatalf("UsePasskey = %s; want count 8 used at %s", show(used), at)
	}
	for _, n := range []uint32{8, 5, 0} {
		if _, err := b.store.UsePasskey(b.ctx, a.ID, n); airlock.ErrorCode(err) != airlock.CodeUnauthorized {
			t.Fatalf("UsePasskey with counter %d after 8 = %v; want unauthorized", n, err)
		}
	}
	// Of uses racing with one counter value, one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			_, err := b.store.UsePasskey(b.ctx, a.ID, 9)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
			} else if airlock.ErrorCode(err) != airlock.CodeUnauthorized {
				t.Errorf("UsePasskey: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d of 8 uses with counter 9 won; want 1", wins)
	}
	// An authenticator that counts nothing is used again and again.
	zero := passkey("ada", 2)
	zero.SignCount = 0
	_, err = b.store.AddPasskey(b.ctx, zero)
	wantOK(t, err)
	for range 2 {
		if _, err := b.store.UsePasskey(b.ctx, zero.ID, 0); err != nil {
			t.Fatalf("UsePasskey(0) of a passkey counting nothing: %v", err)
		}
	}
	if _, err := b.store.UsePasskey(b.ctx, []byte("nothing"), 3); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("UsePasskey of no passkey = %v; want not_found", err)
	}
}

func (s *suite) passkeyRefused(t *testing.T) {
	b := s.setup(t)
	good := passkey("ada", 1)
	for name, mod := range map[string]func(p *airlock.Passkey){
		"no ID":          func(p *airlock.Passkey) { p.ID = nil },
		"a long ID":      func(p *airlock.Passkey) { p.ID = make([]byte, 1024) },
		"no principal":   func(p *airlock.Passkey) { p.Principal = "" },
		"no key":         func(p *airlock.Passkey) { p.PublicKey = nil },
		"a long name":    func(p *airlock.Passkey) { p.Name = string(bytes.Repeat([]byte("n"), 65)) },
		"a short AAGUID": func(p *airlock.Passkey) { p.AAGUID = []byte{1} },
		"a comma":        func(p *airlock.Passkey) { p.Transports = []string{"usb,nfc"} },
	} {
		p := good
		mod(&p)
		if _, err := b.store.AddPasskey(b.ctx, p); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Fatalf("AddPasskey with %s = %v; want invalid_request", name, err)
		}
	}
	if list, err := b.store.ListPasskeys(b.ctx, "ada"); err != nil || len(list) != 0 {
		t.Fatalf("refused passkeys were stored: %s, %v", show(list), err)
	}
}

func (s *suite) passkeyCeremonyOnce(t *testing.T) {
	b := s.setup(t)
	c := airlock.PasskeyCeremony{ChallengeHash: airlock.HashSecret("challenge-1"), Kind: airlock.CeremonyRegister,
		Principal: "ada", State: []byte(`{"challenge":"x"}`)}
	wantOK(t, b.store.PutPasskeyCeremony(b.ctx, c, 5*time.Minute, 10))
	got, err := b.store.TakePasskeyCeremony(b.ctx, c.ChallengeHash)
	wantOK(t, err)
	want := b.clock.Now().Truncate(time.Microsecond).Add(5 * time.Minute)
	if !bytes.Equal(got.ChallengeHash, c.ChallengeHash) || got.Kind != c.Kind || got.Principal != "ada" ||
		string(got.State) != string(c.State) || !got.ExpiresAt.Equal(want) {
		t.Fatalf("TakePasskeyCeremony = %s", show(got))
	}
	if _, err := b.store.TakePasskeyCeremony(b.ctx, c.ChallengeHash); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("a second TakePasskeyCeremony = %v; want not_found", err)
	}
	late := airlock.PasskeyCeremony{ChallengeHash: airlock.HashSecret("challenge-2"), Kind: airlock.CeremonySignIn, State: []byte("{}")}
	wantOK(t, b.store.PutPasskeyCeremony(b.ctx, late, 5*time.Minute, 10))
	b.clock.Advance(5 * time.Minute)
	if _, err := b.store.TakePasskeyCeremony(b.ctx, late.ChallengeHash); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("TakePasskeyCeremony once over = %v; want not_found", err)
	}
	for _, bad := range []airlock.PasskeyCeremony{
		{ChallengeHash: c.ChallengeHash, Kind: airlock.CeremonyRegister, State: []byte("{}")},
		{ChallengeHash: c.ChallengeHash, Kind: "decide", State: []byte("{}")},
		{Kind: airlock.CeremonySignIn, State: []byte("{}")},
	} {
		if err := b.store.PutPasskeyCeremony(b.ctx, bad, time.Minute, 10); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Fatalf("PutPasskeyCeremony(%s) = %v; want invalid_request", show(bad), err)
		}
	}
}

func (s *suite) passkeyCeremoniesBounded(t *testing.T) {
	b := s.setup(t)
	put := func(n int) error {
		return b.store.PutPasskeyCeremony(b.ctx, airlock.PasskeyCeremony{ChallengeHash: airlock.HashSecret(fmt.Sprint("c", n)),
			Kind: airlock.CeremonySignIn, State: []byte("{}")}, time.Minute, 3)
	}
	for n := range 3 {
		wantOK(t, put(n))
	}
	if err := put(3); airlock.ErrorCode(err) != airlock.CodeUnavailable {
		t.Fatalf("a fourth ceremony with 3 live = %v; want unavailable", err)
	}
	// Once they are over they are swept, and new ones fit.
	b.clock.Advance(time.Minute)
	wantOK(t, put(4))
}

// assertion is a stand-in assertion of n: the store keeps bytes, and
// package passkey judges them.
func assertion(n int) *airlock.PasskeyAssertion {
	return &airlock.PasskeyAssertion{CredentialID: fmt.Appendf(nil, "cred-%d", n), AuthenticatorData: bytes.Repeat([]byte{byte(n)}, 37),
		ClientDataJSON: fmt.Appendf(nil, `{"type":"webauthn.get","n":%d}`, n), Signature: fmt.Appendf(nil, "sig-%d", n)}
}

func (s *suite) passkeyDecision(t *testing.T) {
	b := s.setup(t)
	r := b.create(t)
	at := b.clock.Now().Truncate(time.Microsecond)
	p := store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Note: "signed", Validity: validity, ValidFor: "10m",
		Actor: "tok_carol", Principal: "carol", Passkey: assertion(1), PasskeyPublicKey: []byte("cose-1"),
		PasskeyArgsDigest: "sha256:args-1", PasskeyRPID: "airlock.example.com"}
	got, err := b.store.Decide(b.ctx, p)
	wantOK(t, err)
	if got.State != airlock.StateApproved {
		t.Fatalf("a signed approval left the request %s", got.State)
	}
	ds, err := b.store.PasskeyDecisions(b.ctx, r.ID)
	wantOK(t, err)
	want := airlock.PasskeyDecision{RequestID: r.ID, Principal: "carol", Actor: "tok_carol", Status: airlock.StateApproved,
		ValidFor: "10m", Note: "signed", Assertion: *assertion(1), PublicKey: []byte("cose-1"), ArgsDigest: "sha256:args-1",
		RPID: "airlock.example.com", At: at}
	if len(ds) != 1 || show(ds[0]) != show(want) {
		t.Fatalf("PasskeyDecisions = %s; want %s", show(ds), show(want))
	}
	// A decision that loses keeps nothing.
	p.Passkey = assertion(2)
	if _, err := b.store.Decide(b.ctx, p); airlock.ErrorCode(err) != airlock.CodeNotPending {
		t.Fatalf("a second signed decision = %v; want not_pending", err)
	}
	// An unsigned decision keeps none; a bad assertion is refused.
	other := b.create(t)
	_, err = b.store.Decide(b.ctx, store.DecideParams{ID: other.ID, Status: airlock.StateDenied, Actor: "tok_carol", Principal: "carol"})
	wantOK(t, err)
	bad := b.create(t)
	_, err = b.store.Decide(b.ctx, store.DecideParams{ID: bad.ID, Status: airlock.StateDenied, Actor: "tok_carol", Principal: "carol",
		Passkey: &airlock.PasskeyAssertion{CredentialID: []byte("c")}})
	if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("a decision with a truncated assertion = %v; want invalid_request", err)
	}
	for _, id := range []string{r.ID, other.ID, bad.ID} {
		ds, err := b.store.PasskeyDecisions(b.ctx, id)
		wantOK(t, err)
		if n := map[string]int{r.ID: 1}[id]; len(ds) != n {
			t.Fatalf("request %s has %d signed decisions; want %d", id, len(ds), n)
		}
	}
}

func (s *suite) passkeyVotes(t *testing.T) {
	b := s.setup(t)
	r := b.create(t, quorum(2))
	sign := func(principal string, n int) error {
		_, err := b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: validity, ValidFor: "10m",
			Note: "vote of " + principal, Actor: "tok_" + principal, Principal: principal, Groups: []string{"payments"}, Passkey: assertion(n)})
		return err
	}
	wantOK(t, sign("ada", 1))
	// Her second vote is refused as a duplicate, and keeps nothing.
	if err := sign("ada", 2); airlock.ErrorCode(err) != airlock.CodeInvalidRequest && airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("a second signed vote of one principal = %v; want it refused", err)
	}
	wantOK(t, sign("bob", 3))
	ds, err := b.store.PasskeyDecisions(b.ctx, r.ID)
	wantOK(t, err)
	if len(ds) != 2 || ds[0].Principal != "ada" || string(ds[0].Assertion.Signature) != "sig-1" || ds[1].Principal != "bob" || string(ds[1].Assertion.Signature) != "sig-3" {
		t.Fatalf("PasskeyDecisions = %s; want ada's first vote and bob's", show(ds))
	}
}

func (s *suite) passkeyDecisionKeepsKey(t *testing.T) {
	b := s.setup(t)
	pk, err := b.store.AddPasskey(b.ctx, passkey("carol", 1))
	wantOK(t, err)
	r := b.create(t)
	a := &airlock.PasskeyAssertion{CredentialID: pk.ID, AuthenticatorData: bytes.Repeat([]byte{1}, 37),
		ClientDataJSON: []byte(`{"type":"webauthn.get"}`), Signature: []byte("sig")}
	_, err = b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateDenied, Actor: "tok_carol", Principal: "carol",
		Passkey: a, PasskeyPublicKey: pk.PublicKey, PasskeyArgsDigest: "sha256:d", PasskeyRPID: "localhost"})
	wantOK(t, err)
	wantOK(t, b.store.DeletePasskey(b.ctx, "carol", pk.ID, "carol"))
	ds, err := b.store.PasskeyDecisions(b.ctx, r.ID)
	wantOK(t, err)
	if len(ds) != 1 || !bytes.Equal(ds[0].PublicKey, pk.PublicKey) || ds[0].ArgsDigest != "sha256:d" || ds[0].RPID != "localhost" {
		t.Fatalf("after the passkey is deleted, PasskeyDecisions = %s; want its key %q kept", show(ds), pk.PublicKey)
	}
}

func (s *suite) passkeyDecisionsOf(t *testing.T) {
	b := s.setup(t)
	one, two, unsigned := b.create(t), b.create(t, quorum(2)), b.create(t)
	decide := func(id, principal string, status airlock.State, n int) {
		t.Helper()
		_, err := b.store.Decide(b.ctx, store.DecideParams{ID: id, Status: status, Validity: validity, Actor: "tok_" + principal,
			Principal: principal, Groups: []string{"payments"}, Passkey: assertion(n), PasskeyPublicKey: fmt.Appendf(nil, "key-%d", n)})
		wantOK(t, err)
	}
	decide(one.ID, "carol", airlock.StateDenied, 1)
	decide(two.ID, "ada", airlock.StateApproved, 2)
	b.clock.Advance(time.Second)
	decide(two.ID, "bob", airlock.StateApproved, 3)
	_, err := b.store.Decide(b.ctx, store.DecideParams{ID: unsigned.ID, Status: airlock.StateDenied, Actor: "tok_carol", Principal: "carol"})
	wantOK(t, err)
	ds, err := b.store.PasskeyDecisionsOf(b.ctx, []string{two.ID, unsigned.ID, one.ID, "apr_unknown"})
	wantOK(t, err)
	var got []string
	for _, d := range ds {
		got = append(got, d.RequestID+"/"+d.Principal+"/"+string(d.PublicKey))
	}
	want := []string{two.ID + "/ada/key-2", two.ID + "/bob/key-3", one.ID + "/carol/key-1"}
	if one.ID < two.ID {
		want = []string{one.ID + "/carol/key-1", two.ID + "/ada/key-2", two.ID + "/bob/key-3"}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("PasskeyDecisionsOf = %q; want %q", got, want)
	}
	if ds, err := b.store.PasskeyDecisionsOf(b.ctx, nil); err != nil || len(ds) != 0 {
		t.Fatalf("PasskeyDecisionsOf(none) = %v, %v; want nothing", ds, err)
	}
	if _, err := b.store.PasskeyDecisionsOf(b.ctx, make([]string, store.MaxPasskeyDecisionsOf+1)); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("PasskeyDecisionsOf of %d requests = %v; want invalid_request", store.MaxPasskeyDecisionsOf+1, err)
	}
}
