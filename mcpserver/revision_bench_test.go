//go:build unix

package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCallRevision is one approval_status call over HTTP with the
// Go SDK client at each revision. cpu-ns/op is the CPU the process used
// per call: client and server share the process, so it is the pair's, and
// the ratio between revisions is what it is for.
func BenchmarkToolCallRevision(b *testing.B) {
	for _, revision := range clientRevisions {
		b.Run(revision, func(b *testing.B) {
			h := setupBench(b)
			hc := &http.Client{Transport: mcpsdk.Bearer{Token: h.secrets[h.agent.ID]}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).
				Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: hc}, sessionOptions(revision))
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != revision {
				b.Fatalf("negotiated %s, want %s", got, revision)
			}
			res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: ToolApprovalRequest, Arguments: requestArgs("bench", nil)})
			if err != nil || res.IsError {
				b.Fatalf("approval_request: %v %v", err, res)
			}
			var created struct {
				ApprovalID string `json:"approvalId"`
			}
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, &created); err != nil {
				b.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: ToolApprovalStatus, Arguments: map[string]any{"approvalId": created.ApprovalID}}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				res, err := cs.CallTool(b.Context(), params)
				if err != nil || res.IsError {
					b.Fatalf("approval_status: %v %v", err, res)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// setupBench is setupHTTP for a benchmark.
func setupBench(b *testing.B) *httpBundle {
	b.Helper()
	bb := setupWith(b, nil)
	ctx, cancel := context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.Handle("/mcp", Handler(Config{Service: bb.svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Context: ctx}))
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	b.Cleanup(cancel) // first: ends the MCP sessions
	return &httpBundle{bundle: bb, url: srv.URL + "/mcp"}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
