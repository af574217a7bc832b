package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// editOnPending approves the request with args instead, as the reviewer,
// once it is seen pending.
func (b *bundle) editOnPending(t testing.TB, args string) func(*client.ApprovalRequest) {
	var once sync.Once
	return func(r *client.ApprovalRequest) {
		once.Do(func() {
			got, err := b.reviewer.Edit(context.Background(), r.ID, json.RawMessage(args), "smaller refund", "")
			if err != nil {
				t.Errorf("edit %s: %v", r.ID, err)
				return
			}
			if got.Replacement == nil || got.Decision == nil || got.Decision.ReplacedBy != got.Replacement.ID {
				t.Errorf("edit answered %+v; want the original replaced by the replacement", got)
			}
		})
	}
}

// TestGateEdits (T37): a call a reviewer approved with changed arguments
// runs only with the gate's AcceptEdits, and then with the edited
// arguments, once, claimed on the replacement; without it, the call does
// not run and the denial names the replacement.
func TestGateEdits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	orig, edited := `{"payment_id":"p_1","amount":4900}`, `{"payment_id":"p_1","amount":1200}`

	t.Run("without AcceptEdits: denied, naming the replacement", func(t *testing.T) {
		var tool counter
		_, err := b.gate(t, nil).Run(ctx, client.Call{Tool: "issue_refund", Arguments: []byte(orig), AttemptKey: "no-edits",
			OnPending: b.editOnPending(t, edited)}, tool.run)
		var denied *client.DeniedError
		if !errors.As(err, &denied) || denied.ReplacedBy() == "" || tool.n.Load() != 0 {
			t.Fatalf("run: %v (tool ran %d times); want a denial naming the replacement", err, tool.n.Load())
		}
		if !strings.Contains(err.Error(), denied.ReplacedBy()) || !strings.Contains(err.Error(), "AcceptEdits") {
			t.Fatalf("the denial does not say what happened: %v", err)
		}
		r, err := b.agent.GetRequest(ctx, denied.ReplacedBy())
		if err != nil || r.State != airlock.StateApproved || r.Execution != nil {
			t.Fatalf("the replacement: %+v, %v; want approved, never claimed", r, err)
		}
	})

	t.Run("with AcceptEdits: the edited call runs once, with its own bytes", func(t *testing.T) {
		g := b.gate(t, nil, func(c *client.GateConfig) { c.AcceptEdits = true })
		var ran []string
		fn := func(ctx context.Context) error {
			ran = append(ran, string(client.ArgumentsFrom(ctx)))
			if client.ApprovalTokenFrom(ctx) == "" {
				t.Error("no approval token for the edited call")
			}
			return nil
		}
		call := client.Call{Tool: "issue_refund", Arguments: []byte(orig), AttemptKey: "edits", OnPending: b.editOnPending(t, edited)}
		out, err := g.Run(ctx, call, fn)
		if err != nil || len(ran) != 1 || ran[0] != edited {
			t.Fatalf("run: %v; the function ran with %q; want once with %s", err, ran, edited)
		}
		if out.Request.DerivedFrom == "" || out.Status != airlock.ExecSucceeded || out.ReportErr != nil {
			t.Fatalf("outcome %+v; want the replacement's, succeeded and reported", out)
		}
		original, err := b.agent.GetRequest(ctx, out.Request.DerivedFrom)
		if err != nil || original.State != airlock.StateDenied || original.Execution != nil || original.Decision.ReplacedBy != out.Request.ID {
			t.Fatalf("the original: %+v, %v; want denied, never claimed, replaced by %s", original, err, out.Request.ID)
		}
		// The same call again: the journal follows the edit and runs nothing.
		call.OnPending = nil
		_, err = g.Run(ctx, call, fn)
		var already *client.AlreadyExecutedError
		if !errors.As(err, &already) || len(ran) != 1 {
			t.Fatalf("second run: %v, ran %d times", err, len(ran))
		}
	})

	t.Run("agents never edit", func(t *testing.T) {
		r := b.create(t, "agent-edit", orig)
		_, err := b.agent.Edit(ctx, r.ID, json.RawMessage(edited), "", "")
		if !client.IsCode(err, airlock.CodeForbidden) {
			t.Fatalf("an agent's edit: %v; want forbidden", err)
		}
	})
}

// TestGateAdapterClaims: the gate sends the call's preview and
// reversibility, and the request carries them as given.
func TestGateAdapterClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var tool counter
	preview := &airlock.Preview{Type: airlock.PreviewDiff, Content: "-DROP TABLE users;\n+DELETE FROM users WHERE id = 7;\n"}
	out, err := b.gate(t, nil).Run(ctx, client.Call{Tool: "run_sql", Arguments: []byte(`{"sql":"DROP TABLE users"}`), AttemptKey: "claims",
		Preview: preview, Reversibility: airlock.Irreversible, OnPending: b.decideOnPending(t, approve)}, tool.run)
	if err != nil || tool.n.Load() != 1 {
		t.Fatalf("run: %v, ran %d times", err, tool.n.Load())
	}
	r, err := b.agent.GetRequest(ctx, out.Request.ID)
	if err != nil || r.Preview == nil || *r.Preview != *preview || r.Reversibility != airlock.Irreversible {
		t.Fatalf("the request's claims: %+v %q (%v)", r.Preview, r.Reversibility, err)
	}
}
