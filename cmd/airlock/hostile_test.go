package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit/hostile"
)

// TestHookBelievesOnlyAClaim: the three hooks, run as the agents run them,
// ask a server that approves at once but breaks its answer to the create
// or to the claim (an empty 200, HTML, a body cut short, another request's
// id, another state, no execution, another call). None of them answers
// allow; against the same server answering honestly, each does.
func TestHookBelievesOnlyAClaim(t *testing.T) {
	t.Parallel()
	agents := []struct{ agent, fixture string }{
		{"claude-code", "claude-code-pretooluse-bash.json"},
		{"codex", "codex-permissionrequest-bash.json"},
		{"gemini", "gemini-beforetool-shell.json"},
	}
	for _, ag := range agents {
		for _, r := range hostile.Cases(hostile.Create, hostile.Claim) {
			t.Run(ag.agent+"/"+r.String(), func(t *testing.T) {
				t.Parallel()
				srv := hostile.NewServer(t, r.Call, r.Fault)
				in, _ := payload(t, ag.fixture)
				h := &hookSrv{srv: &proc{URL: srv.URL}, agent: "agent-token"}
				run := h.hook(t, nil, in, ag.agent, "--wait", "5s")
				if run.code != 0 || !json.Valid([]byte(run.stdout)) {
					t.Fatalf("exit %d, stdout %q, stderr %s", run.code, run.stdout, run.stderr)
				}
				allowed := strings.Contains(run.stdout, `"allow"`)
				if r.Fault == hostile.Honest {
					if !allowed || srv.Claims.Load() != 1 {
						t.Fatalf("an honest approval and claim: stdout %q, %d claims; stderr %s", run.stdout, srv.Claims.Load(), run.stderr)
					}
					return
				}
				if allowed {
					t.Fatalf("answered allow on %s to the %s: %s", r.Fault, r.Call, run.stdout)
				}
				if run.stderr == "" {
					t.Errorf("the hook said nothing of why it did not allow")
				}
			})
		}
	}
}
