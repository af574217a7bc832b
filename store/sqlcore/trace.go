package sqlcore

import (
	"context"
	"runtime"
	"strings"

	"github.com/airlockhq/airlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TraceOf is the trace context an event appended in a write under ctx
// keeps (airlock.Event.TraceID, SpanID): e's own when it has one, else
// that of the span ctx holds (the write's, traced), else none. A driver
// calls it where it appends events, the one place the trace context
// reaches the store: it is OpenTelemetry's convention that the current
// span travels in the context.
func TraceOf(ctx context.Context, e airlock.Event) (traceID, spanID string) {
	if e.TraceID != "" {
		return e.TraceID, e.SpanID
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// traceArgs are @trace_id and @span_id, TraceOf ctx, for the statements
// that append their own events.
func traceArgs(ctx context.Context) Args {
	traceID, spanID := TraceOf(ctx, airlock.Event{})
	return Args{{"trace_id", traceID}, {"span_id", spanID}}
}

// tracer is the store's, from the global provider (internal/telemetry):
// OpenTelemetry's no-op one unless tracing is on.
func tracer() trace.Tracer {
	return otel.GetTracerProvider().Tracer("github.com/airlockhq/airlock/store")
}

// traced is a Dialect whose writes are spans: each transaction, whatever
// Core method runs it, is one span named for that method ("store
// Decide"), a child of the call's span (a PostgreSQL write retried is one
// span); a write outside any span is not traced. Core wraps its dialect in it once,
// so no method starts a span of its own.
type traced struct{ Dialect }

// Write implements Dialect: fn runs in d's write, inside the span.
func (d traced) Write(ctx context.Context, fn func(Tx) error) error {
	if !trace.SpanFromContext(ctx).IsRecording() {
		// A write of a call not traced has no span; nor has a write of no
		// call (the expiry scheduler's sweeps, the audit log's sequencer,
		// the deliveries' bookkeeping), which would be a trace of its own
		// at every tick.
		return d.Dialect.Write(ctx, fn)
	}
	// The span is not put in the context the write runs with: the events
	// it appends keep the span of the call (the HTTP or MCP one), which a
	// later call links to, whichever way a statement appends them.
	_, span := tracer().Start(ctx, "store write", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		op := caller()
		span.SetName("store " + op)
		span.SetAttributes(attribute.String("db.operation.name", op))
	}
	err := d.Dialect.Write(ctx, fn)
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, string(airlock.ErrorCode(err)))
	}
	span.End()
	return err
}

// caller is the name of the exported Core method that called Write,
// such as "Decide": the first exported function of this package up the
// stack (helpers such as decideOnce run for several methods).
func caller() string {
	var pcs [12]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "/store/sqlcore.") {
			name := f.Function[strings.LastIndexByte(f.Function, '.')+1:]
			if name != "" && 'A' <= name[0] && name[0] <= 'Z' {
				return name
			}
		}
		if !more {
			return "write"
		}
	}
}
