package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioRelay runs the stdio bridge in process against a real HTTP
// server that speaks only the revisions with sessions, as an Airlock from
// before 2026-07-28 did (olderServer): the bridge falls back to
// 2025-11-25; tools relay with their results unchanged; when the server
// forgets the session (a restart), the next call reconnects and goes
// through; the bridge returns nil when its stdin ends.
func TestStdioRelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(Config{Service: b.svc, Logger: discard, Context: ctx})
	mux := http.NewServeMux()
	mux.Handle("/mcp", olderServer(srv.HTTPHandler()))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	defer cancel() // first: ends the MCP sessions

	inR, inW := io.Pipe()   // the MCP client writes the bridge's stdin
	outR, outW := io.Pipe() // the bridge writes its stdout
	done := make(chan error, 1)
	log := newLogRecorder()
	go func() {
		done <- RunStdio(t.Context(), StdioConfig{URL: hs.URL, Token: b.secrets[b.agent.ID], In: inR, Out: outW, Logger: log.logger()})
		outW.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log.await(t, "the relay's fallback", func(r logRecord) bool {
		return r.msg == "relaying MCP over stdio" && r.attrs["revision"] == "2025-11-25"
	})
	cl := newClient(t, cs)
	if len(cl.outputs) != len(ToolNames) {
		t.Errorf("%d tools relayed, want %d", len(cl.outputs), len(ToolNames))
	}
	id := str(cl.ok(ToolApprovalRequest, requestArgs("relay", nil)), "approvalId")
	if got := cl.fail(ToolApprovalRequest, requestArgs("relay-bad", func(m map[string]any) { m["expiresInMinutes"] = 4 })); !strings.Contains(got, "expiresInMinutes must be between 5 and 10080") {
		t.Errorf("an invalid call through the bridge: %q", got)
	}

	for ss := range srv.MCP().Sessions() {
		ss.Close() // as a restarted server would have forgotten it
	}
	if st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id}); str(st, "status") != "pending" {
		t.Errorf("after the server forgot the session: %v", st)
	}

	hs.Close() // the server goes away: the bridge says so, as unavailable
	if got := cl.fail(ToolApprovalStatus, map[string]any{"approvalId": id}); !strings.HasPrefix(got, "unavailable: the Airlock server could not be reached") {
		t.Errorf("a call while the server is gone: %q", got)
	}

	if err := cs.Close(); err != nil { // closes the bridge's stdin
		t.Errorf("close: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunStdio after EOF: %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("RunStdio did not return after its stdin ended")
	}
}

// olderServer is h as an Airlock server from before 2026-07-28 answered:
// a request at that revision is refused with 400 and the unsupported-
// version error naming the revisions it spoke.
func olderServer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(headerProtocolVersion); v == Revision2026 {
			data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: ProtocolVersions[1:], Requested: v})
			writeRPCError(w, http.StatusBadRequest, nil, mcp.CodeUnsupportedProtocolVersion, "unsupported MCP-Protocol-Version", data)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestStdioBadServer: a wrong token or URL fails before anything is read,
// and nothing is written to stdout.
func TestStdioBadServer(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	for _, tt := range []struct {
		name, url, token, want string
	}{
		{"unknown token", strings.TrimSuffix(h.url, "/mcp"), "airlock_nope", "connect to Airlock at " + h.url},
		{"no token", h.url, "", "no token"},
		{"not http", "ftp://example.com", "x", "is not an http(s) URL"},
		{"a token in the URL", h.url + "?token=x", "x", "must not carry a query"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := RunStdio(t.Context(), StdioConfig{URL: tt.url, Token: tt.token, In: strings.NewReader(""), Out: &out})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout: %q", out.String())
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":       "http://127.0.0.1:8080/mcp",
		"http://127.0.0.1:8080/":      "http://127.0.0.1:8080/mcp",
		"http://127.0.0.1:8080/mcp":   "http://127.0.0.1:8080/mcp",
		"https://airlock.example/a/":  "https://airlock.example/a/mcp",
		" http://localhost:1/mcp/ ":   "http://localhost:1/mcp/",
		"https://airlock.example/mcp": "https://airlock.example/mcp",
	} {
		if got, err := Endpoint(in); err != nil || got != want {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "http://u:p@host/", "http://h/?token=x", "http://h/#f"} {
		if got, err := Endpoint(bad); err == nil {
			t.Errorf("Endpoint(%q) = %q; want an error", bad, got)
		}
	}
}

// TestFilterLines: lines that are not one JSON-RPC message are answered
// with an error and dropped; the others pass, in order.
func TestFilterLines(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`not json`,
		``,
		`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		`{"id":3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping","params":{"pad":"` + strings.Repeat("x", 200) + `"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\r",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}, "\n")
	pr, pw := io.Pipe()
	var out strings.Builder
	go filterLines(strings.NewReader(in), pw, &syncWriter{w: &out}, 150, nil)
	passed, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	wantPassed := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":5,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	if string(passed) != wantPassed {
		t.Errorf("passed:\n%s\nwant:\n%s", passed, wantPassed)
	}
	var answers []string
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		answers = append(answers, sc.Text())
	}
	want := []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: the message is not valid JSON"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported (MCP 2025-06-18 removed them): send one message at a time"}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"invalid request: not a JSON-RPC 2.0 message (invalid message version tag \"\"; expected \"2.0\")"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"message exceeds 150 bytes"}}`,
	}
	if strings.Join(answers, "\n") != strings.Join(want, "\n") {
		t.Errorf("answers:\n%s\nwant:\n%s", strings.Join(answers, "\n"), strings.Join(want, "\n"))
	}
}
