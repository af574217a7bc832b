package mcpserver

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit/hostile"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
)

// TestPromptBelievesOnlyAClaim: approval_prompt, on a call a grant
// approves at once, answers allow only when the claim's answer is this
// request, approved, with its execution claimed; a store answering the
// claim with an empty request, another request's id, another state or no
// execution gets deny.
func TestPromptBelievesOnlyAClaim(t *testing.T) {
	t.Parallel()
	for _, fault := range append([]hostile.Fault{hostile.Honest}, hostile.Empty, hostile.OtherID, hostile.OtherState, hostile.NoExecution) {
		t.Run(string(fault), func(t *testing.T) {
			t.Parallel()
			claims := new(atomic.Int64)
			b := setupWith(t, func(db *sqlite.Store) store.Store { return hostile.Store{Store: db, Fault: fault, Claims: claims} })
			if _, err := b.svc.CreateGrant(t.Context(), b.reviewer, airlock.GrantInput{
				Tool: "Bash", Arguments: json.RawMessage(`{"command":"rm -rf /"}`), Agent: b.agent.ID, ExpiresIn: "1h",
			}); err != nil {
				t.Fatal(err)
			}
			var progress atomic.Int64
			cs := b.promptClient(t, &progress)
			out := prompt(t, cs, `{"tool_name":"Bash","input":{"command":"rm -rf /"},"tool_use_id":"toolu_1"}`)
			if claims.Load() != 1 {
				t.Fatalf("%d claims, want 1 (the grant did not approve at once?); answer %v", claims.Load(), out)
			}
			if fault == hostile.Honest {
				if out["behavior"] != "allow" {
					t.Fatalf("honest claim: %v, want allow", out)
				}
				return
			}
			if out["behavior"] != "deny" || out["message"] == "" {
				t.Fatalf("on %s: %v, want deny saying why", fault, out)
			}
		})
	}
}
