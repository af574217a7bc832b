package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// diffPair is two fresh servers alike but for how a tools/call at
// 2026-07-28 is served: sdk by the SDK's stateless handler always, direct
// by Airlock where directToolCall takes it.
type diffPair struct {
	sdk, direct *diffSide
}

// diffSide is one server of a pair, with what its requests name: its
// agent's secret, an approval request and an Airlock session of its own.
type diffSide struct {
	srv      *Server
	handler  http.Handler
	secret   string
	approval string
	cancel   string // a second approval request, for approval_cancel
	session  string
}

func setupDiff(t testing.TB) *diffPair {
	t.Helper()
	p := &diffPair{sdk: newDiffSide(t, true), direct: newDiffSide(t, false)}
	for _, s := range []*diffSide{p.sdk, p.direct} {
		s.approval = s.seed(t, ToolApprovalRequest, `{"kind":"agent_request","title":"May I?","proposal":{"mode":"advisory"},"idempotencyKey":"seed"}`, "approvalId")
		s.cancel = s.seed(t, ToolApprovalRequest, `{"kind":"agent_request","title":"May I cancel?","proposal":{"mode":"advisory"},"idempotencyKey":"seed-cancel"}`, "approvalId")
		s.session = s.seed(t, ToolSessionOpen, `{"name":"diff"}`, "sessionId")
	}
	return p
}

func newDiffSide(t testing.TB, sdkOnly bool) *diffSide {
	t.Helper()
	b := setupWith(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends the MCP sessions
	srv := New(Config{Service: b.svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Context: ctx, PublicURL: "https://airlock.example"})
	srv.sdkOnly = sdkOnly
	return &diffSide{srv: srv, handler: srv.HTTPHandler(), secret: b.secrets[b.agent.ID]}
}

// seed calls tool with args (with the SDK client's _meta) and returns
// the result's field.
func (s *diffSide) seed(t testing.TB, tool, args, field string) string {
	t.Helper()
	c := diffCase{tool: tool, args: args}
	w := s.serve(c.request(s))
	_, body := splitEvents(w.Body.Bytes())
	var res struct {
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if len(body) != 1 || json.Unmarshal(body[0], &res) != nil {
		t.Fatalf("seed %s: %d %s", tool, w.Code, w.Body)
	}
	v, _ := res.Result.StructuredContent[field].(string)
	if v == "" {
		t.Fatalf("seed %s: no %s in %s", tool, field, w.Body)
	}
	return v
}

func (s *diffSide) serve(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.handler.ServeHTTP(w, r)
	return w
}

// diffCase is one tools/call: the tool, its arguments and _meta as raw
// JSON (with {{approval}}, {{cancel}} and {{session}} standing for each
// server's own), and what to change in the request the SDK client would
// send. body, when set, is the whole body.
type diffCase struct {
	name   string
	tool   string
	args   string // "" for none
	meta   string // "" for the SDK client's
	params string // "" for {name, arguments, _meta}
	body   string
	header func(http.Header)
	// direct is whether Airlock answers it itself: the cases a real
	// client sends must be, or the comparison proves nothing.
	direct bool
}

// sdkMeta is the _meta the Go SDK client (v1.8.0) sends at 2026-07-28.
const sdkMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"test","version":"v0"}}`

func (c diffCase) request(s *diffSide) *http.Request {
	body := c.body
	if body == "" {
		params := c.params
		if params == "" {
			meta := c.meta
			if meta == "" {
				meta = sdkMeta
			}
			params = `{"name":` + strconvQuote(c.tool)
			if c.args != "" {
				params += `,"arguments":` + c.args
			}
			params += `,"_meta":` + meta + `}`
		}
		body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + params + `}`
	}
	body = strings.NewReplacer("{{approval}}", s.approval, "{{cancel}}", s.cancel, "{{session}}", s.session).Replace(body)
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Host = "127.0.0.1"
	r.Header.Set("Authorization", "Bearer "+s.secret)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set(headerProtocolVersion, Revision2026)
	r.Header.Set("Mcp-Method", "tools/call")
	r.Header.Set("Mcp-Name", c.tool)
	if c.header != nil {
		c.header(r.Header)
	}
	return r
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// diffCorpus is every tool, valid and invalid arguments, bad headers, bad
// _meta, missing and extra fields, Tasks and MRTR declared, an unknown
// tool and a wrong Mcp-Name. Calls that would wait for a person are left
// out: neither path would answer.
var diffCorpus = []diffCase{
	{name: "approval_request", tool: ToolApprovalRequest, args: `{"kind":"agent_request","title":"Tidy?","proposal":{"mode":"advisory"},"idempotencyKey":"k1"}`, direct: true},
	{name: "approval_request replayed", tool: ToolApprovalRequest, args: `{"kind":"agent_request","title":"Tidy?","proposal":{"mode":"advisory"},"idempotencyKey":"k1"}`, direct: true},
	{name: "approval_request key reused", tool: ToolApprovalRequest, args: `{"kind":"agent_request","title":"Other","proposal":{"mode":"advisory"},"idempotencyKey":"k1"}`, direct: true},
	{name: "approval_request question", tool: ToolApprovalRequest, args: `{"kind":"agent_request","title":"Which?","proposal":{"mode":"advisory"},"question":{"choices":["a","b"]},"sessionId":"{{session}}","idempotencyKey":"k2"}`, direct: true},
	{name: "approval_request html", tool: ToolApprovalRequest, args: `{"kind":"agent_request","title":"<b>&</b>","proposal":{"mode":"advisory"},"idempotencyKey":"k3"}`, direct: true},
	{name: "approval_request empty", tool: ToolApprovalRequest, args: `{}`, direct: true},
	{name: "approval_request unknown field", tool: ToolApprovalRequest, args: `{"kind":"agent_request","title":"t","proposal":{"mode":"advisory"},"idempotencyKey":"k4","extra":1}`, direct: true},
	{name: "approval_request wrong type", tool: ToolApprovalRequest, args: `{"kind":5}`, direct: true},
	{name: "approval_request duplicate key", tool: ToolApprovalRequest, args: `{"kind":"agent_request","kind":"agent_request"}`},
	{name: "approval_status", tool: ToolApprovalStatus, args: `{"approvalId":"{{approval}}"}`, direct: true},
	{name: "approval_status no wait", tool: ToolApprovalStatus, args: `{"approvalId":"{{approval}}","waitSeconds":0}`, direct: true},
	{name: "approval_status wait out of range", tool: ToolApprovalStatus, args: `{"approvalId":"{{approval}}","waitSeconds":61}`, direct: true},
	{name: "approval_status missing id", tool: ToolApprovalStatus, args: `{}`, direct: true},
	{name: "approval_status number id", tool: ToolApprovalStatus, args: `{"approvalId":5}`, direct: true},
	{name: "approval_status unknown id", tool: ToolApprovalStatus, args: `{"approvalId":"apr_nope"}`, direct: true},
	{name: "approval_status no arguments", tool: ToolApprovalStatus, direct: true},
	{name: "approval_status arguments null", tool: ToolApprovalStatus, args: `null`},
	{name: "approval_status arguments array", tool: ToolApprovalStatus, args: `[]`},
	{name: "approval_cancel", tool: ToolApprovalCancel, args: `{"approvalId":"{{cancel}}"}`, direct: true},
	{name: "approval_cancel again", tool: ToolApprovalCancel, args: `{"approvalId":"{{cancel}}"}`, direct: true},
	{name: "approval_cancel missing id", tool: ToolApprovalCancel, args: `{}`, direct: true},
	{name: "session_open", tool: ToolSessionOpen, args: `{"name":"s1","metadata":{"repo":"x"}}`, direct: true},
	{name: "session_open bad metadata", tool: ToolSessionOpen, args: `{"name":"s1","metadata":"x"}`, direct: true},
	{name: "session_heartbeat", tool: ToolSessionHeartbeat, args: `{"sessionId":"{{session}}"}`, direct: true},
	{name: "session_heartbeat unknown", tool: ToolSessionHeartbeat, args: `{"sessionId":"ses_nope"}`, direct: true},
	{name: "work_list", tool: ToolWorkList, args: `{}`, direct: true},
	{name: "work_get unknown", tool: ToolWorkGet, args: `{"itemId":"wi_nope"}`, direct: true},
	{name: "work_get missing", tool: ToolWorkGet, args: `{}`, direct: true},
	{name: "approval_prompt without input", tool: ToolApprovalPrompt, args: `{"tool_name":"Bash"}`, direct: true},
	{name: "approval_prompt unknown field", tool: ToolApprovalPrompt, args: `{"tool_name":"Bash","x":1}`, direct: true},
	{name: "session_close", tool: ToolSessionClose, args: `{"sessionId":"{{session}}"}`, direct: true},
	{name: "session_close again", tool: ToolSessionClose, args: `{"sessionId":"{{session}}"}`, direct: true},
	{name: "unknown tool", tool: "nope", args: `{}`},
	{name: "wrong Mcp-Name", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set("Mcp-Name", ToolWorkGet) }},
	{name: "no Mcp-Name", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Del("Mcp-Name") }},
	{name: "two Mcp-Name", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Add("Mcp-Name", ToolWorkList) }},
	{name: "no Mcp-Method", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Del("Mcp-Method") }},
	{name: "wrong Mcp-Method", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set("Mcp-Method", "tools/list") }},
	{name: "no protocol header", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Del(headerProtocolVersion) }},
	{name: "older protocol header", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set(headerProtocolVersion, "2025-11-25") }},
	{name: "Accept json only", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set("Accept", "application/json") }},
	{name: "Accept any", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set("Accept", "*/*") }},
	{name: "Content-Type text", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set("Content-Type", "text/plain") }},
	{name: "Content-Type charset", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set("Content-Type", "application/json; charset=utf-8") }},
	{name: "Last-Event-ID", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set("Last-Event-ID", "x") }},
	{name: "Mcp-Param header", tool: ToolWorkList, args: `{}`, header: func(h http.Header) { h.Set("Mcp-Param-Foo", "x") }, direct: true},
	{name: "meta without capabilities", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`},
	{name: "meta capabilities not an object", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"x"}`},
	{name: "meta empty capabilities", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`, direct: true},
	{name: "meta bad clientInfo", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":5}`},
	{name: "meta clientInfo null", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null}`},
	{name: "meta without version", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/clientCapabilities":{}}`},
	{name: "meta version mismatch", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}`},
	{name: "meta extra member", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"x":1}`},
	{name: "meta progress token", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p"}`},
	{name: "meta trace context", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, direct: true},
	{name: "meta log level", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug"}`},
	{name: "meta other extension", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"example/x":{}},"experimental":{"y":{}},"sampling":{}}}`, direct: true},
	{name: "meta bad roots", tool: ToolWorkList, args: `{}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":"yes"}}}`},
	{name: "tasks declared, status waits", tool: ToolApprovalStatus, args: `{"approvalId":"{{approval}}","waitSeconds":5}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`},
	{name: "tasks declared, status at once", tool: ToolApprovalStatus, args: `{"approvalId":"{{approval}}"}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`},
	{name: "MRTR declared, status waits", tool: ToolApprovalStatus, args: `{"approvalId":"{{approval}}","waitSeconds":5}`, meta: `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`},
	{name: "MRTR retry with foreign state", tool: ToolApprovalStatus, params: `{"name":"approval_status","arguments":{"approvalId":"{{approval}}","waitSeconds":5},"requestState":"apr_other","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}`},
	{name: "params extra field", tool: ToolWorkList, params: `{"name":"work_list","arguments":{},"x":1,"_meta":` + sdkMeta + `}`},
	{name: "params name case", tool: ToolWorkList, params: `{"Name":"work_list","arguments":{},"_meta":` + sdkMeta + `}`},
	{name: "params name number", tool: ToolWorkList, params: `{"name":5,"arguments":{},"_meta":` + sdkMeta + `}`},
	{name: "params without name", tool: ToolWorkList, params: `{"arguments":{},"_meta":` + sdkMeta + `}`},
	{name: "params without meta", tool: ToolWorkList, params: `{"name":"work_list","arguments":{}}`},
	{name: "params null", tool: ToolWorkList, params: `null`},
	{name: "params escaped name", tool: ToolWorkList, params: `{"name":"work\u005flist","arguments":{},"_meta":` + sdkMeta + `}`, direct: true},
	{name: "arguments with space", tool: ToolApprovalRequest, params: `{"name":"approval_request","arguments": { "kind" : "agent_request", "title":"t","proposal":{"mode":"advisory"},"idempotencyKey":"k5" } ,"_meta":` + sdkMeta + `}`, direct: true},
	{name: "no params", tool: ToolWorkList, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call"}`},
	{name: "string id", tool: ToolWorkList, body: `{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"work_list","arguments":{},"_meta":` + sdkMeta + `}}`, direct: true},
	{name: "float id", tool: ToolWorkList, body: `{"jsonrpc":"2.0","id":7.0,"method":"tools/call","params":{"name":"work_list","arguments":{},"_meta":` + sdkMeta + `}}`, direct: true},
	{name: "notification", tool: ToolWorkList, body: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"work_list","arguments":{},"_meta":` + sdkMeta + `}}`},
	{name: "tools/list", tool: ToolWorkList, body: `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":` + sdkMeta + `}}`, header: func(h http.Header) { h.Set("Mcp-Method", "tools/list"); h.Del("Mcp-Name") }},
}

// TestDirectMatchesSDK sends every call of diffCorpus, in order, to a
// server that hands it to the SDK and to one that answers it itself where
// it can, and requires the same status, Content-Type and JSON-RPC answer
// (IDs the servers made at random aside).
func TestDirectMatchesSDK(t *testing.T) {
	p := setupDiff(t)
	for _, c := range diffCorpus {
		if got := p.direct.takes(t, c.request(p.direct)); got != c.direct {
			t.Errorf("%s: served directly %v, want %v", c.name, got, c.direct)
		}
		p.compare(t, c.name, c.request(p.sdk), c.request(p.direct))
	}
}

// takes reports whether s answers r itself.
func (s *diffSide) takes(t testing.TB, r *http.Request) bool {
	t.Helper()
	body, _ := io.ReadAll(r.Body)
	msg, _, _, _, ok := checkMessage(body)
	if !ok {
		return false
	}
	_, direct := s.srv.directToolCall(r, msg)
	return direct
}

// compare serves a by the SDK and b directly, and fails unless the
// answers are the same.
func (p *diffPair) compare(t testing.TB, name string, a, b *http.Request) {
	t.Helper()
	wa, wb := p.sdk.serve(a), p.direct.serve(b)
	if wa.Code != wb.Code {
		t.Errorf("%s: status %d by the SDK, %d directly\nSDK:    %s\ndirect: %s", name, wa.Code, wb.Code, wa.Body, wb.Body)
		return
	}
	for _, h := range []string{"Content-Type", "Cache-Control", "Connection", "X-Content-Type-Options", "Allow", "Retry-After"} {
		if ga, gb := wa.Header().Get(h), wb.Header().Get(h); ga != gb {
			t.Errorf("%s: %s %q by the SDK, %q directly", name, h, ga, gb)
		}
	}
	ea, da := splitEvents(wa.Body.Bytes())
	eb, db := splitEvents(wb.Body.Bytes())
	if ea != eb {
		t.Errorf("%s: framing %q by the SDK, %q directly", name, ea, eb)
	}
	if len(da) != len(db) {
		t.Errorf("%s: %d messages by the SDK, %d directly\nSDK:    %s\ndirect: %s", name, len(da), len(db), wa.Body, wb.Body)
		return
	}
	for i := range da {
		va, vb := normalised(da[i]), normalised(db[i])
		if !reflect.DeepEqual(va, vb) {
			t.Errorf("%s: answers differ\nSDK:    %s\ndirect: %s", name, da[i], db[i])
		}
	}
}

// splitEvents returns a response body's framing (the SSE lines but their
// data, or "json" for a plain body) and its JSON messages.
func splitEvents(body []byte) (string, [][]byte) {
	if !bytes.HasPrefix(body, []byte("event:")) && !bytes.HasPrefix(body, []byte("data:")) {
		return "json", [][]byte{bytes.TrimSpace(body)}
	}
	var framing strings.Builder
	var data [][]byte
	for line := range bytes.Lines(body) {
		if rest, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			data = append(data, bytes.TrimSpace(rest))
			framing.WriteString("data: …\n")
			continue
		}
		framing.Write(line)
	}
	return framing.String(), data
}

// randomID matches the IDs servers make at random (airlock.NewID).
var randomID = regexp.MustCompile(`\b[a-z]+_[a-z2-7]{24}\b`)

// normalised is a JSON message decoded, with each random ID replaced by
// its order of first appearance; a body that is not JSON, as text.
func normalised(msg []byte) any {
	seen := map[string]string{}
	text := randomID.ReplaceAllStringFunc(string(msg), func(id string) string {
		if n, ok := seen[id]; ok {
			return n
		}
		seen[id] = fmt.Sprintf("id%d", len(seen))
		return seen[id]
	})
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return text
	}
	return v
}

// FuzzToolCall2026 sends the same tools/call at 2026-07-28, whatever its
// body and its Mcp-Method, Mcp-Name and Accept headers, to a server that
// hands it to the SDK and to one that answers it itself where it can, and
// requires the same answer. Its seeds are diffCorpus.
//
//	go test -fuzz FuzzToolCall2026 -fuzztime 60s ./mcpserver/
func FuzzToolCall2026(f *testing.F) {
	for _, c := range diffCorpus {
		r := c.request(&diffSide{approval: "{{approval}}", cancel: "{{cancel}}", session: "{{session}}"})
		body, _ := io.ReadAll(r.Body)
		f.Add(string(body), r.Header.Get("Mcp-Method"), r.Header.Get("Mcp-Name"), r.Header.Get("Accept"))
	}
	p := setupDiff(f)
	f.Fuzz(func(t *testing.T, body, method, name, accept string) {
		// A call that waits for a person would wait on both sides.
		lower := strings.ToLower(body)
		if strings.Contains(lower, "wait") || strings.Contains(lower, "input") || strings.Contains(body, `\u`) {
			t.Skip("may wait for a person")
		}
		req := func(s *diffSide) *http.Request {
			c := diffCase{tool: name, body: body, header: func(h http.Header) {
				h.Set("Mcp-Method", method)
				h.Set("Accept", accept)
			}}
			return c.request(s)
		}
		p.compare(t, "fuzz", req(p.sdk), req(p.direct))
	})
}

// TestSDKClientCallIsDirect: the tools/call the Go SDK client sends at
// 2026-07-28 is one Airlock answers itself, with the answer the client
// reads, so the benchmark and the SDK's clients take the direct path.
func TestSDKClientCallIsDirect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := New(Config{Service: b.svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Context: ctx})
	hs := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(hs.Close)
	rec := &recordCall{}
	hc := &http.Client{Transport: mcpsdk.Bearer{Token: b.secrets[b.agent.ID], Next: rec}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolApprovalRequest, Arguments: requestArgs("direct", nil)})
	if err != nil || res.IsError || res.StructuredContent == nil {
		t.Fatalf("approval_request: %v %+v", err, res)
	}
	header, body := rec.last()
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	r.Header = header
	msg, _, _, _, ok := checkMessage(body)
	if !ok {
		t.Fatalf("recorded %s", body)
	}
	if _, direct := srv.directToolCall(r, msg); !direct {
		t.Errorf("the SDK client's call goes to the SDK:\n%v\n%s", header, body)
	}
}
