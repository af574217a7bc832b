package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestStdioPassThroughFailures: what `airlock mcp` answers a client at
// 2026-07-28 when the server cannot: a tools/call the server answers 503
// (its store cannot serve) or 429 is an isError result saying it may be
// retried, with the server's reason; a tools/call or a tasks/get that
// cannot reach the server is an unavailable result or error naming the
// request's id; a tasks/get the server refuses (another agent's task) is
// the server's own error. Each goes through a proxy in front of a real
// server, which fails what the test tells it to.
func TestStdioPassThroughFailures(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	target, err := url.Parse(strings.TrimSuffix(h.url, "/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	var fail atomic.Value // "", "503", "429", "hangup"
	fail.Store("")
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Header.Get("Mcp-Method")
		if method != "tools/call" && !strings.HasPrefix(method, "tasks/") {
			proxy.ServeHTTP(w, r)
			return
		}
		switch fail.Load() {
		case "503":
			writeRPCError(w, http.StatusServiceUnavailable, json.RawMessage(`1`), -32000, "unavailable: the store cannot serve now", nil)
		case "429":
			writeRPCError(w, http.StatusTooManyRequests, json.RawMessage(`1`), -32000, "rate_limited: this token is over its request rate", nil)
		case "hangup":
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()

	ask, stop := stdioLines(t, srv.URL, h.secrets[h.agent.ID], nil)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"work_list","arguments":{},` + meta + `}}`
	taskGet := `{"jsonrpc":"2.0","id":"g","method":"tasks/get","params":{"taskId":"tsk_notyours",` + meta + `}}`

	if m := ask(call); m["id"] != float64(7) || m["result"].(map[string]any)["isError"] == true {
		t.Fatalf("work_list through the proxy: %v", m)
	}
	if m := ask(taskGet); m["id"] != "g" || !strings.Contains(toJSON(m["error"]), "-32602") {
		t.Errorf("tasks/get of a task not the caller's: %v, want the server's -32602", m)
	}
	for _, tc := range []struct{ fail, want string }{
		{"503", "the store cannot serve now"},
		{"429", "over its request rate"},
		{"hangup", "could not be reached"},
	} {
		fail.Store(tc.fail)
		m := ask(call)
		res, _ := m["result"].(map[string]any)
		if m["id"] != float64(7) || res["isError"] != true || !strings.Contains(toJSON(res), "unavailable: ") || !strings.Contains(toJSON(res), tc.want) {
			t.Errorf("tools/call when the server answers %s: %v, want an unavailable isError result with %q", tc.fail, m, tc.want)
		}
	}
	fail.Store("hangup")
	if m := ask(taskGet); m["id"] != "g" || !strings.Contains(toJSON(m["error"]), "unavailable: the Airlock server could not be reached") {
		t.Errorf("tasks/get when the server cannot be reached: %v, want an unavailable error with the id", m)
	}
	stop()
}

// stdioLines runs the stdio bridge in process against url as token's
// holder (with hc, when not nil), and returns ask, which writes a line to
// its stdin and returns the next line of its stdout decoded, and stop,
// which ends its stdin and checks that it returned nil. Nothing is sent
// first: a client at 2026-07-28 needs no initialize.
func stdioLines(t *testing.T, url, token string, hc *http.Client) (ask func(line string) map[string]any, stop func()) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- RunStdio(context.Background(), StdioConfig{URL: url, Token: token, In: inR, Out: outW, HTTPClient: hc})
		outW.Close()
	}()
	lines := make(chan map[string]any)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var m map[string]any
			json.Unmarshal(sc.Bytes(), &m)
			lines <- m
		}
	}()
	ask = func(line string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("the stdio bridge ended")
			}
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("no answer on stdout")
		}
		return nil
	}
	stop = func() {
		inW.Close()
		for range lines {
		}
		if err := <-done; err != nil {
			t.Errorf("RunStdio: %v", err)
		}
	}
	return ask, stop
}

// TestStdioPromptOutlivesTimeout: approval_prompt through the bridge
// waits for its person longer than the bridge's HTTP timeout (here a
// second; two minutes by default, where the prompt waits up to ten),
// passed through at 2026-07-28 and made by the bridge's own client at
// 2025-06-18: it is bounded by its own wait instead, and answers allow once
// approved.
func TestStdioPromptOutlivesTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ revision, init, meta string }{
		{Revision2026, "", `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`},
		{"2025-06-18", initializeBody, ""},
	} {
		t.Run(tc.revision, func(t *testing.T) {
			t.Parallel()
			h := setupHTTP(t, nil)
			const timeout = time.Second
			ask, stop := stdioLines(t, h.url, h.secrets[h.agent.ID], &http.Client{Timeout: timeout})
			defer stop()
			if tc.init != "" {
				ask(tc.init)
				// A notification has no answer: a ping's comes next.
				ask(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
			}
			answer := make(chan map[string]any, 1)
			start := time.Now()
			go func() {
				answer <- ask(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"approval_prompt","arguments":{"tool_name":"Bash","input":{"command":"make release"},"tool_use_id":"toolu_long"}` + tc.meta + `}}`)
			}()
			r := h.pendingPrompt(t, "Bash")
			// What is tested is the wait outlasting the timeout: let it.
			time.Sleep(timeout + timeout/2 - time.Since(start))
			if _, err := h.decide(t, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
				t.Fatalf("decide after %s: %v", time.Since(start), err)
			}
			m := <-answer
			res, _ := m["result"].(map[string]any)
			if !strings.Contains(toJSON(res), `\"behavior\":\"allow\"`) {
				t.Fatalf("approval_prompt decided after %s, past the bridge's HTTP timeout of %s: %v, want allow", time.Since(start), timeout, m)
			}
		})
	}
}

// TestStdioTraceparent: the W3C trace context in a call's _meta reaches
// the server through `airlock mcp`, at 2026-07-28 (passed through) and at
// 2025-06-18 (the bridge's own client sends it on), and the request the
// call creates keeps that trace on its request.created event.
func TestStdioTraceparent(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	for _, tc := range []struct{ revision, traceID, init string }{
		{Revision2026, "4bf92f3577b34da6a3ce929d0e0e4736", ""},
		{"2025-06-18", "5bf92f3577b34da6a3ce929d0e0e4737", initializeBody},
	} {
		t.Run(tc.revision, func(t *testing.T) {
			ask, stop := stdioLines(t, h.url, h.secrets[h.agent.ID], nil)
			defer stop()
			meta := `"_meta":{"traceparent":"00-` + tc.traceID + `-00f067aa0ba902b7-01"}`
			if tc.init != "" {
				ask(tc.init)
				// A notification has no answer: a ping's comes next.
				if m := ask(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":"p","method":"ping"}`); m["id"] != "p" {
					t.Fatalf("ping: %v", m)
				}
			} else {
				meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"traceparent":"00-` + tc.traceID + `-00f067aa0ba902b7-01"}`
			}
			m := ask(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"approval_request","arguments":{"kind":"agent_request","title":"traced","proposal":{"mode":"advisory"},"idempotencyKey":"trace-` + tc.revision + `"},` + meta + `}}`)
			res, _ := m["result"].(map[string]any)
			sc, _ := res["structuredContent"].(map[string]any)
			id, _ := sc["approvalId"].(string)
			if id == "" {
				t.Fatalf("approval_request: %v", m)
			}
			e, err := h.store.CreatedEvent(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if e.TraceID != tc.traceID {
				t.Errorf("request.created keeps trace %q, want the _meta's %s", e.TraceID, tc.traceID)
			}
		})
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
