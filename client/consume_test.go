package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// A tool server with a verifier token consumes the approval token it was
// handed: once, then IsAlreadyUsed with the first's time; a token that
// does not verify is invalid_token with its reason.
func TestConsumeApprovalToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.approved(t, "consume")
	claimed, err := b.agent.ClaimExecution(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	token := claimed.Execution.ApprovalToken
	tool := b.client(t, b.mint(t, "tool server", airlock.RoleVerifier, "tools").Secret)

	use, err := tool.ConsumeApprovalToken(ctx, client.ConsumeInput{Token: token, Tool: "issue_refund", Args: []byte(`{"amount": 4900.0}`)})
	if err != nil || use.RequestID != r.ID || use.JTI == "" || use.ConsumedAt.IsZero() {
		t.Fatalf("ConsumeApprovalToken = %+v, %v; want the use of %s", use, err, r.ID)
	}
	_, err = tool.ConsumeApprovalToken(ctx, client.ConsumeInput{Token: token})
	var e *client.Error
	if !client.IsAlreadyUsed(err) || !errors.As(err, &e) || e.Status != http.StatusConflict || e.ConsumedAt == nil || !e.ConsumedAt.Equal(use.ConsumedAt) {
		t.Fatalf("a second consume: %v; want already_used at %s", err, use.ConsumedAt)
	}
	if ae, ok := errors.AsType[*airlock.Error](err); !ok || ae.Code != airlock.CodeAlreadyUsed || ae.ConsumedAt == nil {
		t.Fatalf("a second consume unwraps to %+v; want the domain's already_used with its time", ae)
	}

	_, err = tool.ConsumeApprovalToken(ctx, client.ConsumeInput{Token: token[:len(token)-4] + "AAAA"})
	if !client.IsCode(err, airlock.CodeInvalidToken) || !errors.As(err, &e) || e.Reason != "signature" || client.IsAlreadyUsed(err) {
		t.Fatalf("a changed signature: %v; want invalid_token, reason signature", err)
	}
	if _, err := b.agent.ConsumeApprovalToken(ctx, client.ConsumeInput{Token: token}); !client.IsCode(err, airlock.CodeForbidden) {
		t.Fatalf("an agent consuming: %v; want forbidden", err)
	}
}

// A 2xx that does not show the use of the token sent is not believed.
func TestConsumeRefusesBadAnswers(t *testing.T) {
	t.Parallel()
	// The token's claims name request apr_1 and jti jti_1 (unverified:
	// the answer is what is checked).
	const token = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhcHJfMSIsImp0aSI6Imp0aV8xIn0.c2ln"
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, tt := range []struct{ name, body string }{
		{"empty", `{}`},
		{"no time", `{"request_id":"apr_1","jti":"jti_1"}`},
		{"another request", `{"request_id":"apr_2","jti":"jti_1","consumed_at":"` + now + `"}`},
		{"another jti", `{"request_id":"apr_1","jti":"jti_2","consumed_at":"` + now + `"}`},
		{"not JSON", `<html>ok</html>`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			c, err := client.New(srv.URL, "verifier-token")
			if err != nil {
				t.Fatal(err)
			}
			use, err := c.ConsumeApprovalToken(context.Background(), client.ConsumeInput{Token: token})
			if _, ok := errors.AsType[*client.AnswerError](err); !ok || use != nil {
				t.Fatalf("answer %s: %+v, %v; want an *AnswerError", tt.body, use, err)
			}
		})
	}
	t.Run("the use of the token sent is believed", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"request_id":"apr_1","jti":"jti_1","consumed_at":"` + now + `"}`))
		}))
		t.Cleanup(srv.Close)
		c, err := client.New(srv.URL, "verifier-token")
		if err != nil {
			t.Fatal(err)
		}
		if use, err := c.ConsumeApprovalToken(context.Background(), client.ConsumeInput{Token: token}); err != nil || use.RequestID != "apr_1" {
			t.Fatalf("%+v, %v", use, err)
		}
	})
}
