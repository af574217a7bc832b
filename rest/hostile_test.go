package rest

import (
	"context"
	"encoding/json"
	"sync/atomic"
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
	for _, fault := range []hostile.Fault{hostile.Honest, hostile.Empty, hostile.OtherID, hostile.OtherState, hostile.NoExecution} {
		t.Run(string(fault), func(t *testing.T) {
			t.Parallel()
			claims := new(atomic.Int64)
			b := setup(t, func(o *options) {
				o.wrapStore = func(s store.Store) store.Store { return hostile.Store{Store: s, Fault: fault, Claims: claims} }
			})
			if _, err := b.svc.CreateGrant(context.Background(), b.callers["reviewer"], airlock.GrantInput{
				Tool: "Bash", Arguments: json.RawMessage(`{"command":"npm test"}`), Agent: b.callers["agentA"].ID, ExpiresIn: "1h",
			}); err != nil {
				t.Fatal(err)
			}
			d, reason := b.hookAnswer(t, b.agentA, "?wait=5s", preToolUse("s1", "t1"))
			if claims.Load() != 1 {
				t.Fatalf("%d claims, want 1 (the grant did not approve at once?); answer %s %q", claims.Load(), d, reason)
			}
			if fault == hostile.Honest {
				if d != "allow" {
					t.Fatalf("honest claim: %s %q, want allow", d, reason)
				}
				return
			}
			if d != "ask" || reason == "" {
				t.Fatalf("on %s: %s %q, want ask saying why", fault, d, reason)
			}
		})
	}
}
