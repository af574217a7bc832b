package gate_test

import (
	"context"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit/hostile"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGateBelievesOnlyAClaim: `airlock gate` (the real binary), asking a
// server that approves at once but breaks its answer to the create or the
// claim, never passes the call upstream and answers an error result;
// against the same server answering honestly, the call runs once.
func TestGateBelievesOnlyAClaim(t *testing.T) {
	t.Parallel()
	for _, r := range hostile.Cases(hostile.Create, hostile.Claim) {
		t.Run(r.String(), func(t *testing.T) {
			t.Parallel()
			srv := hostile.NewServer(t, r.Call, r.Fault)
			s := &server{url: srv.URL, agentSecret: "agent-token"}
			g := s.startGate(t, gateOptions{})
			res, err := g.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"note": "hostile"}})
			if err != nil {
				t.Fatalf("protocol error: %v", err)
			}
			runs := g.runs()
			if r.Fault == hostile.Honest {
				if res.IsError || len(runs) != 1 {
					t.Fatalf("honest server: result %q (error %v), runs %v", text(res), res.IsError, runs)
				}
				return
			}
			if len(runs) != 0 || !res.IsError {
				t.Fatalf("on %s to the %s: result %q (error %v), upstream ran %v", r.Fault, r.Call, text(res), res.IsError, runs)
			}
		})
	}
}
