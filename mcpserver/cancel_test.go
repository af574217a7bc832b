package mcpserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCancelledCallLogged: a call that ends while it waits because the
// client cancelled it (notifications/cancelled), closed the HTTP request
// that carried it, or because the server is shutting down, is logged at
// info as a cancellation that names the call and why — never as an
// internal error.
func TestCancelledCallLogged(t *testing.T) {
	t.Parallel()
	const waitCall = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"approval_status","arguments":{"approvalId":"%s","waitSeconds":60}}}`
	for _, tt := range []struct {
		name   string
		reason string
		// cancel ends the waiting call.
		cancel func(t *testing.T, w *waitingCall)
	}{
		{"notifications/cancelled", "the client cancelled it", func(t *testing.T, w *waitingCall) {
			resp, body := w.h.do(t, raw{body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"the user pressed Esc"}}`,
				secret: w.h.secrets[w.h.agent.ID], header: w.header})
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: %d %s", resp.StatusCode, body)
			}
			if got := <-w.answer; !strings.Contains(got, `{"jsonrpc":"2.0","id":5,"error":{"code":-32800,"message":"request cancelled: the client cancelled it"}}`) {
				t.Errorf("the cancelled call's response: %s", got)
			}
		}},
		{"the HTTP request going away", "the client closed the HTTP request that carried the call", func(t *testing.T, w *waitingCall) {
			w.hangUp()
			<-w.answer
		}},
		{"the server shutting down", "the server is shutting down", func(t *testing.T, w *waitingCall) {
			w.shutdown()
			<-w.answer
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := startWaitingCall(t, waitCall)
			tt.cancel(t, w)
			assertCancelLogged(t, w.log, w.approvalID, tt.reason)
			awaitWaiters(t, w.h.bundle, 0) // the wait ended with the call
		})
	}

	t.Run("in process, the SDK client cancels", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		log := newLogRecorder()
		srv := New(Config{Service: b.svc, Logger: log.logger()})
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(t.Context(), st, b.agent)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { cs.Close(); ss.Wait() }()
		id := str(newClient(t, cs).ok(ToolApprovalRequest, requestArgs("cancel", nil)), "approvalId")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolApprovalStatus, Arguments: map[string]any{"approvalId": id, "waitSeconds": 60}})
			done <- err
		}()
		awaitWaiters(t, b, 1)
		cancel()
		if err := <-done; err == nil {
			t.Error("the cancelled call succeeded")
		}
		assertCancelLogged(t, log, id, "the client cancelled it")
	})
}

// TestStdioCancelledCall: notifications/cancelled on the bridge's stdin
// ends the call there and on the server; both log it at info, and the
// bridge answers the call with the cancellation.
func TestStdioCancelledCall(t *testing.T) {
	t.Parallel()
	serverLog, bridgeLog := newLogRecorder(), newLogRecorder()
	h := setupHTTP(t, func(c *Config) { c.Logger = serverLog.logger() })
	id := str(h.connect(t, h.agent).ok(ToolApprovalRequest, requestArgs("cancel", nil)), "approvalId")
	stdio := h.rawStdio(t, bridgeLog.logger())
	stdio.write(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"approval_status","arguments":{"approvalId":"`+id+`","waitSeconds":60}}}`)
	awaitWaiters(t, h.bundle, 1)
	stdio.write(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	if got, want := stdio.next(t), `{"jsonrpc":"2.0","id":5,"error":{"code":-32800,"message":"request cancelled: the client cancelled it"}}`; got != want {
		t.Errorf("answered %s\nwant %s", got, want)
	}
	// The bridge's SDK client both sends notifications/cancelled and
	// closes the call's HTTP request: the server sees whichever is first.
	assertCancelLogged(t, serverLog, id, "the client cancelled it", "the client closed the HTTP request that carried the call")
	r := bridgeLog.await(t, "the bridge's cancellation", func(r logRecord) bool { return r.msg == "MCP tool call cancelled" })
	if r.level != slog.LevelInfo || r.attrs["tool"] != ToolApprovalStatus || r.attrs["reason"] != "the client cancelled it" {
		t.Errorf("the bridge logged %v %q %v", r.level, r.msg, r.attrs)
	}
	if errs := bridgeLog.at(slog.LevelWarn); len(errs) != 0 {
		t.Errorf("the bridge logged %v", errs)
	}
	awaitWaiters(t, h.bundle, 0)
}

// waitingCall is an approval_status call waiting for a decision over raw
// HTTP, on a server of its own.
type waitingCall struct {
	h          *httpBundle
	log        *logRecorder
	header     map[string]string
	approvalID string
	answer     <-chan string // the call's HTTP response body, once done
	hangUp     func()        // closes the call's HTTP request
	shutdown   func()        // shuts the server down
}

// startWaitingCall posts call (with %s for the approval ID) and returns
// once the provider holds its wait.
func startWaitingCall(t *testing.T, call string) *waitingCall {
	t.Helper()
	w := &waitingCall{log: newLogRecorder()}
	ctx, shutdown := context.WithCancel(context.Background())
	w.h = setupHTTP(t, func(c *Config) { c.Logger = w.log.logger(); c.Context = ctx })
	t.Cleanup(shutdown) // first: ends the MCP sessions
	w.shutdown = shutdown
	w.approvalID = str(w.h.connect(t, w.h.agent).ok(ToolApprovalRequest, requestArgs("cancel", nil)), "approvalId")
	w.header = map[string]string{"Mcp-Session-Id": w.h.session(t, w.h.agent), "Mcp-Protocol-Version": "2025-06-18"}

	reqCtx, hangUp := context.WithCancel(t.Context())
	t.Cleanup(hangUp)
	w.hangUp = hangUp
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, w.h.url, strings.NewReader(strings.Replace(call, "%s", w.approvalID, 1)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+w.h.secrets[w.h.agent.ID])
	for k, v := range w.header {
		req.Header.Set(k, v)
	}
	answer := make(chan string, 1)
	w.answer = answer
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answer <- string(body)
	}()
	awaitWaiters(t, w.h.bundle, 1)
	return w
}

// assertCancelLogged checks that log has the cancellation of an
// approval_status call for approvalID at info, for one of reasons, and no
// error at all.
func assertCancelLogged(t *testing.T, log *logRecorder, approvalID string, reasons ...string) {
	t.Helper()
	r := log.await(t, "the cancellation of approval_status", func(r logRecord) bool { return r.msg == "MCP tool call cancelled" })
	if r.level != slog.LevelInfo || r.attrs["tool"] != ToolApprovalStatus || r.attrs["approvalId"] != approvalID ||
		!slices.Contains(reasons, r.attrs["reason"]) || r.attrs["token"] == "" || r.attrs["after"] == "" {
		t.Errorf("logged %v %q %v\nwant INFO for approval_status %s, reason one of %q", r.level, r.msg, r.attrs, approvalID, reasons)
	}
	if errs := log.at(slog.LevelError); len(errs) != 0 {
		t.Errorf("logged errors: %v", errs)
	}
}

// awaitWaiters waits until the provider holds n long-poll waits. The
// provider offers nothing to wait on: poll, with a deadline.
func awaitWaiters(t *testing.T, b *bundle, n int) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d long-poll waits", n), func() bool { return b.svc.Waiters() == n })
}

// TestStdioCancelledCall2026: at 2026-07-28 a call passes through the
// bridge as its own POST; the client's notifications/cancelled ends it,
// answered -32800, and closes that POST, which the server logs as the
// cancellation, at info.
func TestStdioCancelledCall2026(t *testing.T) {
	t.Parallel()
	serverLog, bridgeLog := newLogRecorder(), newLogRecorder()
	h := setupHTTP(t, func(c *Config) { c.Logger = serverLog.logger() })
	id := str(h.connect(t, h.agent).ok(ToolApprovalRequest, requestArgs("cancel-2026", nil)), "approvalId")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- RunStdio(context.Background(), StdioConfig{URL: h.url, Token: h.secrets[h.agent.ID], In: inR, Out: outW, Logger: bridgeLog.logger()})
		outW.Close()
	}()
	out := bufio.NewScanner(outR)
	write := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"approval_status","arguments":{"approvalId":"` + id + `","waitSeconds":60},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	awaitWaiters(t, h.bundle, 1)
	write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	if !out.Scan() {
		t.Fatal("the bridge ended")
	}
	if got, want := out.Text(), `{"jsonrpc":"2.0","id":5,"error":{"code":-32800,"message":"request cancelled: the client cancelled it"}}`; got != want {
		t.Errorf("answered %s\nwant %s", got, want)
	}
	assertCancelLogged(t, serverLog, id, "the client closed the HTTP request that carried the call")
	r := bridgeLog.await(t, "the bridge's cancellation", func(r logRecord) bool { return r.msg == "MCP tool call cancelled" })
	if r.level != slog.LevelInfo || r.attrs["tool"] != ToolApprovalStatus || r.attrs["reason"] != "the client cancelled it" {
		t.Errorf("the bridge logged %v %q %v", r.level, r.msg, r.attrs)
	}
	if errs := bridgeLog.at(slog.LevelWarn); len(errs) != 0 {
		t.Errorf("the bridge logged %v", errs)
	}
	awaitWaiters(t, h.bundle, 0)
	inW.Close()
	for out.Scan() {
	}
	if err := <-done; err != nil {
		t.Errorf("RunStdio: %v", err)
	}
}
