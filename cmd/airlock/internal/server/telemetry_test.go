package server_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/cmd/airlock/internal/server"
	"github.com/airlockhq/airlock/internal/telemetry"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/webhooktest"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export
// with the collector's own protobuf messages and keeps the spans.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	raw      []byte // every export's body, end to end
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &in)
		}
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			t.Errorf("OTLP receiver: %s %s (%s): %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.raw = append(r.raw, body...)
		for _, rs := range in.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					r.services = append(r.services, kv.Value.GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	t.Cleanup(r.Close)
	return r
}

// tracePolicy asks a person about deploys, so that the policy decides
// something, in a span of its own.
const tracePolicy = `rules:
  - {name: deploys, match: 'request.tool == "deploy"', action: ask}
`

// TestTracesOfOneApprovalAcrossReplicas: one approval's life, created on
// one replica by a client sending traceparent and decided, claimed and
// reported on another replica that shares the PostgreSQL database, with
// a webhook delivered, reaches an OTLP/HTTP receiver as spans that share
// the client's trace or link to it: the creation is a child of the
// client's span, its store write and policy decision are children of the
// creation, and the decision, the claim, the report and the delivery, in
// traces of their own, link to the creation's span, which the store kept
// on the request's event. Each request's log line carries its route, its
// request ID (echoed in the response) and its trace ID.
func TestTracesOfOneApprovalAcrossReplicas(t *testing.T) {
	// Not parallel: it installs the global tracer provider.
	recv := newOTLPReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL}
	stopTracing, err := telemetry.Start(t.Context(), telemetry.Config{Version: "test", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer stopTracing(context.Background())

	schema := testkit.CreateSchema(t, "otel")
	const admin = "admin-secret-for-the-trace-test"
	logs := &testkit.Buffer{}
	replica := func(name string) (base string, stop func()) {
		st, err := postgres.Open(t.Context(), testkit.SchemaURL(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		pol, err := policy.NewEngine(testkit.TempFile(t, "policy.yaml", tracePolicy), nil)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(ctx, server.Config{Store: st, Addr: "127.0.0.1:0", AdminToken: admin, Limits: airlock.DefaultLimits(),
			OutboundAllowPrivate: true, Policy: pol, Logger: slog.New(slog.NewJSONHandler(logs, nil)).With("replica", name)})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		ran := make(chan error, 1)
		go func() { ran <- srv.Run(ctx) }()
		return "http://" + srv.Addr(), func() {
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("Run %s: %v", name, err)
			}
		}
	}
	a, stopA := replica("a")
	b, stopB := replica("b")
	call := func(base, method, path, token, body string, want int, header ...string) testkit.Reply {
		t.Helper()
		r, err := testkit.Call(t.Context(), http.DefaultClient, method, base+path, token, body, header...)
		if err != nil || r.Status != want {
			t.Fatalf("%s %s: %d %v %s; want %d", method, path, r.Status, err, r.Raw, want)
		}
		return r
	}
	mint := func(name, role, principal string) string {
		return call(a, "POST", "/v1/tokens", admin, fmt.Sprintf(`{"name":%q,"role":%q,"principal":%q}`, name, role, principal), 201).Str("secret")
	}
	agent, reviewer := mint("agent", "agent", "ann"), mint("reviewer", "reviewer", "rev")
	hook := webhooktest.NewReceiver("traces", webhooktest.OK)
	defer hook.Close()
	hook.SetSecret(call(a, "POST", "/v1/webhooks", admin, fmt.Sprintf(`{"url":%q}`, hook.URL()), 201).Str("secret"))
	inst := call(a, "POST", "/v1/instances", agent, `{"name":"traced"}`, 201).Str("id")

	const (
		traceID   = "0af7651916cd43dd8448eb211c80319c"
		parentID  = "b7ad6b7169203331"
		requestID = "client-chosen-id.1"
	)
	created := call(a, "POST", "/v1/instances/"+inst+"/approval-requests", agent, `{"tool":"deploy","arguments":{"env":"prod"},"timeout":"10m"}`, 201,
		"traceparent", "00-"+traceID+"-"+parentID+"-01", "X-Request-Id", requestID, "Idempotency-Key", "k1")
	id := created.Str("id")
	if got := created.Header.Get("X-Request-Id"); got != requestID {
		t.Errorf("X-Request-Id echoed %q, want the client's %q", got, requestID)
	}
	call(b, "POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved"}`, 200)
	call(b, "POST", "/v1/approval-requests/"+id+"/execution", agent, "", 200)
	call(b, "PUT", "/v1/approval-requests/"+id+"/execution", agent, `{"status":"succeeded"}`, 200)
	deadline := time.Now().Add(20 * time.Second)
	for hook.Received() < 2 && time.Now().Before(deadline) { // created and approved, at least
		time.Sleep(20 * time.Millisecond) // polling a receiver in another process's stead: no signal to wait on
	}
	stopA()
	stopB()
	if err := stopTracing(context.Background()); err != nil { // flushes every span
		t.Fatal(err)
	}

	recv.mu.Lock()
	spans := recv.spans
	services := recv.services
	recv.mu.Unlock()
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	one := func(name string, match func(*tracepb.Span) bool) *tracepb.Span {
		t.Helper()
		for _, s := range byName[name] {
			if match(s) {
				return s
			}
		}
		var got []string
		for n := range byName {
			got = append(got, n)
		}
		t.Fatalf("no span %q as wanted; spans: %q", name, got)
		return nil
	}
	inTrace := func(s *tracepb.Span) bool { return hex.EncodeToString(s.TraceId) == traceID }
	create := one("POST /v1/instances/{id}/approval-requests", inTrace)
	if hex.EncodeToString(create.ParentSpanId) != parentID || create.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the creation's span has parent %x (kind %v), want the client's %s", create.ParentSpanId, create.Kind, parentID)
	}
	childOf := func(parent *tracepb.Span) func(*tracepb.Span) bool {
		return func(s *tracepb.Span) bool { return string(s.ParentSpanId) == string(parent.SpanId) && inTrace(s) }
	}
	one("store CreateRequest", childOf(create))
	one("policy evaluate", childOf(create))
	linksToCreate := func(s *tracepb.Span) bool {
		for _, l := range s.Links {
			if hex.EncodeToString(l.TraceId) == traceID && string(l.SpanId) == string(create.SpanId) {
				return true
			}
		}
		return false
	}
	for _, name := range []string{"POST /v1/approval-requests/{id}/decision", "POST /v1/approval-requests/{id}/execution", "PUT /v1/approval-requests/{id}/execution"} {
		s := one(name, linksToCreate)
		if inTrace(s) {
			t.Errorf("%s joined the client's trace without its traceparent", name)
		}
		if name == "POST /v1/approval-requests/{id}/decision" {
			one("store Decide", func(d *tracepb.Span) bool { return string(d.ParentSpanId) == string(s.SpanId) })
		}
	}
	one("deliver webhook", linksToCreate) // request.created's delivery
	if len(services) == 0 || services[0] != "airlock" {
		t.Errorf("resource service.name %q, want airlock", services)
	}

	var sawCreate bool
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if rec["msg"] != "request" {
			continue
		}
		if rec["route"] == "" || rec["request_id"] == "" || rec["status"] == nil || rec["method"] == nil || rec["duration"] == nil || rec["trace_id"] == nil {
			t.Errorf("a request's line lacks a field: %s", line)
		}
		if strings.Contains(line, id) {
			t.Errorf("a request's line holds a raw path: %s", line)
		}
		if rec["route"] == "/v1/instances/{id}/approval-requests" {
			sawCreate = true
			if rec["request_id"] != requestID || rec["trace_id"] != traceID || rec["status"] != 201.0 {
				t.Errorf("the creation's line: %s; want request ID %s, trace ID %s, 201", line, requestID, traceID)
			}
		}
	}
	if !sawCreate {
		t.Errorf("no log line of the creation:\n%s", logs.String())
	}
}

// TestNoSecretInLogs: a lifecycle that mints every kind of secret — the
// admin token, agent and reviewer API keys, a webhook's signing secret,
// an inbox session cookie and its sign-in form's CSRF token, and a wrong
// token tried — with debug logs and every span exported, leaves none of
// them in any log line nor in any exported span.
func TestNoSecretInLogs(t *testing.T) {
	// Not parallel: it installs the global tracer provider.
	recv := newOTLPReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.URL + "/v1/traces"}
	stopTracing, err := telemetry.Start(t.Context(), telemetry.Config{Version: "test", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer stopTracing(context.Background())

	const admin = "airlock_admin-secret-for-the-log-test"
	logs := &testkit.Buffer{}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Config{Store: st, Addr: "127.0.0.1:0", AdminToken: admin, Limits: airlock.DefaultLimits(),
		OutboundAllowPrivate: true, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	base := "http://" + srv.Addr()
	secrets := map[string]string{"admin token": admin}
	call := func(method, path, token, body string, want int, header ...string) testkit.Reply {
		t.Helper()
		r, err := testkit.Call(t.Context(), http.DefaultClient, method, base+path, token, body, header...)
		if err != nil || r.Status != want {
			t.Fatalf("%s %s: %d %v %s; want %d", method, path, r.Status, err, r.Raw, want)
		}
		return r
	}
	mint := func(name, role, principal string) string {
		s := call("POST", "/v1/tokens", admin, fmt.Sprintf(`{"name":%q,"role":%q,"principal":%q}`, name, role, principal), 201).Str("secret")
		secrets[name+" token"] = s
		return s
	}
	agent, reviewer := mint("agent", "agent", "ann"), mint("reviewer", "reviewer", "rev")
	hook := webhooktest.NewReceiver("secrets", webhooktest.OK)
	defer hook.Close()
	secrets["webhook secret"] = call("POST", "/v1/webhooks", admin, fmt.Sprintf(`{"url":%q}`, hook.URL()), 201).Str("secret")
	hook.SetSecret(secrets["webhook secret"])
	secrets["wrong token"] = "airlock_wrong-token-tried-by-someone"
	call("GET", "/v1/approval-requests", secrets["wrong token"], "", 401)

	inst := call("POST", "/v1/instances", agent, `{"name":"secrets"}`, 201).Str("id")
	id := call("POST", "/v1/instances/"+inst+"/approval-requests", agent, `{"tool":"deploy","arguments":{"env":"prod"},"timeout":"10m"}`, 201,
		"Idempotency-Key", "k1", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").Str("id")

	// The inbox: a sign-in form's CSRF cookie, then a session cookie.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := browser.Get(base + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(base)
	cookie := func(name string) string {
		for _, c := range jar.Cookies(u) {
			if c.Name == name {
				return c.Value
			}
		}
		t.Fatalf("no %s cookie; have %v", name, jar.Cookies(u))
		return ""
	}
	secrets["sign-in CSRF token"] = cookie("airlock_signin")
	res, err = browser.PostForm(base+"/signin", url.Values{"csrf": {secrets["sign-in CSRF token"]}, "token": {reviewer}, "next": {"/requests/" + id}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	secrets["inbox session cookie"] = cookie("airlock_session")

	call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved"}`, 200)
	call("POST", "/v1/approval-requests/"+id+"/execution", agent, "", 200)
	call("PUT", "/v1/approval-requests/"+id+"/execution", agent, `{"status":"succeeded"}`, 200)
	deadline := time.Now().Add(20 * time.Second)
	for hook.Received() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling another server's count: no signal to wait on
	}
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := stopTracing(context.Background()); err != nil {
		t.Fatal(err)
	}

	lines := 0
	for line := range strings.Lines(logs.String()) {
		lines++
		for what, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("the %s is in a log line: %s", what, line)
			}
		}
	}
	if lines < 10 || !strings.Contains(logs.String(), `"route":"/signin"`) {
		t.Fatalf("only %d log lines, or none of the sign-in:\n%s", lines, logs.String())
	}
	recv.mu.Lock()
	raw := string(recv.raw)
	recv.mu.Unlock()
	if !strings.Contains(raw, "/v1/instances/{id}/approval-requests") {
		t.Fatal("no span of the creation was exported")
	}
	for what, s := range secrets {
		if strings.Contains(raw, s) {
			t.Errorf("the %s is in an exported span", what)
		}
	}
}
