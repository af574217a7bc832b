package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/client"
)

// A tool server with no Airlock token verifies the claim's approval token
// against the server's published keys: the approved call passes (in any
// JSON spelling), another call does not, and a replay cache runs it once.
func TestVerifyApprovalToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.approved(t, "verify")
	claimed, err := b.agent.ClaimExecution(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	token := claimed.Execution.ApprovalToken
	tool := b.client(t, "") // the tool server: no Airlock token of its own
	c, err := tool.VerifyApprovalToken(ctx, token, client.VerifyInput{Tool: "issue_refund", Args: []byte(`{ "amount": 4900.0 }`)})
	if err != nil || c.Subject != r.ID {
		t.Fatalf("VerifyApprovalToken = %+v, %v; want the claims of %s", c, err, r.ID)
	}
	for _, tc := range []struct {
		name string
		in   client.VerifyInput
		want error
	}{
		{"another tool", client.VerifyInput{Tool: "issue_refunds", Args: []byte(`{"amount":4900}`)}, approvaltoken.ErrTool},
		{"other arguments", client.VerifyInput{Tool: "issue_refund", Args: []byte(`{"amount":4901}`)}, approvaltoken.ErrArgs},
		{"an audience it does not name", client.VerifyInput{Tool: "issue_refund", Args: []byte(`{"amount":4900}`), Audience: "tools.example"}, approvaltoken.ErrAudience},
	} {
		if _, err := tool.VerifyApprovalToken(ctx, token, tc.in); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
	replay := approvaltoken.NewReplayCache(16)
	in := client.VerifyInput{Tool: "issue_refund", Args: []byte(`{"amount":4900}`), Replay: replay}
	if _, err := tool.VerifyApprovalToken(ctx, token, in); err != nil {
		t.Fatal(err)
	}
	if _, err := tool.VerifyApprovalToken(ctx, token, in); !errors.Is(err, approvaltoken.ErrReplayed) {
		t.Fatalf("a replayed token: %v; want ErrReplayed", err)
	}
	// A token that names a key the server never published is refused
	// after one fetch of the key set.
	forged, err := approvaltoken.Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := approvaltoken.Sign(forged, *c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tool.VerifyApprovalToken(ctx, other, client.VerifyInput{Tool: "issue_refund", Args: []byte(`{"amount":4900}`)}); !errors.Is(err, approvaltoken.ErrUnknownKey) {
		t.Fatalf("a token signed by another key: %v; want ErrUnknownKey", err)
	}
}

// BenchmarkVerifyApprovalToken: verifications of one token against the
// cached key set, the path a tool server takes on every call.
func BenchmarkVerifyApprovalToken(b *testing.B) {
	bb := setup(b)
	ctx := context.Background()
	r := bb.approved(b, "bench")
	claimed, err := bb.agent.ClaimExecution(ctx, r.ID)
	if err != nil {
		b.Fatal(err)
	}
	tool := bb.client(b, "")
	in := client.VerifyInput{Tool: "issue_refund", Args: []byte(`{"amount":4900}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tool.VerifyApprovalToken(ctx, claimed.Execution.ApprovalToken, in); err != nil {
			b.Fatal(err)
		}
	}
}

// The gate hands the function it runs the claim's approval token, which
// verifies for exactly the call; outside a run there is none.
func TestGateHandsOnTheApprovalToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.gate(t, nil)
	ctx := context.Background()
	if got := client.ApprovalTokenFrom(ctx); got != "" {
		t.Fatalf("a token outside a run: %q", got)
	}
	args := []byte(`{"payment_id":"p_9","amount":100}`)
	var token string
	_, err := g.Run(ctx, client.Call{Tool: "issue_refund", Arguments: args, AttemptKey: "token-1", OnPending: b.decideOnPending(t, approve)},
		func(ctx context.Context) error { token = client.ApprovalTokenFrom(ctx); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client(t, "").VerifyApprovalToken(ctx, token, client.VerifyInput{Tool: "issue_refund", Args: args}); err != nil {
		t.Fatalf("the run's token %q: %v", token, err)
	}
}
