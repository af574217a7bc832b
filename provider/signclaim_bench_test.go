package provider

import (
	"testing"

	"github.com/airlockhq/airlock"
)

// BenchmarkSignClaim is what a token adds to a claim on the server: the
// active key read, the digest and the signature, for one claimed request.
func BenchmarkSignClaim(b *testing.B) {
	bd := setup(b, options{})
	ctx := b.Context()
	if err := bd.svc.LoadSigningKeys(ctx); err != nil {
		b.Fatal(err)
	}
	r, created, err := bd.svc.CreateRequest(ctx, bd.agent, bd.inst.ID, newKey(), call("10m"))
	if err != nil || !created {
		b.Fatal(err)
	}
	if _, err := bd.svc.Decide(ctx, bd.reviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		b.Fatal(err)
	}
	claimed, err := bd.svc.Claim(ctx, bd.agent, r.ID)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bd.svc.signClaim(ctx, claimed); err != nil {
			b.Fatal(err)
		}
	}
}
