package telemetry

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// RequestIDHeader carries a request's ID: the client's, when sane, else
// one made here; the response echoes it either way.
const RequestIDHeader = "X-Request-Id"

// HTTP wraps the server's handler: each request gets a server span (a
// child of the caller's traceparent, when it sends one), a request ID, and
// at its end one info line in log with its method, route, status,
// duration, request ID and trace ID. The span is named, and the line
// routed, by the route pattern the muxes below matched
// (http.Request.Pattern), never by the raw path: a path holds request IDs,
// and the inbox's sign-in links hold more. Nothing of the request's
// headers, query or body is logged.
func HTTP(log *slog.Logger, next http.Handler) http.Handler {
	return &traced{log: log, next: next, tracer: Tracer}
}

// traced is HTTP's handler. A long-poll parks under its frame, so the
// frame is kept small enough for the parked goroutine's stack to shrink
// (docs/performance.md): a type with its own ServeHTTP, not an
// http.HandlerFunc, which would add a frame; what a request starts with is
// done in begin, which has returned by then; and what its end needs is in
// the status writer, which every request has anyway.
type traced struct {
	log    *slog.Logger
	next   http.Handler
	tracer func() trace.Tracer
}

func (t *traced) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := t.begin(w, r)
	defer t.end(sw)
	t.next.ServeHTTP(sw, sw.r)
}

// begin gives r its request ID, echoed on w, and its span and the
// context that carries it when tracing is on or the caller sent a trace;
// it returns w wrapped to record the status, holding r with that context.
//
//go:noinline
func (t *traced) begin(w http.ResponseWriter, r *http.Request) *statusWriter {
	sw := &statusWriter{ResponseWriter: w, start: time.Now(), span: noop.Span{}}
	sw.id = r.Header.Get(RequestIDHeader)
	if !saneRequestID(sw.id) {
		sw.id = newRequestID()
	}
	w.Header().Set(RequestIDHeader, sw.id)
	if on.Load() || r.Header.Get("traceparent") != "" {
		// Off and without a caller's trace there is nothing to
		// trace or keep: no span, no copy of the request.
		ctx := Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, sw.span = t.tracer().Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
		r = r.WithContext(ctx)
	}
	sw.r = r
	return sw
}

// end ends the request's span and logs its line. A panic that reaches
// here (http.ErrAbortHandler) still ends the span and logs the line.
func (t *traced) end(sw *statusWriter) {
	r, span, id := sw.r, sw.span, sw.id
	ctx := r.Context()
	route := routeOf(r.Pattern)
	status := sw.code
	if status == 0 {
		status = http.StatusOK
		if v := recover(); v != nil {
			status = 499 // the handler gave up on the client (nginx's 499)
			defer panic(v)
		}
	}
	d := time.Since(sw.start)
	if span.IsRecording() {
		span.SetName(r.Method + " " + route)
		span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
			attribute.Int("http.response.status_code", status), attribute.String("airlock.request_id", id))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
	if !t.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("route", route), slog.Int("status", status),
		slog.Duration("duration", d), slog.String("request_id", id),
	}
	if sc := span.SpanContext(); sc.HasTraceID() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	t.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
}

// routeOf is the path part of a mux pattern ("POST /v1/approval-requests/{id}"
// → "/v1/approval-requests/{id}"); "unmatched" when no route served the
// request.
func routeOf(pattern string) string {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = strings.TrimSpace(p)
	}
	if pattern == "" {
		return "unmatched"
	}
	return pattern
}

// saneRequestID accepts a client's request ID of 1 to 128 characters from
// a small set, so that it cannot forge a log line or carry markup.
func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-_.:/+=@", c) >= 0:
		default:
			return false
		}
	}
	return true
}

var (
	idPrefix = func() string {
		var b [6]byte
		rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	idSeq atomic.Uint64
)

// newRequestID makes a request ID unique to this process's life: a random
// prefix drawn at start and a counter, cheaper than randomness per
// request.
func newRequestID() string {
	return idPrefix + "-" + strconv.FormatUint(idSeq.Add(1), 36)
}

// statusWriter records the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
	// What the request's end needs (traced.end): r is the request as
	// the handler below got it, with the span's context.
	r     *http.Request
	start time.Time
	span  trace.Span
	id    string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets event streams and MCP's streamed answers through.
func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
