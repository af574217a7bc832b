package mcpserver

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProtocolErrors: a message the server cannot take gets the same
// JSON-RPC error over HTTP and over stdio. Each is sent as raw bytes (no SDK
// client would send them) and the whole response is compared.
func TestProtocolErrors(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	in := map[string]string{"Mcp-Session-Id": h.session(t, h.agent), "Mcp-Protocol-Version": "2025-06-18"}
	stdio := h.rawStdio(t, slog.New(slog.DiscardHandler))

	const idAndNoMethod = `{"jsonrpc":"2.0","id":8,"error":{"code":-32600,"message":"invalid request: a message with an id must have a \"method\" (a request), or a \"result\" or an \"error\" (a response)"}}`
	tests := []struct {
		name    string
		message string
		want    string // the JSON-RPC response on both transports ("": none)
		status  int    // over HTTP
		// notification: stdio answers nothing (JSON-RPC never answers a
		// notification); HTTP must answer the POST, with want.
		notification bool
	}{
		{"an unknown method", `{"jsonrpc":"2.0","id":7,"method":"foo/bar"}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found: \"foo/bar\""}}`, http.StatusOK, false},
		{"a method of a later revision, with a string id", `{"jsonrpc":"2.0","id":"t-1","method":"tasks/list","params":{}}`,
			`{"jsonrpc":"2.0","id":"t-1","error":{"code":-32601,"message":"method not found: \"tasks/list\""}}`, http.StatusOK, false},
		{"an id and params but no method", `{"jsonrpc":"2.0","id":8,"params":{}}`, idAndNoMethod, http.StatusBadRequest, false},
		{"an id and nothing else", `{"jsonrpc":"2.0","id":8}`, idAndNoMethod, http.StatusBadRequest, false},
		{"malformed JSON", `{"jsonrpc":"2.0","id":9,"method":`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: the message is not valid JSON"}}`, http.StatusBadRequest, false},
		{"not JSON-RPC 2.0", `{"jsonrpc":"1.0","id":10,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":10,"error":{"code":-32600,"message":"invalid request: not a JSON-RPC 2.0 message (invalid message version tag \"1.0\"; expected \"2.0\")"}}`, http.StatusBadRequest, false},
		{"a batch", `[{"jsonrpc":"2.0","id":11,"method":"ping"}]`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported (MCP 2025-06-18 removed them): send one message at a time"}}`, http.StatusBadRequest, false},
		{"a call without its params", `{"jsonrpc":"2.0","id":12,"method":"tools/call"}`,
			`{"jsonrpc":"2.0","id":12,"error":{"code":-32600,"message":"invalid request: missing required \"params\""}}`, http.StatusBadRequest, false},
		{"a notification sent with an id", `{"jsonrpc":"2.0","id":13,"method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":13,"error":{"code":-32600,"message":"invalid request: unexpected id for \"notifications/initialized\""}}`, http.StatusBadRequest, false},
		{"an unknown notification", `{"jsonrpc":"2.0","method":"notifications/foo"}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"method not found: \"notifications/foo\""}}`, http.StatusBadRequest, true},
		{"a call sent without an id", `{"jsonrpc":"2.0","method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: missing id for \"tools/list\""}}`, http.StatusBadRequest, true},
		{"a response to no request is accepted and dropped", `{"jsonrpc":"2.0","id":14,"result":{}}`, "", http.StatusAccepted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/http", func(t *testing.T) {
			resp, body := h.do(t, raw{body: tt.message, secret: h.secrets[h.agent.ID], header: in})
			if resp.StatusCode != tt.status || strings.TrimSuffix(body, "\n") != tt.want {
				t.Errorf("%d %s\nwant %d %s", resp.StatusCode, body, tt.status, tt.want)
			}
			if ct := resp.Header.Get("Content-Type"); tt.want != "" && ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
		})
		t.Run(tt.name+"/stdio", func(t *testing.T) {
			want := []string{tt.want}
			if tt.notification {
				want = nil
			}
			if got := stdio.send(t, tt.message, len(want)); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("answered:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}

	t.Run("the session goes on", func(t *testing.T) {
		const list = `{"jsonrpc":"2.0","id":15,"method":"tools/list"}`
		if resp, body := h.do(t, raw{body: list, secret: h.secrets[h.agent.ID], header: in}); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"approval_request"`) {
			t.Errorf("http: %d %s", resp.StatusCode, body)
		}
		if got := stdio.send(t, list, 1); len(got) != 1 || !strings.HasPrefix(got[0], `{"jsonrpc":"2.0","id":15,"result":{`) || !strings.Contains(got[0], `"approval_request"`) {
			t.Errorf("stdio: %q", got)
		}
	})
}

// rawStdio is the stdio bridge run in process against a real HTTP server,
// driven with raw lines on its stdin.
type rawStdio struct {
	in    *io.PipeWriter
	lines <-chan string // its stdout, line by line; closed at its end
	sync  int           // the id of the last ping send used
}

// rawStdio starts the bridge against h as h.agent, logging to log, and
// initializes its MCP session by hand. It stops when the test ends.
func (h *httpBundle) rawStdio(t *testing.T, log *slog.Logger) *rawStdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- RunStdio(context.Background(), StdioConfig{URL: h.url, Token: h.secrets[h.agent.ID], In: inR, Out: outW, Logger: log})
		outW.Close()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, outR)
	}()
	t.Cleanup(func() {
		inW.Close()
		for range lines {
		}
		if err := <-done; err != nil {
			t.Errorf("RunStdio: %v", err)
		}
	})
	s := &rawStdio{in: inW, lines: lines}
	s.write(t, initializeBody)
	if got := s.next(t); !strings.Contains(got, `"protocolVersion":"2025-06-18"`) {
		t.Fatalf("initialize over stdio: %s", got)
	}
	s.write(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *rawStdio) write(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// next returns the next line of output, failing the test if none comes
// within a generous bound.
func (s *rawStdio) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			t.Fatal("the stdio bridge ended")
		}
		return line
	case <-time.After(30 * time.Second):
		t.Fatal("no answer on stdout")
	}
	return ""
}

// send writes line, then a ping, and returns the lines answered to line:
// every line but the ping's response, until that has come and n others
// have. The SDK answers concurrently, so the ping's response may come
// first; a line answered later than that would show up in the next send.
func (s *rawStdio) send(t *testing.T, line string, n int) []string {
	t.Helper()
	s.sync++
	id := `"sync-` + strconv.Itoa(s.sync) + `"`
	s.write(t, line)
	s.write(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)
	var answers []string
	for pinged := false; !pinged || len(answers) < n; {
		if got := s.next(t); got == `{"jsonrpc":"2.0","id":`+id+`,"result":{}}` {
			pinged = true
		} else {
			answers = append(answers, got)
		}
	}
	return answers
}
