package gate_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGateRevisions: the Go SDK's client at 2026-07-28 and pinned to
// 2025-11-25, through the real gate in front of the Go SDK's server over
// stdio. The client gets the revision it offered, the upstream hears the
// same revision from the gate (with the client's name noting the gate),
// a read-only call passes and a gated one runs once, after approval.
func TestGateRevisions(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			g := s.startGate(t, gateOptions{revision: rev, clientInfo: &mcp.Implementation{Name: "rev-client", Version: "1"}})
			ctx := t.Context()
			ir := g.cs.InitializeResult()
			if ir.ProtocolVersion != rev {
				t.Fatalf("negotiated %s, want %s", ir.ProtocolVersion, rev)
			}
			if ir.ServerInfo == nil || ir.ServerInfo.Title != "Test upstream (behind airlock gate)" || ir.Instructions != "A test server." {
				t.Errorf("server info %+v, instructions %q: want the upstream's", ir.ServerInfo, ir.Instructions)
			}
			if ir.Capabilities == nil || ir.Capabilities.Tools == nil || ir.Capabilities.Prompts == nil {
				t.Errorf("capabilities %+v, want the upstream's tools and prompts", ir.Capabilities)
			}
			res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil || res.IsError || text(res) != "hi" {
				t.Fatalf("echo: %+v %v", res, err)
			}
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"note": "n1"}})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			r := s.pending(t, "write_note")
			if _, err := s.reviewer.Approve(ctx, r.ID, "ok"); err != nil {
				t.Fatal(err)
			}
			if res := <-done; res == nil || res.IsError || text(res) != "wrote n1" {
				t.Fatalf("approved call: %+v", res)
			}
			if runs := strings.Join(g.runs(), "|"); runs != "echo hi|write_note n1" {
				t.Fatalf("runs %q, want echo once and write_note once", runs)
			}
			s.waitState(t, r.ID, airlock.StateApproved)
			heard, err := os.ReadFile(g.log + ".revisions")
			if err != nil {
				t.Fatal(err)
			}
			want := "echo " + rev + " rev-client (via airlock gate)\nwrite_note " + rev + " rev-client (via airlock gate)\n"
			if string(heard) != want {
				t.Errorf("the upstream heard %q, want %q", heard, want)
			}
		})
	}
}

// TestGateRevisionFallback: a client at 2026-07-28 in front of upstreams
// that refuse it (the scripted one knows only initialize; the Go SDK's
// stateful HTTP handler serves 2026-07-28 only statelessly) and of one
// that speaks it (the stateless HTTP handler). The gate still speaks
// 2026-07-28 to its client, initializes the first two at 2025-11-25, and
// every result the client gets says it is complete.
func TestGateRevisionFallback(t *testing.T) {
	t.Parallel()
	s := newServer(t)

	t.Run("an upstream that knows only initialize", func(t *testing.T) {
		t.Parallel()
		g := s.startGate(t, gateOptions{upstream: []string{rawUpstream(t)}})
		if v := g.cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("the client negotiated %s", v)
		}
		if v := g.upstreamInit(t)["protocolVersion"]; v != "2025-11-25" {
			t.Fatalf("the upstream was initialized at %v, want 2025-11-25", v)
		}
		if _, err := g.cs.ListTools(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		res := g.wire.result(t, "tools/list")
		if !bytes.HasPrefix(res, []byte(`{"resultType":"complete","tools":[`)) {
			t.Fatalf("tools/list at 2026-07-28 from an upstream at 2025-11-25: %.80s", res)
		}
	})

	for _, stateless := range []bool{false, true} {
		name := map[bool]string{false: "a stateful HTTP upstream", true: "a stateless HTTP upstream"}[stateless]
		// A tool name of each subtest's own: they run at once against one
		// server, and each approves the pending request of its tool.
		tool := map[bool]string{false: "delete_file_stateful", true: "delete_file_stateless"}[stateless]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var heard atomic.Value
			up := mcp.NewServer(&mcp.Implementation{Name: "http-upstream", Version: "1.0.0"}, nil)
			mcp.AddTool(up, &mcp.Tool{Name: tool, Description: "Delete a file."},
				func(_ context.Context, req *mcp.CallToolRequest, in deleteArgs) (*mcp.CallToolResult, any, error) {
					heard.Store(req.Session.InitializeParams().ProtocolVersion)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Path}}}, nil, nil
				})
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
			t.Cleanup(hs.Close)
			g := s.startGate(t, gateOptions{upstreamURL: hs.URL})
			if v := g.cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
				t.Fatalf("the client negotiated %s", v)
			}
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"path": "/tmp/x"}})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			r := s.pending(t, tool)
			if _, err := s.reviewer.Approve(t.Context(), r.ID, "ok"); err != nil {
				t.Fatal(err)
			}
			if res := <-done; res == nil || res.IsError || text(res) != "deleted /tmp/x" {
				t.Fatalf("approved call: %+v", res)
			}
			want := map[bool]string{false: "2025-11-25", true: "2026-07-28"}[stateless]
			if v, _ := heard.Load().(string); v != want {
				t.Errorf("the upstream heard the call at %q, want %s", v, want)
			}
		})
	}
}
