//go:build unix

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
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

// BenchmarkToolCallServer is the server's side of one approval_status call
// at each revision: the HTTP request the Go SDK client sent for it,
// recorded once, replayed to the /mcp handler in process. No client
// decodes the answer and no socket carries it, so cpu-ns/op is the
// server's CPU per call (with the GC its allocations cause), the figure
// docs/performance.md compares between revisions.
func BenchmarkToolCallServer(b *testing.B) {
	for _, revision := range clientRevisions {
		b.Run(revision, func(b *testing.B) {
			bb := setupWith(b, nil)
			ctx, cancel := context.WithCancel(context.Background())
			b.Cleanup(cancel) // ends the MCP sessions
			handler := Handler(Config{Service: bb.svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Context: ctx})
			srv := httptest.NewServer(handler)
			b.Cleanup(srv.Close)
			rec := &recordCall{}
			hc := &http.Client{Transport: mcpsdk.Bearer{Token: bb.secrets[bb.agent.ID], Next: rec}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).
				Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, sessionOptions(revision))
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: ToolApprovalRequest, Arguments: requestArgs("bench", nil)})
			if err != nil || res.IsError {
				b.Fatalf("approval_request: %v %v", err, res)
			}
			raw, _ := json.Marshal(res.StructuredContent)
			var created struct {
				ApprovalID string `json:"approvalId"`
			}
			if err := json.Unmarshal(raw, &created); err != nil {
				b.Fatal(err)
			}
			if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: ToolApprovalStatus, Arguments: map[string]any{"approvalId": created.ApprovalID}}); err != nil {
				b.Fatal(err)
			}
			header, body := rec.last()
			if got := header.Get(headerProtocolVersion); got != revision {
				b.Fatalf("recorded a call at %q, want %s", got, revision)
			}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
				req.Host = "127.0.0.1"
				req.Header = header.Clone()
				w := httptest.NewRecorder()
				handler.ServeHTTP(w, req)
				if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"status":"pending"`)) {
					b.Fatalf("approval_status: %d %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// recordCall is an http.RoundTripper that keeps the header and body of the
// last tools/call request it carried.
type recordCall struct {
	mu     sync.Mutex
	header http.Header
	body   []byte
}

func (rc *recordCall) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			rc.mu.Lock()
			rc.header, rc.body = r.Header.Clone(), body
			rc.mu.Unlock()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (rc *recordCall) last() (http.Header, []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.header, rc.body
}
