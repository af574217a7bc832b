package gate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGateEdits (T37): a reviewer approves a gated call with changed
// arguments. With --accept-edits the gate sends the reviewer's arguments
// upstream, once, and the result tells the model what changed; without
// it, the call does not run and the result names the edited request.
func TestGateEdits(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := context.Background()
	call := func(g *gateProc) (*mcp.CallToolResult, string) {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"note": "rm -rf /"}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		r := s.pending(t, "write_note")
		got, err := s.reviewer.Edit(ctx, r.ID, json.RawMessage(`{"note":"rm -rf ./tmp"}`), "only the temp dir", "")
		if err != nil || got.Replacement == nil {
			t.Fatalf("edit: %+v %v", got, err)
		}
		return <-done, got.Replacement.ID
	}

	t.Run("with --accept-edits: the reviewer's arguments run, and the model is told", func(t *testing.T) {
		g := s.startGate(t, gateOptions{rules: e2eRules, flags: []string{"--accept-edits"}})
		res, newID := call(g)
		if res == nil || res.IsError {
			t.Fatalf("edited call: %+v", res)
		}
		out := text(res)
		for _, want := range []string{"wrote rm -rf ./tmp", "approved this call with changed arguments", newID,
			`-   "note": "rm -rf /"`, `+   "note": "rm -rf ./tmp"`, "only the temp dir"} {
			if !strings.Contains(out, want) {
				t.Errorf("the result lacks %q:\n%s", want, out)
			}
		}
		if runs := g.runs(); len(runs) != 1 || runs[0] != "write_note rm -rf ./tmp" {
			t.Fatalf("upstream runs %q; want the edited call once", runs)
		}
		if r := s.waitState(t, newID, airlock.StateApproved); r.Execution == nil || r.Execution.Status != airlock.ExecSucceeded {
			t.Fatalf("the replacement's execution %+v; want succeeded", r.Execution)
		}
	})

	t.Run("without: nothing runs, the result names the edited request", func(t *testing.T) {
		g := s.startGate(t, gateOptions{rules: e2eRules})
		res, newID := call(g)
		if res == nil || !res.IsError || !strings.Contains(text(res), newID) || !strings.Contains(text(res), "--accept-edits") {
			t.Fatalf("edited call without --accept-edits: %+v", res)
		}
		if runs := g.runs(); len(runs) != 0 {
			t.Fatalf("upstream runs %q; want none", runs)
		}
	})
}
