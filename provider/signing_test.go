package provider

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/store"
)

func TestSigningKeys(t *testing.T) {
	b := setup(t, options{})
	b.svc.keys.delay = DefaultKeyActivationDelay
	ctx := t.Context()
	if err := b.svc.LoadSigningKeys(ctx); err != nil {
		t.Fatal(err)
	}
	first := b.signer(t)
	// A second start, as another replica, signs with the same key.
	if err := b.svc.LoadSigningKeys(ctx); err != nil || b.signer(t).ID != first.ID {
		t.Fatalf("second load: %v, key %s; want %s", err, b.signer(t), first)
	}
	pub, err := b.svc.PublicKeys(ctx)
	if err != nil || len(pub) != 1 || pub[0].KeyID != first.ID || !pub[0].IsPublic() {
		t.Fatalf("PublicKeys = %v, %v; want the public half of %s", pub, err, first)
	}

	if _, err := b.svc.RotateSigningKey(ctx, b.reviewer); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("a reviewer's rotation: %v; want forbidden", err)
	}
	next, err := b.svc.RotateSigningKey(ctx, b.admin)
	if err != nil {
		t.Fatal(err)
	}
	if next.ID == first.ID || next.Seed != nil || !next.ActivatesAt.Equal(epoch.Add(DefaultKeyActivationDelay)) {
		t.Fatalf("rotation gave %s (seed served: %v) signing from %s; want a new key, signing %s from now", next, next.Seed != nil, next.ActivatesAt, DefaultKeyActivationDelay)
	}
	// The new key is published at once and signs only from its
	// activation; the old one signs until then.
	if pub, err := b.svc.PublicKeys(ctx); err != nil || len(pub) != 2 || pub[0].KeyID != next.ID {
		t.Fatalf("PublicKeys after the rotation = %v, %v; want the new key published first", pub, err)
	}
	if got := b.signer(t); got.ID != first.ID {
		t.Fatalf("signing with %s before the new key's activation; want %s", got, first)
	}
	b.clock.Advance(DefaultKeyActivationDelay)
	if got := b.signer(t); got.ID != next.ID {
		t.Fatalf("signing with %s after the new key's activation; want %s", got, next.ID)
	}
	keys, err := b.svc.SigningKeys(ctx, b.admin)
	if err != nil || len(keys) != 2 || keys[0].ID != next.ID || keys[1].ID != first.ID {
		t.Fatalf("SigningKeys = %v, %v; want the new key, then the old", keys, err)
	}
	for _, k := range keys {
		if k.Seed != nil {
			t.Fatalf("SigningKeys serves the seed of %s", k)
		}
	}
	// The old key is published until its last token expires.
	want := epoch.Add(DefaultKeyActivationDelay + b.svc.limits.MaxApprovalValidity + approvaltoken.DefaultLeeway)
	if !keys[1].PublishedUntil.Equal(want) {
		t.Fatalf("old key published until %s; want %s", keys[1].PublishedUntil, want)
	}
	b.clock.Advance(b.svc.limits.MaxApprovalValidity + approvaltoken.DefaultLeeway + time.Microsecond)
	// (the clock is already DefaultKeyActivationDelay past the rotation)
	if pub, err := b.svc.PublicKeys(ctx); err != nil || len(pub) != 1 || pub[0].KeyID != next.ID {
		t.Fatalf("PublicKeys after the old key's tokens expired = %v, %v; want only %s", pub, err, next.ID)
	}
}

func TestFixedSigningKey(t *testing.T) {
	fixed, err := approvaltoken.NewKey(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, options{signingKey: &fixed})
	ctx := t.Context()
	if pub, err := b.svc.PublicKeys(ctx); err != nil || len(pub) != 1 || pub[0].KeyID != fixed.ID {
		t.Fatalf("PublicKeys = %v, %v; want only the fixed key", pub, err)
	}
	if _, err := b.svc.RotateSigningKey(ctx, b.admin); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("rotation with a fixed key: %v; want invalid_request", err)
	}
	if stored, err := b.store.ListSigningKeys(ctx); err != nil || len(stored) != 0 {
		t.Fatalf("a fixed key stored keys: %v, %v", stored, err)
	}
}

// signer is the key the service signs with now.
func (b *bundle) signer(t *testing.T) approvaltoken.Key {
	t.Helper()
	k, err := b.svc.activeKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keySet is the service's public key set, as GET /.well-known/jwks.json
// serves it.
func (b *bundle) keySet(t *testing.T) *approvaltoken.KeySet {
	t.Helper()
	pub, err := b.svc.PublicKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return approvaltoken.NewKeySet(pub...)
}

// TestClaimSignsAnApprovalToken: the claim's answer carries a token that
// verifies for exactly the approved call, naming the reviewer; it is not
// stored, and a second claim gets none.
func TestClaimSignsAnApprovalToken(t *testing.T) {
	b := setup(t, options{})
	b.svc.SetIssuer("https://airlock.example")
	r := b.create(t, "10m")
	b.approve(t, r.ID)
	claimed, err := b.svc.Claim(t.Context(), b.agent, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	token := claimed.Execution.ApprovalToken
	args := []byte(`{"currency":"GBP","amount":4900.0,"payment_id":"payment_123"}`) // the same value, respelt
	c, err := b.keySet(t).Verify(token, approvaltoken.Expect{Tool: "issue_refund", Args: args, Now: epoch})
	if err != nil {
		t.Fatalf("the claim's token does not verify: %v", err)
	}
	approved := b.stored(t, r.ID)
	if c.Issuer != "https://airlock.example" || c.Subject != r.ID || c.InstanceID != b.inst.ID || c.DecisionSource != approvaltoken.SourceHuman ||
		c.Expiry != approved.Decision.ExpiresAt.Unix() || c.IssuedAt != epoch.Unix() || len(c.DecidedBy) != 1 || c.DecidedBy[0].Principal != b.reviewer.ID {
		t.Fatalf("claims %+v; want iss, sub, instance, a human decider (%s) and the approval's expiry %s", c, b.reviewer.ID, approved.Decision.ExpiresAt)
	}
	if approved.Execution.ApprovalToken != "" {
		t.Fatal("the token was stored")
	}
	if _, err := b.keySet(t).Verify(token, approvaltoken.Expect{Tool: "issue_refund", Args: []byte(`{"currency":"GBP","amount":4901,"payment_id":"payment_123"}`), Now: epoch}); err == nil {
		t.Fatal("the token verifies for other arguments")
	}
	if again, err := b.svc.Claim(t.Context(), b.agent, r.ID); err == nil || again.Execution != nil && again.Execution.ApprovalToken != "" {
		t.Fatalf("a second claim: %v with token %v; want already_executed and no token", err, again.Execution)
	}
}

// TestRotatedKeyNeverSignsAgain: a rotation made by another replica (here,
// straight in the store) reaches this one's view within KeyRefresh, long
// before the new key's window opens, so from that instant every claim
// signs with the new key and none with the old.
func TestRotatedKeyNeverSignsAgain(t *testing.T) {
	b := setup(t, options{})
	ctx := t.Context()
	if err := b.svc.LoadSigningKeys(ctx); err != nil {
		t.Fatal(err)
	}
	loaded := b.signer(t).ID
	next, err := approvaltoken.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.RotateSigningKey(ctx, storedKey(next), DefaultKeyActivationDelay, time.Hour, "tok_other_replica"); err != nil {
		t.Fatal(err)
	}
	kidOfClaim := func() string {
		t.Helper()
		r := b.create(t, "10m")
		b.approve(t, r.ID)
		claimed, err := b.svc.Claim(ctx, b.agent, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.keySet(t).Verify(claimed.Execution.ApprovalToken, approvaltoken.Expect{Tool: "issue_refund", Args: call("").Arguments, Now: b.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		kid, err := approvaltoken.KeyIDOf(claimed.Execution.ApprovalToken)
		if err != nil {
			t.Fatal(err)
		}
		return kid
	}
	if kid := kidOfClaim(); kid != loaded {
		t.Fatalf("before the switch the token is signed by %s; want the old key %s", kid, loaded)
	}
	// A view read just before the switch still holds the rotation.
	b.clock.Advance(DefaultKeyActivationDelay - KeyRefresh/2)
	if kid := kidOfClaim(); kid != loaded {
		t.Fatalf("just before the switch the token is signed by %s; want the old key %s", kid, loaded)
	}
	b.clock.Advance(KeyRefresh / 2)
	for range 3 {
		if kid := kidOfClaim(); kid != next.ID {
			t.Fatalf("after the switch the token is signed by %s; want the rotated-in key %s", kid, next.ID)
		}
		b.clock.Advance(time.Second)
	}
}

// TestTokenNamesTheInstanceAudience: an instance registered with a
// token_audience gets tokens with that aud, which a verifier expecting
// no audience refuses.
func TestTokenNamesTheInstanceAudience(t *testing.T) {
	b := setup(t, options{})
	ctx := t.Context()
	inst, err := b.svc.RegisterInstance(ctx, b.agent, airlock.InstanceInput{Name: "gate", TokenAudience: "https://tools.example"})
	if err != nil {
		t.Fatal(err)
	}
	b.inst = inst
	r := b.create(t, "10m")
	b.approve(t, r.ID)
	claimed, err := b.svc.Claim(ctx, b.agent, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := approvaltoken.Expect{Tool: "issue_refund", Args: call("").Arguments, Audience: "https://tools.example", Now: epoch}
	c, err := b.keySet(t).Verify(claimed.Execution.ApprovalToken, want)
	if err != nil || c.Audience != "https://tools.example" {
		t.Fatalf("aud %q, %v; want the instance's token_audience", c.Audience, err)
	}
	want.Audience = ""
	if _, err := b.keySet(t).Verify(claimed.Execution.ApprovalToken, want); !errors.Is(err, approvaltoken.ErrAudience) {
		t.Fatalf("verified without an audience: %v; want ErrAudience", err)
	}
}

// TestQuorumTokenNamesEveryApprover: a quorum's token names each approving
// vote; a grant's names the grant as its source.
func TestQuorumTokenNamesEveryApprover(t *testing.T) {
	b := quorumSetup(t, options{})
	ctx := t.Context()
	dave := b.mint(t, airlock.RoleReviewer, "dave")
	r := b.create(t, "10m")
	for _, c := range []airlock.Caller{dave, b.reviewer} {
		if _, err := b.svc.Decide(ctx, c, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := b.svc.Claim(ctx, b.agent, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.keySet(t).Verify(claimed.Execution.ApprovalToken, approvaltoken.Expect{Tool: "issue_refund", Args: call("").Arguments, Now: epoch})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.DecidedBy) != 2 || c.DecidedBy[0].Principal != "dave" || c.DecidedBy[1].Principal != "bob" || c.DecidedBy[0].Name == "" {
		t.Fatalf("decided_by %+v; want dave's and bob's votes, named", c.DecidedBy)
	}
}

// TestSetApprovalTokens: with approval tokens off (airlock bench's switch)
// a claim answers without a token; turned back on, the next claim has one.
func TestSetApprovalTokens(t *testing.T) {
	b := setup(t, options{})
	claim := func() airlock.Request {
		t.Helper()
		r := b.create(t, "10m")
		b.approve(t, r.ID)
		claimed, err := b.svc.Claim(t.Context(), b.agent, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if claimed.Execution == nil || claimed.Execution.Status != airlock.ExecClaimed {
			t.Fatalf("claim answered execution %+v, want claimed", claimed.Execution)
		}
		return claimed
	}
	b.svc.SetApprovalTokens(false)
	if off := claim(); off.Execution.ApprovalToken != "" {
		t.Fatalf("with tokens off the claim answered token %q, want none", off.Execution.ApprovalToken)
	}
	b.svc.SetApprovalTokens(true)
	on := claim()
	if _, err := b.keySet(t).Verify(on.Execution.ApprovalToken, approvaltoken.Expect{Tool: "issue_refund", Args: call("").Arguments, Now: epoch}); err != nil {
		t.Fatalf("with tokens back on the claim's token %q does not verify: %v", on.Execution.ApprovalToken, err)
	}
}

// staleClaims is a store whose claims hand prepare a request the claim
// does not return, as a transaction that is retried hands over each
// attempt's: claimed five seconds earlier. With last, the claim then
// hands over the request it returns, as the last attempt does.
type staleClaims struct {
	store.Store
	last bool
}

func (s staleClaims) ClaimExecution(ctx context.Context, id, actor string, prepare func(airlock.Request)) (airlock.Request, error) {
	return s.Store.ClaimExecution(ctx, id, actor, func(r airlock.Request) {
		stale := r
		x := *r.Execution
		x.ClaimedAt = x.ClaimedAt.Add(-5 * time.Second)
		stale.Execution = &x
		prepare(stale)
		if s.last {
			prepare(r)
		}
	})
}

// TestEarlyTokenIsTheClaimsOwn: a claim's token is signed while the claim
// commits, from the request the store hands over, and used only when that
// is the request the claim returns: after a stale one alone, the token is
// signed again; after a stale one and then the claim's, it is the latter's.
// Either way its iat is the returned claim's.
func TestEarlyTokenIsTheClaimsOwn(t *testing.T) {
	for _, last := range []bool{false, true} {
		b := setup(t, options{wrap: func(s store.Store) store.Store { return staleClaims{Store: s, last: last} }})
		r := b.create(t, "10m")
		b.approve(t, r.ID)
		claimed, err := b.svc.Claim(t.Context(), b.agent, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.keySet(t).Verify(claimed.Execution.ApprovalToken, approvaltoken.Expect{Tool: "issue_refund", Args: call("").Arguments, Now: epoch})
		if err != nil {
			t.Fatalf("last %v: the claim's token does not verify: %v", last, err)
		}
		if c.IssuedAt != claimed.Execution.ClaimedAt.Unix() || c.Subject != r.ID {
			t.Fatalf("last %v: token iat %d for %s, want the claim's %d for %s", last, c.IssuedAt, c.Subject, claimed.Execution.ClaimedAt.Unix(), r.ID)
		}
	}
}
