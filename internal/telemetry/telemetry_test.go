package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

// TestTelemetryOffByDefault: without an OTLP endpoint, or with one but
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, Start installs
// nothing: the global tracer provider stays the no-op one, a request's
// span does not record, and no goroutine or connection is made. With the
// endpoint alone, it is on: spans record and reach the receiver.
func TestTelemetryOffByDefault(t *testing.T) {
	// Not parallel: it reads and sets the global tracer provider.
	var conns, exports atomic.Int32
	recv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { exports.Add(1) }))
	recv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	recv.Start()
	defer recv.Close()

	run := func(env map[string]string) (recording bool) {
		t.Helper()
		stop, err := Start(t.Context(), Config{Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		h := HTTP(slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			recording = trace.SpanFromContext(r.Context()).IsRecording()
		}))
		for range 10 {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
		}
		if err := stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		return recording
	}
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "airlock-test", "OTEL_TRACES_SAMPLER": "always_on"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL, "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.URL + "/v1/traces", "OTEL_TRACES_EXPORTER": "none"},
	} {
		ignore := goleak.IgnoreCurrent()
		if run(env) {
			t.Errorf("with %v, a request's span records", env)
		}
		if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
			t.Errorf("with %v, the SDK's tracer provider is installed", env)
		}
		goleak.VerifyNone(t, ignore)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to the OTLP endpoint while telemetry was off", n)
	}

	// On, the same requests record and are exported: the checks above
	// can fail.
	if !run(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL}) {
		t.Error("with an endpoint, a request's span does not record")
	}
	if exports.Load() == 0 || conns.Load() == 0 {
		t.Errorf("with an endpoint, %d exports over %d connections; want the spans flushed at shutdown", exports.Load(), conns.Load())
	}
}

// TestStartRefuses: a configuration Airlock cannot honour stops the start,
// naming the variable, never a header's value (it may be a credential).
func TestStartRefuses(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER=zipkin"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, "not an http or https URL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key"}, "OTEL_EXPORTER_OTLP_HEADERS: an entry is not key=value"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=10s"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_RESOURCE_ATTRIBUTES": "team"}, "OTEL_RESOURCE_ATTRIBUTES: an entry is not key=value"},
	} {
		_, err := Start(t.Context(), Config{Getenv: func(k string) string { return c.env[k] }})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Start with %v = %v, want an error saying %q", c.env, err, c.want)
		}
	}
}

// TestRequestLine: each request gets one info line with its method,
// route pattern (never the raw path), status, duration and request ID —
// the client's when sane, else a new one, echoed either way — and the
// trace ID of its traceparent.
func TestRequestLine(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/approval-requests/{id}/decision", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusConflict) })
	for _, c := range []struct {
		name, sent, route string
		status            int
		kept              bool
	}{
		{"a sane ID is kept", "req-7f3a.b:c", "/v1/approval-requests/{id}/decision", http.StatusConflict, true},
		{"a forged line is replaced", "x\n{\"msg\":\"forged\"}", "/v1/approval-requests/{id}/decision", http.StatusConflict, false},
		{"an overlong ID is replaced", strings.Repeat("a", 129), "/v1/approval-requests/{id}/decision", http.StatusConflict, false},
		{"no route", "", "unmatched", http.StatusNotFound, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			h := HTTP(slog.New(slog.NewJSONHandler(&logs, nil)), mux)
			path := "/v1/approval-requests/apr_secretish/decision"
			if c.route == "unmatched" {
				path = "/nowhere/apr_secretish"
			}
			req := httptest.NewRequest("POST", path, nil)
			req.Header.Set("X-Request-Id", c.sent)
			req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
			rec := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(rec, req)
			echoed := rec.Header().Get("X-Request-Id")
			if (echoed == c.sent) != c.kept || echoed == "" || !saneRequestID(echoed) {
				t.Errorf("X-Request-Id echoed %q for %q; kept %v", echoed, c.sent, c.kept)
			}
			var line map[string]any
			if err := json.Unmarshal(logs.Bytes(), &line); err != nil || strings.Count(logs.String(), "\n") != 1 {
				t.Fatalf("want one JSON line, got %q (%v)", logs.String(), err)
			}
			if strings.Contains(logs.String(), "apr_secretish") {
				t.Errorf("the raw path is in the line: %s", logs.String())
			}
			d, _ := line["duration"].(float64)
			if line["msg"] != "request" || line["level"] != "INFO" || line["method"] != "POST" || line["route"] != c.route ||
				line["status"] != float64(c.status) || line["request_id"] != echoed ||
				line["trace_id"] != "0af7651916cd43dd8448eb211c80319c" || d <= 0 || time.Duration(d) > time.Since(start) {
				t.Errorf("line %s", logs.String())
			}
		})
	}
}
