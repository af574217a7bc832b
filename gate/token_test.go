package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/gate"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tokens returns what the upstream recorded of the approval tokens it was
// handed, by tool, in order.
func (g *gateProc) tokens(t *testing.T) [][2]string {
	t.Helper()
	data, err := os.ReadFile(g.log + ".tokens")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for line := range strings.Lines(string(data)) {
		tool, token, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		out = append(out, [2]string{tool, token})
	}
	return out
}

// TestGateHandsOnTheApprovalToken: an approved call reaches the upstream
// with the claim's approval token in params._meta, and it verifies for
// exactly that call against the server's published keys; a call that
// needed no approval carries none, even when the client wrote one.
func TestGateHandsOnTheApprovalToken(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	g := s.startGate(t, gateOptions{})
	ctx := context.Background()

	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
	params.Meta = mcp.Meta{gate.ApprovalTokenMeta: "forged"}
	if _, err := g.cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}

	args := json.RawMessage(`{"note":"ship it"}`)
	done := make(chan error, 1)
	go func() {
		_, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: args})
		done <- err
	}()
	r := s.pending(t, "write_note")
	if _, err := s.reviewer.Approve(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	got := g.tokens(t)
	if len(got) != 2 || got[0] != [2]string{"echo", ""} || got[1][0] != "write_note" || got[1][1] == "" {
		t.Fatalf("the upstream was handed %q; want no token for echo and one for write_note", got)
	}
	res, err := testkit.Call(ctx, http.DefaultClient, http.MethodGet, s.url+"/.well-known/jwks.json", "", "")
	if err != nil {
		t.Fatal(err)
	}
	set, err := approvaltoken.ParseKeySet([]byte(res.Raw))
	if err != nil {
		t.Fatal(err)
	}
	claims, err := set.Verify(got[1][1], approvaltoken.Expect{Tool: "write_note", Args: args})
	if err != nil || claims.Subject != r.ID {
		t.Fatalf("the upstream's token: %+v, %v; want it to verify for request %s", claims, err, r.ID)
	}
}
