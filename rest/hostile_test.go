package rest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit/hostile"
	"github.com/airlockhq/airlock/store"
)

// TestHTTPHookBelievesOnlyAClaim: the HTTP hook, on a call a grant
// approves at once, answers allow only when the claim's answer is this
// request, approved, with its execution claimed; a store answering the
// claim with an empty request, another request's id, another state or no
// execution gets ask.
func TestHTTPHookBelievesOnlyAClaim(t *testing.T) {
	t.Parallel()
	hostile.EachStoreFault(t, func(t *testing.T, wrap func(store.Store) store.Store) (string, string) {
		b := setup(t, func(o *options) { o.wrapStore = wrap })
		if _, err := b.svc.CreateGrant(context.Background(), b.callers["reviewer"], airlock.GrantInput{
			Tool: "Bash", Arguments: json.RawMessage(`{"command":"npm test"}`), Agent: b.callers["agentA"].ID, ExpiresIn: "1h",
		}); err != nil {
			t.Fatal(err)
		}
		d, reason := b.hookAnswer(t, b.agentA, "?wait=5s", preToolUse("s1", "t1"))
		if d != "allow" && d != "ask" {
			t.Errorf("answer %s, want allow or the fallback ask", d)
		}
		return d, reason
	})
}
