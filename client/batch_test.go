package client_test

import (
	"context"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// TestDecideBatch: the client sends a batch and reads a result per id, in
// order: a request for each id decided, an *Error with the code for each
// refused; a batch refused as a whole is the error.
func TestDecideBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, done := b.create(t, "a", `{"amount":1}`), b.create(t, "b", `{"amount":2}`)
	if _, err := b.reviewer.Deny(ctx, done.ID, "no"); err != nil {
		t.Fatal(err)
	}
	got, err := b.reviewer.DecideBatch(ctx, client.BatchDecisionInput{IDs: []string{a.ID, done.ID}, Status: airlock.StateApproved, Note: "both", ValidFor: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != a.ID || got[0].Err != nil || got[0].Request == nil || got[0].Request.State != airlock.StateApproved ||
		got[0].Request.Decision.Note != "both" {
		t.Fatalf("first result %+v", got[0])
	}
	if got[1].ID != done.ID || got[1].Request != nil || got[1].Err == nil || got[1].Err.Code != airlock.CodeNotPending ||
		got[1].Err.State != airlock.StateDenied || got[1].Err.Status != 409 || airlock.ErrorCode(got[1].Err) != airlock.CodeNotPending {
		t.Fatalf("second result %+v (%v)", got[1], got[1].Err)
	}
	_, err = b.reviewer.DecideBatch(ctx, client.BatchDecisionInput{IDs: []string{a.ID, a.ID}, Status: airlock.StateDenied})
	if !client.IsCode(err, airlock.CodeInvalidRequest) {
		t.Fatalf("an id twice: %v", err)
	}
	if _, err := b.agent.DecideBatch(ctx, client.BatchDecisionInput{IDs: []string{a.ID}, Status: airlock.StateDenied}); !client.IsCode(err, airlock.CodeForbidden) {
		t.Fatalf("an agent's batch: %v", err)
	}
}
