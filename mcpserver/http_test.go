package mcpserver

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpBundle is a bundle served over the streamable HTTP transport by a
// real HTTP server on loopback.
type httpBundle struct {
	*bundle
	url     string // the /mcp endpoint
	handler *httpHandler
}

func setupHTTP(t *testing.T, edit func(*Config)) *httpBundle {
	t.Helper()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{Service: b.svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Context: ctx}
	if edit != nil {
		edit(&cfg)
	}
	handler := New(cfg).HTTPHandler().(*httpHandler)
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(cancel) // first: ends the MCP sessions
	return &httpBundle{bundle: b, url: srv.URL + "/mcp", handler: handler}
}

// sdkClient connects the Go SDK client over HTTP with a token's secret.
func (h *httpBundle) sdkClient(t *testing.T, c airlock.Caller) *client {
	t.Helper()
	hc := &http.Client{Transport: mcpsdk.Bearer{Token: h.secrets[c.ID]}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return newClient(t, cs)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// raw is one hand-made HTTP request to /mcp.
type raw struct {
	method string
	body   string
	secret string
	header map[string]string
	host   string
	query  string
}

func (h *httpBundle) do(t *testing.T, r raw) (*http.Response, string) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(t.Context(), r.method, h.url+r.query, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.secret != "" {
		req.Header.Set("Authorization", "Bearer "+r.secret)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if r.host != "" {
		req.Host = r.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// session initializes a raw MCP session as c and returns its ID.
func (h *httpBundle) session(t *testing.T, c airlock.Caller) string {
	t.Helper()
	resp, body := h.do(t, raw{body: initializeBody, secret: h.secrets[c.ID]})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	resp, body = h.do(t, raw{body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, secret: h.secrets[c.ID],
		header: map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	return sid
}

// TestHTTP drives the tools with the Go SDK client over real HTTP.
func TestHTTP(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	cl := h.sdkClient(t, h.agent)
	if got := cl.cs.InitializeResult().ProtocolVersion; got != Revision2026 {
		t.Errorf("negotiated %s, want %s, the SDK client's newest", got, Revision2026)
	}
	sid := str(cl.ok(ToolSessionOpen, map[string]any{"name": "over http"}), "sessionId")
	id := str(cl.ok(ToolApprovalRequest, requestArgs("h1", func(m map[string]any) { m["sessionId"] = sid })), "approvalId")
	if _, err := h.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	hb := cl.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid})
	if ins := get(hb, "instructions").([]any); len(ins) != 1 {
		t.Errorf("instructions over HTTP: %v", hb)
	}
	if got := cl.fail(ToolApprovalRequest, requestArgs("h2", func(m map[string]any) { m["expiresInMinutes"] = 1 })); !strings.Contains(got, "expiresInMinutes must be between 5 and 10080") {
		t.Errorf("invalid call over HTTP: %q", got)
	}
	// A tool the server does not have is a protocol error.
	if _, err := cl.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "rm_rf", Arguments: map[string]any{}}); err == nil {
		t.Error("calling an unknown tool succeeded")
	}

	// Revoking the token stops the session at the next request.
	if _, err := h.svc.RevokeToken(t.Context(), h.admin, h.agent.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolWorkList, Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("a call with a revoked token: %v", err)
	}
}

// A session created while another session's bind lists the live ones
// stays bound to its token: its next request is served, not refused as
// "session not found" (which a client reads as its session gone).
func TestHTTPSessionBoundDuringAnothersBind(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	var (
		first atomic.Bool
		sid   string
	)
	h.handler.listed = func() {
		// The first bind's list is taken: create a second session before
		// that bind forgets the sessions missing from it. (The second
		// session's own bind runs this too.)
		if first.CompareAndSwap(false, true) {
			sid = h.session(t, h.agent)
		}
	}
	h.session(t, h.agent)
	if sid == "" {
		t.Fatal("the hook did not run: no session was bound")
	}
	resp, body := h.do(t, raw{body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, secret: h.secrets[h.agent.ID],
		header: map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, ToolApprovalRequest) {
		t.Fatalf("tools/list on the session bound during another's bind: %d %s", resp.StatusCode, body)
	}
}

// TestHTTPHardening is T15: Host and Origin checks, body limit, protocol
// version, batches, tokens in the query string, authentication, and
// sessions bound to the token that created them.
func TestHTTPHardening(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, func(c *Config) { c.AllowedHosts = []string{"airlock.internal"} })
	alice, carol := h.secrets[h.agent.ID], h.secrets[h.other.ID]
	verifier := h.secrets[h.mint(t, airlock.RoleVerifier, "tools").ID]
	auditor := h.secrets[h.mint(t, airlock.RoleAuditor, "audit").ID]
	sid := h.session(t, h.agent)
	in := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range in {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

	tests := []struct {
		name   string
		req    raw
		status int
		body   string // a substring of the response body
	}{
		{"own session works", raw{body: list, secret: alice, header: in}, 200, `"approval_request"`},
		{"Host evil.com", raw{body: list, secret: alice, header: in, host: "evil.com"}, 403, "Host"},
		{"Host evil.com with the server's port", raw{body: list, secret: alice, header: in, host: "evil.com:80"}, 403, "Host"},
		{"an allowed Host", raw{body: list, secret: alice, header: in, host: "airlock.internal"}, 200, `"approval_request"`},
		{"localhost", raw{body: list, secret: alice, header: in, host: "localhost"}, 200, `"approval_request"`},
		{"Origin of another site", raw{body: list, secret: alice, header: with(map[string]string{"Origin": "http://evil.test"})}, 403, "Origin"},
		{"Origin null", raw{body: list, secret: alice, header: with(map[string]string{"Origin": "null"})}, 403, "Origin"},
		{"Origin of the server itself", raw{body: list, secret: alice, header: with(map[string]string{"Origin": strings.TrimSuffix(h.url, "/mcp")})}, 200, `"approval_request"`},
		{"body over the limit", raw{body: `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"pad":"` + strings.Repeat("x", airlock.MaxBodyBytes) + `"}}`, secret: alice, header: in}, 413, "exceeds"},
		{"unsupported MCP-Protocol-Version", raw{body: list, secret: alice, header: with(map[string]string{"Mcp-Protocol-Version": "1999-01-01"})}, 400, "unsupported MCP-Protocol-Version"},
		{"2026-07-28 without its _meta", raw{body: list, secret: alice, header: with(map[string]string{"Mcp-Protocol-Version": Revision2026, "Mcp-Method": "tools/list"})}, 400, `missing or invalid _meta field \"io.modelcontextprotocol/protocolVersion\"`},
		{"a JSON-RPC batch", raw{body: "[" + list + "]", secret: alice, header: in}, 400, "batches are not supported"},
		{"malformed JSON", raw{body: `{"jsonrpc":"2.0",`, secret: alice, header: in}, 400, "-32700"},
		{"token in the query string", raw{body: list, secret: alice, header: in, query: "?token=" + alice}, 401, "never put a token in the URL"},
		{"access_token in the query string", raw{body: list, header: in, query: "?access_token=abc"}, 401, "never put a token in the URL"},
		{"a secret under any name", raw{body: list, header: in, query: "?x=" + alice}, 401, "never put a token in the URL"},
		{"no token", raw{body: list, header: in}, 401, "Bearer"},
		{"a verifier token", raw{body: initializeBody, secret: verifier}, 403, "may only consume approval tokens"},
		{"an auditor token", raw{body: initializeBody, secret: auditor}, 403, "may only read the audit log"},
		{"an unknown token", raw{body: list, secret: "airlock_nope", header: in}, 401, "Bearer"},
		{"another token's session", raw{body: list, secret: carol, header: in}, 404, "session not found"},
		{"another token's session, GET", raw{method: http.MethodGet, secret: carol, header: in}, 404, "session not found"},
		{"another token's session, DELETE", raw{method: http.MethodDelete, secret: carol, header: in}, 404, "session not found"},
		{"an unknown session", raw{body: list, secret: alice, header: with(map[string]string{"Mcp-Session-Id": "nope"})}, 404, "session not found"},
		{"a malformed JSON-RPC call is a protocol error", raw{body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"approval_request"}`, secret: alice, header: in}, 200, `"error":{"code":-32602`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, tt.req)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("%d %s\nwant %d with %q", resp.StatusCode, body, tt.status, tt.body)
			}
			if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" && !strings.Contains(body, "URL") {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	t.Run("a chunked body over the limit", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte(`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"pad":"`))
			pw.Write(bytes.Repeat([]byte("x"), airlock.MaxBodyBytes))
			pw.Write([]byte(`"}}`))
			pw.Close()
		}()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url, pr)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+alice)
		for k, v := range in {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413", resp.StatusCode)
		}
	})

	t.Run("the owner ends the session; then it is gone", func(t *testing.T) {
		if resp, body := h.do(t, raw{method: http.MethodDelete, secret: alice, header: in}); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
		}
		if resp, _ := h.do(t, raw{body: list, secret: alice, header: in}); resp.StatusCode != http.StatusNotFound {
			t.Errorf("after DELETE: %d, want 404", resp.StatusCode)
		}
	})
}

// TestHTTPRateLimit: /mcp takes each request from the token's rate budget
// (the one the REST API shares under airlock serve); over it, 429 with
// Retry-After, and another token's budget is its own.
func TestHTTPRateLimit(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0) // the limiter's clock never moves: no refill
	h := setupHTTP(t, func(c *Config) {
		c.Limiter = ratelimit.New(1, 2, func() time.Time { return now })
	})
	for i := range 2 {
		if resp, body := h.do(t, raw{body: initializeBody, secret: h.secrets[h.agent.ID]}); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d of the burst: %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := h.do(t, raw{body: initializeBody, secret: h.secrets[h.agent.ID]})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "rate_limited") {
		t.Fatalf("over the budget: %d Retry-After %q %s; want 429 rate_limited with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, body := h.do(t, raw{body: initializeBody, secret: h.secrets[h.other.ID]}); resp.StatusCode != http.StatusOK {
		t.Fatalf("another token: %d %s", resp.StatusCode, body)
	}
}

// TestHTTPFailedAuthenticationThrottled: wrong tokens from one address get
// 401 for its budget of failures, then 429 rate_limited with Retry-After
// (a JSON-RPC error answering the request); a valid token from another
// address, and one this server accepted before from the attacking
// address, still work. The log names the address.
func TestHTTPFailedAuthenticationThrottled(t *testing.T) {
	t.Parallel()
	logs := &logtest.Recorder{}
	const attacker, bystander = "203.0.113.7", "198.51.100.2"
	h := setupHTTP(t, func(c *Config) {
		c.AuthGuard = ratelimit.NewGuard(ratelimit.GuardConfig{
			AddressBurst: 5, Logger: logs.Logger(), Now: func() time.Time { return time.Unix(1000, 0) }, // no refill
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		})
	})
	from := func(addr, secret string) (*http.Response, string) {
		return h.do(t, raw{body: initializeBody, secret: secret, header: map[string]string{"X-Forwarded-For": addr}})
	}
	if resp, body := from(attacker, h.secrets[h.other.ID]); resp.StatusCode != http.StatusOK {
		t.Fatalf("a valid token before the attack: %d %s", resp.StatusCode, body)
	}
	statuses := map[int]int{}
	for range 25 {
		resp, body := from(attacker, "airlock_wrong")
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests &&
			(resp.Header.Get("Retry-After") != "3" || !strings.Contains(body, `"id":1`) || !strings.Contains(body, "rate_limited: too many failed authentications from "+attacker)) {
			t.Fatalf("a throttled attempt: Retry-After %q, body %s; want 3 s (20 failures a minute) and a JSON-RPC error answering id 1", resp.Header.Get("Retry-After"), body)
		}
	}
	if statuses[http.StatusUnauthorized] != 5 || statuses[http.StatusTooManyRequests] != 20 {
		t.Fatalf("25 wrong tokens: %v, want 5 × 401 then 20 × 429", statuses)
	}
	if resp, body := from(bystander, h.secrets[h.agent.ID]); resp.StatusCode != http.StatusOK {
		t.Fatalf("a valid token from another address during the attack: %d %s", resp.StatusCode, body)
	}
	if resp, body := from(attacker, h.secrets[h.other.ID]); resp.StatusCode != http.StatusOK {
		t.Fatalf("a token accepted before, from the attacking address: %d %s", resp.StatusCode, body)
	}
	if got := logs.Containing("address=" + attacker); len(got) != 1 {
		t.Fatalf("log lines naming the attacker: %q, want 1", got)
	}
}
