package provider

import (
	"crypto/ecdh"
	"crypto/rand"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func pushInput(t *testing.T, endpoint string) airlock.PushSubscriptionInput {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return airlock.PushSubscriptionInput{Endpoint: endpoint,
		Keys: airlock.PushKeys{P256DH: airlock.EncodePushKey(k.PublicKey().Bytes()), Auth: airlock.EncodePushKey(auth)}}
}

// TestMayPush: a push goes to the subscriber only as a decision would be
// allowed: a live reviewer token in the request's group, never the
// creator's principal, never an admin, never a revoked token; an OIDC
// reviewer by the groups of their last sign-in, until an admin ends
// their sessions.
func TestMayPush(t *testing.T) {
	t.Parallel()
	b := quorumSetup(t, options{})
	ctx := t.Context()
	routed := b.create(t, "10m") // issue_refund: for payments
	open := routed
	open.Reviewers = nil
	subscribe := func(c airlock.Caller) airlock.Endpoint {
		t.Helper()
		s, err := b.svc.CreatePushSubscription(ctx, c, pushInput(t, "https://push.example.test/"+airlock.NewID("s_")))
		if err != nil {
			t.Fatal(err)
		}
		e, err := b.store.GetEndpoint(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	may := func(e airlock.Endpoint, r airlock.Request) bool {
		t.Helper()
		ok, err := b.svc.MayPush(ctx, e, r)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	dave, frank := b.mint(t, airlock.RoleReviewer, "dave"), b.mint(t, airlock.RoleReviewer, "frank")
	ed, ef, eself, eadmin := subscribe(dave), subscribe(frank), subscribe(b.selfReviewer), subscribe(b.admin)
	for _, tc := range []struct {
		name string
		e    airlock.Endpoint
		r    airlock.Request
		want bool
	}{
		{"dave, in payments, a request for payments", ed, routed, true},
		{"frank, not in payments, a request for payments", ef, routed, false},
		{"frank, a request routed to no group", ef, open, true},
		{"the reviewer of the agent's own principal", eself, open, false},
		{"an admin", eadmin, open, false},
	} {
		if got := may(tc.e, tc.r); got != tc.want {
			t.Errorf("%s: MayPush = %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := b.svc.RevokeToken(ctx, b.admin, dave.ID); err != nil {
		t.Fatal(err)
	}
	if may(ed, routed) {
		t.Error("a revoked reviewer token is still pushed to")
	}

	// An OIDC reviewer: groups from their sign-in; none after an admin
	// ended their sessions.
	olga := airlock.ReviewerIdentity{Principal: "oidc:https://idp.example#olga", Name: "Olga", Groups: []string{"payments"}}
	if _, _, err := b.svc.StartOIDCWebSession(ctx, olga, time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	eo := subscribe(oidcCaller(airlock.WebSession{Principal: olga.Principal, Name: olga.Name, Groups: olga.Groups}))
	if !may(eo, routed) {
		t.Error("an OIDC reviewer in payments is not pushed a request for payments")
	}
	if b.clock != nil {
		b.clock.Advance(time.Second)
	}
	if _, err := b.svc.EndReviewerSessions(ctx, b.admin, olga.Principal); err != nil {
		t.Fatal(err)
	}
	if may(eo, routed) {
		t.Error("an OIDC reviewer whose sessions were ended is still pushed to")
	}
}
