package mcpserver

import (
	"context"

	"github.com/airlockhq/airlock/internal/telemetry"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// traceCalls gives each tools/call a span, "tools/call <tool>"
// (docs/operations.md, "Telemetry"). Its parent is the trace context the
// client put in the call's params._meta (traceparent and tracestate, the
// MCP convention for W3C trace context), which names the agent's own
// step; without one, the HTTP request's span, itself a child of the
// request's traceparent header when it had one.
func traceCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		var name string
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
			name = p.Name
			if _, ok := p.Meta["traceparent"].(string); ok {
				ctx = telemetry.Propagator.Extract(ctx, metaCarrier(p.Meta))
			}
		}
		ctx, span := telemetry.Tracer().Start(ctx, "tools/call "+name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		res, err := next(ctx, method, req)
		if span.IsRecording() {
			span.SetAttributes(attribute.String("mcp.method.name", method), attribute.String("gen_ai.tool.name", name))
			if r, ok := res.(*mcp.CallToolResult); err != nil || (ok && r != nil && r.IsError) {
				span.SetStatus(codes.Error, "the tool call failed")
			}
		}
		return res, err
	}
}

// metaCarrier reads and writes W3C trace context in an MCP _meta object,
// whose values are JSON: only string values are trace context.
type metaCarrier mcp.Meta

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
