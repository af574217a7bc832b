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
	tracer := Tracer
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !saneRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		var (
			ctx             = r.Context()
			span trace.Span = noop.Span{}
		)
		if on.Load() || r.Header.Get("traceparent") != "" {
			// Off and without a caller's trace there is nothing to
			// trace or keep: no span, no copy of the request.
			ctx = Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, span = tracer().Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
			r = r.WithContext(ctx)
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			// A panic that reaches here (http.ErrAbortHandler) still
			// ends the span and logs the line.
			route := routeOf(r.Pattern)
			status := sw.code
			if status == 0 {
				status = http.StatusOK
				if v := recover(); v != nil {
					status = 499 // the handler gave up on the client (nginx's 499)
					defer panic(v)
				}
			}
			d := time.Since(start)
			if span.IsRecording() {
				span.SetName(r.Method + " " + route)
				span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
					attribute.Int("http.response.status_code", status), attribute.String("airlock.request_id", id))
				if status >= 500 {
					span.SetStatus(codes.Error, http.StatusText(status))
				}
			}
			span.End()
			if !log.Enabled(ctx, slog.LevelInfo) {
				return
			}
			attrs := []slog.Attr{
				slog.String("method", r.Method), slog.String("route", route), slog.Int("status", status),
				slog.Duration("duration", d), slog.String("request_id", id),
			}
			if sc := span.SpanContext(); sc.HasTraceID() {
				attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
			}
			log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
		}()
		next.ServeHTTP(sw, r)
	})
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
