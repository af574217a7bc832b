package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// TestGrants: an approval with a grant returns it; the grant approves the
// next same call; the client lists, reads and revokes grants.
func TestGrants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.create(t, "g1", `{"amount":4900}`)
	uses := 2
	d, err := b.reviewer.Decide(ctx, r.ID, client.DecisionInput{Status: airlock.StateApproved,
		Grant: &airlock.DecisionGrant{Uses: &uses, ExpiresIn: "1h"}})
	if err != nil || d.Grant == nil || *d.Grant.UsesLeft != 2 || d.Grant.RequestID != r.ID {
		t.Fatalf("decide with a grant: %+v %v", d, err)
	}
	next := b.create(t, "g2", `{"amount":4900}`)
	if next.State != airlock.StateApproved || next.Decision.DecidedBy != "grant:"+d.Grant.ID {
		t.Fatalf("next call: %s by %+v", next.State, next.Decision)
	}
	g, err := b.reviewer.CreateGrant(ctx, airlock.GrantInput{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount":1}`),
		InstanceID: b.instance, ExpiresIn: "10m"})
	if err != nil || g.State != airlock.GrantLive || g.Match != "same_arguments" {
		t.Fatalf("create: %+v %v", g, err)
	}
	live, err := b.reviewer.ListGrants(ctx, true, "issue_refund")
	if err != nil || len(live) != 2 || live[0].ID != g.ID || *live[1].UsesLeft != 1 {
		t.Fatalf("list: %+v %v", live, err)
	}
	if rv, err := b.reviewer.RevokeGrant(ctx, g.ID); err != nil || rv.State != airlock.GrantRevoked || rv.RevokedAt == nil {
		t.Fatalf("revoke: %+v %v", rv, err)
	}
	if got, err := b.reviewer.GetGrant(ctx, g.ID); err != nil || got.State != airlock.GrantRevoked {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := b.agent.ListGrants(ctx, false, ""); airlock.ErrorCode(err) != airlock.CodeForbidden {
		t.Fatalf("an agent lists grants: %v", err)
	}
}
