package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Pass-through at 2026-07-28 (docs/mcp.md, "`airlock mcp` (stdio)"). A
// stdio client that speaks 2026-07-28 names its revision and declares its
// capabilities in each request's _meta, and the server answers from them:
// a task to a client with the Tasks extension, input_required to one with
// URL-mode elicitation. The SDK's client would put the bridge's own
// capabilities (none) in their place and could not carry a task back, so
// the bridge sends such a request to the server itself, as one POST with
// the client's _meta, and hands the server's answer back unchanged.
// tasks/get, tasks/update and tasks/cancel, which the SDK does not route,
// are relayed line for line. Nothing is kept between requests: a task
// lives in the server's store, so a new bridge reads it as the old one.

// rawResult is a result passed through as the server wrote it.
type rawResult struct {
	mcp.ResultBase // the SDK's _meta; the server's own is in raw
	raw            json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// at2026 returns the revision a request's _meta names when it is
// 2026-07-28 or later, and "" otherwise.
func at2026(meta map[string]any) string {
	v, _ := meta[mcp.MetaKeyProtocolVersion].(string)
	if v < Revision2026 {
		return ""
	}
	return v
}

// passThrough sends a tools/call of a client at 2026-07-28 to the server
// with its own _meta, inputResponses and requestState, and returns the
// server's result as it is: complete, input_required or a task. Other
// requests go on to the SDK's relay.
func (u *upstream) passThrough(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		version := at2026(call.Params.Meta)
		if version == "" {
			return next(ctx, method, req)
		}
		params, err := json.Marshal(call.Params)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call params cannot be relayed: " + err.Error()}
		}
		body, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      int             `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}{"2.0", 1, method, params})
		// The server sends progress with the client's progressToken, which
		// it read from the _meta passed through: pass it on as it is.
		var notify func([]byte)
		if _, ok := call.Params.Meta["progressToken"]; ok {
			notify = func(msg []byte) {
				var n struct {
					Method string `json:"method"`
				}
				if json.Unmarshal(msg, &n) == nil && n.Method == "notifications/progress" {
					u.out.writeLine(msg)
				}
			}
		}
		name := call.Params.Name
		status, msg, err := u.post(ctx, method, name, version, body, notify)
		if err != nil {
			if ctx.Err() != nil {
				reason := cancelReason(ctx)
				u.log.Info("MCP tool call cancelled", "tool", name, "reason", reason)
				return nil, cancelledError(reason)
			}
			u.log.Warn("call to the Airlock server failed", "tool", name, "err", err)
			return unreachable(err), nil
		}
		var resp struct {
			Result json.RawMessage `json:"result"`
			Error  *jsonrpc.Error  `json:"error"`
		}
		if json.Unmarshal(msg, &resp) != nil || (resp.Result == nil && resp.Error == nil) {
			return unreachable(fmt.Errorf("HTTP %d without a JSON-RPC response", status)), nil
		}
		if status == http.StatusTooManyRequests || status >= 500 {
			// Nothing about the call is wrong: the store or the token's
			// rate budget cannot take it now. A result, as the SDK's
			// relay answers these, so the model may retry.
			text := fmt.Sprintf("HTTP %d", status)
			if resp.Error != nil {
				text += ": " + resp.Error.Message
			}
			return unreachable(errors.New(text)), nil
		}
		if resp.Error != nil {
			return nil, resp.Error
		}
		return &rawResult{raw: resp.Result}, nil
	}
}

// relayTask relays tasks/get, tasks/update or tasks/cancel (line, a call
// with id) to the server as it is, and writes the server's answer to out.
func (u *upstream) relayTask(ctx context.Context, line []byte, id json.RawMessage, req *jsonrpc.Request) {
	var p struct {
		TaskID any            `json:"taskId"`
		Meta   map[string]any `json:"_meta"`
	}
	json.Unmarshal(req.Params, &p)
	version := at2026(p.Meta)
	if version == "" {
		// The server says what is missing (_meta, its revision).
		version = Revision2026
	}
	name, _ := p.TaskID.(string)
	status, msg, err := u.post(ctx, req.Method, name, version, line, nil)
	if err == nil && !isResponse(msg) {
		err = fmt.Errorf("HTTP %d without a JSON-RPC response", status)
	}
	if err != nil {
		if ctx.Err() == nil {
			u.log.Warn("task method to the Airlock server failed", "method", req.Method, "err", err)
		}
		u.out.rpcError(id, -32000, "unavailable: the Airlock server could not be reached ("+err.Error()+"); the task is kept in its store: ask again")
		return
	}
	u.out.writeLine(msg)
}

// post sends one JSON-RPC request to the server at 2026-07-28 (version),
// with the headers that revision asks for, and returns the HTTP status and
// the response message: the body, or the event of an SSE stream that is
// the response (notify gets each other message of the stream). The
// message is at most maxLineBytes.
func (u *upstream) post(ctx context.Context, method, name, version string, body []byte, notify func([]byte)) (int, []byte, error) {
	if bound := u.callBound(method, name); bound > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(headerProtocolVersion, version)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := u.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg, err := io.ReadAll(io.LimitReader(resp.Body, maxLineBytes+1))
		if err == nil && len(msg) > maxLineBytes {
			err = fmt.Errorf("the server's answer exceeds %d bytes", maxLineBytes)
		}
		return resp.StatusCode, msg, err
	}
	// An SSE stream: events of "data:" lines, each event one message,
	// the last of them the response.
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var data []byte
	for {
		line, tooLong, err := readLine(r, maxLineBytes)
		if tooLong || len(data) > maxLineBytes {
			return resp.StatusCode, nil, fmt.Errorf("an event of the server's answer exceeds %d bytes", maxLineBytes)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		case len(line) == 0 && len(data) > 0:
			if isResponse(data) {
				return resp.StatusCode, data, nil
			}
			if notify != nil {
				notify(data)
			}
			data = nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return resp.StatusCode, nil, fmt.Errorf("the server's answer ended before its response: %w", err)
		}
	}
}

// callBound is how long a request to the server may take: the HTTP
// client's timeout, or for approval_prompt, which waits for a person up to
// PromptWait, that wait and a minute more, so a permission prompt relayed
// over stdio is not cut short by the bridge. 0: no bound.
func (u *upstream) callBound(method, name string) time.Duration {
	if u.timeout <= 0 {
		return 0
	}
	if method == "tools/call" && name == ToolApprovalPrompt {
		return max(u.timeout, PromptWait+time.Minute)
	}
	return u.timeout
}

// isResponse reports whether msg is a JSON-RPC response: a result or an
// error, not a request or a notification.
func isResponse(msg []byte) bool {
	return hasKey(msg, "result", "error") && !hasKey(msg, "method")
}

// writeLine writes one JSON message as one line: compacted, since an SSE
// event may spread it over several, and stdio is newline-delimited.
func (s *syncWriter) writeLine(msg []byte) {
	var b bytes.Buffer
	if json.Compact(&b, msg) != nil {
		return // not JSON: isResponse and the notify filter let none through
	}
	b.WriteByte('\n')
	s.Write(b.Bytes())
}
