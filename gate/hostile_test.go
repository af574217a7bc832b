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
	type row struct {
		call  hostile.Call
		fault hostile.Fault
	}
	rows := []row{{hostile.Claim, hostile.Honest}}
	for _, call := range []hostile.Call{hostile.Create, hostile.Claim} {
		for _, f := range hostile.Faults(call) {
			rows = append(rows, row{call, f})
		}
	}
	for _, r := range rows {
		t.Run(string(r.call)+"/"+string(r.fault), func(t *testing.T) {
			t.Parallel()
			srv := hostile.NewServer(t, r.call, r.fault)
			s := &server{url: srv.URL, agentSecret: "agent-token"}
			g := s.startGate(t, gateOptions{})
			res, err := g.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"note": "hostile"}})
			if err != nil {
				t.Fatalf("protocol error: %v", err)
			}
			runs := g.runs()
			if r.fault == hostile.Honest {
				if res.IsError || len(runs) != 1 {
					t.Fatalf("honest server: result %q (error %v), runs %v", text(res), res.IsError, runs)
				}
				return
			}
			if len(runs) != 0 || !res.IsError {
				t.Fatalf("on %s to the %s: result %q (error %v), upstream ran %v", r.fault, r.call, text(res), res.IsError, runs)
			}
		})
	}
}
