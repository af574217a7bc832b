package gate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type deleteArgs struct {
	Path string `json:"path"`
}

// TestGateHTTPUpstream: `airlock gate --upstream-url URL --header K:V` in
// front of a real streamable-HTTP MCP server (the official Go SDK's, in
// this process): the headers reach it, a read-only tool passes, a gated
// tool runs only after approval and once, a denial never reaches it.
func TestGateHTTPUpstream(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	var deletes, reads atomic.Int64
	up := mcp.NewServer(&mcp.Implementation{Name: "http-upstream", Version: "1.0.0"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "read_file", Description: "Read a file.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in deleteArgs) (*mcp.CallToolResult, any, error) {
			reads.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents of " + in.Path}}}, nil, nil
		})
	mcp.AddTool(up, &mcp.Tool{Name: "delete_file", Description: "Delete a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in deleteArgs) (*mcp.CallToolResult, any, error) {
			deletes.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Path}}}, nil, nil
		})
	var unauthorized atomic.Int64
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer upstream-key" || r.Header.Get("X-Team") != "platform" {
			unauthorized.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	g := s.startGate(t, gateOptions{upstreamURL: hs.URL, headers: []string{"Authorization: Bearer upstream-key", "X-Team: platform"}})
	ctx := t.Context()
	tools, err := g.cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools through the gate: %v %v", tools, err)
	}
	res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/etc/motd"}})
	if err != nil || res.IsError || text(res) != "contents of /etc/motd" {
		t.Fatalf("read-only call: %v %v", res, err)
	}

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "/srv/data"}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	r := s.pending(t, "delete_file")
	if deletes.Load() != 0 {
		t.Fatal("the gated tool ran before approval")
	}
	if !strings.Contains(string(r.Context), hs.URL) {
		t.Errorf("context %s does not name the upstream URL", r.Context)
	}
	if _, err := s.reviewer.Approve(ctx, r.ID, "ok"); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res == nil || res.IsError || text(res) != "deleted /srv/data" || deletes.Load() != 1 {
		t.Fatalf("approved call: %+v, %d deletes", res, deletes.Load())
	}
	s.waitState(t, r.ID, airlock.StateApproved)

	go func() {
		res, _ := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "/"}})
		done <- res
	}()
	r = s.pending(t, "delete_file")
	if _, err := s.reviewer.Deny(ctx, r.ID, "never /"); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res == nil || !res.IsError || !strings.Contains(text(res), "never /") || deletes.Load() != 1 {
		t.Fatalf("denied call: %+v, %d deletes", res, deletes.Load())
	}
	if unauthorized.Load() != 0 {
		t.Errorf("%d requests reached the upstream without the headers", unauthorized.Load())
	}
}
