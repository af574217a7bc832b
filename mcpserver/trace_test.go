package mcpserver

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceparentFromMeta: a tools/call whose params._meta carries W3C
// trace context (the MCP convention) is a span in that trace, a child of
// the span _meta names, named for the tool; the request it creates keeps
// that trace on its request.created event, and a call without _meta
// starts a trace of its own.
func TestTraceparentFromMeta(t *testing.T) {
	// Not parallel: it installs the global tracer provider.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); tp.Shutdown(context.Background()) })

	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	b := setup(t)
	cl := b.connect(t, b.agent)
	args := requestArgs("traced", nil)
	res, err := cl.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolApprovalRequest, Arguments: args,
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + spanID + "-01", "tracestate": "vendor=x"}})
	if err != nil || res.IsError {
		t.Fatalf("approval_request: %v %v", err, res)
	}
	var out map[string]any
	remarshal(t, res.StructuredContent, &out)
	id := str(out, "approvalId")
	if _, err := cl.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolApprovalStatus, Arguments: map[string]any{"approvalId": id}}); err != nil {
		t.Fatal(err)
	}

	var call, status sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "tools/call " + ToolApprovalRequest:
			call = s
		case "tools/call " + ToolApprovalStatus:
			status = s
		}
	}
	if call == nil || status == nil {
		t.Fatalf("spans %v, want one per tools/call", names(rec.Ended()))
	}
	if got := call.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("the call's span is in trace %s, want _meta's %s", got, traceID)
	}
	if got := call.Parent(); got.SpanID().String() != spanID || !got.IsRemote() || got.TraceState().Get("vendor") != "x" {
		t.Errorf("the call's parent is %v, want _meta's remote span %s with its tracestate", got, spanID)
	}
	if call.SpanKind() != trace.SpanKindServer {
		t.Errorf("the call's span is a %v, want a server span", call.SpanKind())
	}
	if status.SpanContext().TraceID().String() == traceID {
		t.Error("a call without _meta joined the trace of another call")
	}
	var inStore bool
	for _, s := range rec.Ended() {
		if s.Name() == "store CreateRequest" && s.Parent().SpanID() == call.SpanContext().SpanID() {
			inStore = true
		}
	}
	if !inStore {
		t.Errorf("no store CreateRequest span under the call; spans %v", names(rec.Ended()))
	}
	e, err := b.store.CreatedEvent(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if e.TraceID != traceID || e.SpanID != call.SpanContext().SpanID().String() {
		t.Errorf("request.created keeps trace %s span %s, want the call's, %s %s", e.TraceID, e.SpanID, traceID, call.SpanContext().SpanID())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}
