// Package telemetry turns on OpenTelemetry tracing when the standard
// OTEL_* variables ask for it (docs/operations.md, "Telemetry"), and holds
// what the server's doors share to take part in a trace: the W3C trace
// context propagator, the HTTP middleware that gives each request its
// span, its request ID and its one log line, and the tracer every package
// starts its spans with.
//
// Off, the global tracer provider stays OpenTelemetry's no-op one: a span
// costs a context and no allocation of its own, nothing is exported, and
// no goroutine or connection is made.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span Airlock starts.
const ScopeName = "github.com/airlockhq/airlock"

// Tracer returns the tracer of Airlock's spans, from the global provider:
// the no-op one unless Start turned tracing on.
func Tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(ScopeName) }

// Propagator reads and writes W3C trace context (traceparent and
// tracestate), from HTTP headers and from MCP's params._meta alike.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Config is how Start reads the environment and where it reports.
type Config struct {
	// Version is the service.version of the resource.
	Version string
	// Getenv reads a variable (default: a function that finds none, so
	// that a caller must pass os.Getenv to read the real environment).
	Getenv func(string) string
	// Logger receives export failures (default slog.Default()).
	Logger *slog.Logger
}

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT), OTEL_SDK_DISABLED is not true, and
// OTEL_TRACES_EXPORTER is not none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Start turns tracing on when the environment asks for it (Enabled): it
// installs a global tracer provider that batches spans and exports them
// over OTLP/HTTP, and returns the function that flushes and stops it,
// which serve calls on its way out. Otherwise it changes nothing and
// returns a shutdown that does nothing. The sampler (OTEL_TRACES_SAMPLER,
// default parentbased_always_on) and the batch (OTEL_BSP_*) are the SDK's
// own readings of the standard variables, from the process's environment;
// the resource (OTEL_SERVICE_NAME, default airlock;
// OTEL_RESOURCE_ATTRIBUTES) and the exporter's are read with cfg.Getenv.
func Start(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	if cfg.Getenv == nil {
		cfg.Getenv = func(string) string { return "" }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	nothing := func(context.Context) error { return nil }
	if !Enabled(cfg.Getenv) {
		return nothing, nil
	}
	if e := strings.TrimSpace(cfg.Getenv("OTEL_TRACES_EXPORTER")); e != "" && !strings.EqualFold(e, "otlp") {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: Airlock exports traces with otlp only (or none)", e)
	}
	exp, err := newExporter(cfg.Getenv)
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "airlock"), attribute.String("service.version", cfg.Version)}
	// OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME, over the defaults
	// (the SDK's WithFromEnv reads them, but from the process's
	// environment, not cfg.Getenv).
	if v := strings.TrimSpace(cfg.Getenv("OTEL_RESOURCE_ATTRIBUTES")); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, errors.New("OTEL_RESOURCE_ATTRIBUTES: an entry is not key=value")
			}
			if dv, err := url.PathUnescape(strings.TrimSpace(val)); err == nil {
				val = dv
			}
			attrs = append(attrs, attribute.String(k, val))
		}
	}
	if v := strings.TrimSpace(cfg.Getenv("OTEL_SERVICE_NAME")); v != "" {
		attrs = append(attrs, attribute.String("service.name", v))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...)) // the last of a key wins
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log := cfg.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry", "err", err) }))
	otel.SetTracerProvider(tp)
	on.Store(true)
	log.Info("tracing on", "endpoint", redactURL(exp.url))
	return func(ctx context.Context) error {
		on.Store(false)
		err := tp.Shutdown(ctx)
		otel.SetTracerProvider(noop.NewTracerProvider())
		return err
	}, nil
}

// on is whether Start turned tracing on: HTTP skips its span without it,
// unless the caller sent a trace context to keep.
var on atomic.Bool

// redactURL drops the user information and query of u, which may carry a
// credential, for logs and errors.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an unparsable URL)"
	}
	p.User, p.RawQuery, p.Fragment = nil, "", ""
	return p.String()
}

// SpanContextOf is the span context of a trace ID and span ID kept as hex
// (airlock.Event.TraceID, SpanID), as a remote, sampled one that a span
// can link to; false when they are not one.
func SpanContextOf(traceID, spanID string) (trace.SpanContext, bool) {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}), true
}
