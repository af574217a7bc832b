package mcpserver

import (
	"encoding/json"
	"fmt"
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
	hostile.EachStoreFault(t, func(t *testing.T, wrap func(store.Store) store.Store) (string, string) {
		b := setupWith(t, func(db *sqlite.Store) store.Store { return wrap(db) })
		if _, err := b.svc.CreateGrant(t.Context(), b.reviewer, airlock.GrantInput{
			Tool: "Bash", Arguments: json.RawMessage(`{"command":"rm -rf /"}`), Agent: b.agent.ID, ExpiresIn: "1h",
		}); err != nil {
			t.Fatal(err)
		}
		var progress atomic.Int64
		out := prompt(t, b.promptClient(t, &progress), `{"tool_name":"Bash","input":{"command":"rm -rf /"},"tool_use_id":"toolu_1"}`)
		if out["behavior"] != "allow" && out["behavior"] != "deny" {
			t.Errorf("answer %v, want allow or the fallback deny", out)
		}
		return fmt.Sprint(out["behavior"]), fmt.Sprint(out["message"])
	})
}
