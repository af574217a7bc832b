package telemetry

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestExport: the exporter sends what a collector decodes as its own
// ExportTraceServiceRequest — the span's IDs, parent, kind, attributes,
// status and links, under the resource's service name — to the traces
// endpoint, gzipped and with the configured headers when asked, and
// retries once when the receiver is busy.
func TestExport(t *testing.T) {
	var (
		mu    sync.Mutex
		got   []*tracepb.ResourceSpans
		heads []http.Header
		busy  = 1
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		heads = append(heads, r.Header.Clone())
		if busy > 0 {
			busy--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Error(err)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var in coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &in); err != nil || r.URL.Path != "/custom/traces" {
			t.Errorf("export to %s: %v", r.URL.Path, err)
		}
		got = append(got, in.ResourceSpans...)
	}))
	defer recv.Close()
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":    recv.URL + "/custom/traces",
		"OTEL_EXPORTER_OTLP_HEADERS":            "api-key=s%20ecret,x-team=ops",
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
		"OTEL_SERVICE_NAME":                     "airlock-eu",
	}
	stop, err := Start(t.Context(), Config{Version: "1.2.3", Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
	ctx, parent := Tracer().Start(context.Background(), "parent", trace.WithSpanKind(trace.SpanKindServer))
	_, child := Tracer().Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(trace.Link{SpanContext: linked}))
	child.SetAttributes(attribute.String("s", "v"), attribute.Int("n", 7), attribute.Bool("b", true), attribute.StringSlice("l", []string{"x", "y"}))
	child.SetStatus(codes.Error, "broke")
	child.End()
	parent.End()
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(heads) != 2 {
		t.Fatalf("%d posts, want one refused as busy and its retry", len(heads))
	}
	for _, h := range heads {
		if h.Get("Api-Key") != "s ecret" || h.Get("X-Team") != "ops" || h.Get("Content-Type") != "application/x-protobuf" || h.Get("Content-Encoding") != "gzip" {
			t.Errorf("headers %v", h)
		}
	}
	spans := map[string]*tracepb.Span{}
	var service, version string
	for _, rs := range got {
		for _, kv := range rs.Resource.Attributes {
			switch kv.Key {
			case "service.name":
				service = kv.Value.GetStringValue()
			case "service.version":
				version = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			if ss.Scope.GetName() != ScopeName {
				t.Errorf("scope %q", ss.Scope.GetName())
			}
			for _, s := range ss.Spans {
				spans[s.Name] = s
			}
		}
	}
	if service != "airlock-eu" || version != "1.2.3" {
		t.Errorf("resource service %q version %q, want OTEL_SERVICE_NAME's and the build's", service, version)
	}
	p, c := spans["parent"], spans["child"]
	if p == nil || c == nil {
		t.Fatalf("spans %v", spans)
	}
	psc, csc := parent.SpanContext(), child.SpanContext()
	if hex.EncodeToString(c.TraceId) != psc.TraceID().String() || hex.EncodeToString(c.SpanId) != csc.SpanID().String() ||
		hex.EncodeToString(c.ParentSpanId) != psc.SpanID().String() {
		t.Errorf("child IDs %x %x parent %x; want %s %s %s", c.TraceId, c.SpanId, c.ParentSpanId, psc.TraceID(), csc.SpanID(), psc.SpanID())
	}
	if p.Kind != tracepb.Span_SPAN_KIND_SERVER || c.Kind != tracepb.Span_SPAN_KIND_CLIENT || len(p.ParentSpanId) != 0 {
		t.Errorf("kinds %v %v, parent's parent %x", p.Kind, c.Kind, p.ParentSpanId)
	}
	if c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || c.Status.GetMessage() != "broke" {
		t.Errorf("status %v", c.Status)
	}
	if len(c.Links) != 1 || hex.EncodeToString(c.Links[0].TraceId) != linked.TraceID().String() || hex.EncodeToString(c.Links[0].SpanId) != linked.SpanID().String() {
		t.Errorf("links %v", c.Links)
	}
	attrs := map[string]string{}
	for _, kv := range c.Attributes {
		attrs[kv.Key] = kv.Value.String()
	}
	if len(attrs) != 4 || c.EndTimeUnixNano < c.StartTimeUnixNano || c.StartTimeUnixNano == 0 {
		t.Errorf("attributes %v, times %d..%d", attrs, c.StartTimeUnixNano, c.EndTimeUnixNano)
	}
}
