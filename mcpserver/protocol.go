package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// JSON-RPC protocol errors, answered alike over HTTP and stdio (docs/mcp.md
// "Protocol errors"):
//
//   - not JSON, or nothing: -32700;
//   - a batch, a JSON value that is not a JSON-RPC 2.0 message, or a
//     message with an id but no method, result or error: -32600, before the
//     SDK sees it (checkMessage);
//   - a request for a method the server does not have: -32601; a request
//     the SDK will not route (a call without its params, a notification
//     sent with an id, …): -32600. Over stdio the SDK answers these itself;
//     over HTTP it answers them with plain text, which rpcRefusal turns into
//     the same JSON-RPC errors.
//
// Over stdio a notification is never answered (JSON-RPC forbids it); over
// HTTP every POST needs a status, so a refused notification gets 400 with
// the error and id null, as the transport spec allows.

// checkMessage reports whether data is one JSON-RPC 2.0 message the SDK can
// read; when it is not, it returns the error to answer it with, and the
// message's id when it has a usable one. Its messages are the same on both
// transports.
func checkMessage(data []byte) (msg jsonrpc.Message, id json.RawMessage, code int, text string, ok bool) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil, jsonrpc.CodeParseError, "parse error: the message is empty: send one JSON-RPC message", false
	}
	if !json.Valid(trimmed) {
		return nil, nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON", false
	}
	if trimmed[0] == '[' {
		return nil, nil, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported (MCP 2025-06-18 removed them): send one message at a time", false
	}
	msg, err := decodeMessage(trimmed)
	if err != nil {
		return nil, requestID(trimmed), jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message (" + err.Error() + ")", false
	}
	if _, isResponse := msg.(*jsonrpc.Response); isResponse && !hasKey(trimmed, "result", "error") {
		// The SDK reads any message with an id and no method as a
		// response to one of its own requests, and drops it: the sender
		// would never hear that its request was not one.
		return nil, requestID(trimmed), jsonrpc.CodeInvalidRequest, `invalid request: a message with an id must have a "method" (a request), or a "result" or an "error" (a response)`, false
	}
	return msg, nil, 0, "", true
}

// wireMessage is a JSON-RPC message as the SDK reads one (v1.8.0,
// jsonrpc2.wireDecode).
type wireMessage struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// maxMessageDepth is the nesting the SDK reads (v1.8.0, internal/json).
const maxMessageDepth = 1000

// errMessageDepth is the SDK's error for deeper nesting.
var errMessageDepth = fmt.Errorf("json: exceeded maximum nesting depth of %d", maxMessageDepth)

// decodeMessage is jsonrpc.DecodeMessage (v1.8.0) for one valid JSON
// value: the same decoder (segmentio/encoding, member names matched
// exactly), the same nesting limit, the same messages and errors, but for
// the name of the Go type an error names (FuzzDecodeMessage compares them). The SDK's own allocates a 32 KiB read
// buffer for each of its two decodes, whatever the message's size: on
// every POST to /mcp that was about a fifth of the server's allocation.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	// The SDK's decoder reads the value alone, without the space after it.
	data = bytes.TrimRight(data, " \t\r\n")
	if nested(data) > maxMessageDepth {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", errMessageDepth)
	}
	var msg wireMessage
	if _, err := segjson.Parse(data, &msg, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if msg.VersionTag != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", msg.VersionTag, "2.0")
	}
	id, err := jsonrpc.MakeID(msg.ID)
	if err != nil {
		return nil, err
	}
	if len(msg.Method) > 0 {
		var method string
		if _, err := segjson.Parse(msg.Method, &method, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: msg.Params}, nil
	}
	if !id.IsValid() {
		return nil, errInvalidRequest
	}
	resp := &jsonrpc.Response{ID: id, Result: msg.Result}
	if msg.Error != nil {
		resp.Error = msg.Error
	}
	return resp, nil
}

// errInvalidRequest is the SDK's error for a message with neither a
// method nor an id (jsonrpc2.ErrInvalidRequest).
var errInvalidRequest = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}

// nested returns how deeply data's objects and arrays nest, counted as the
// SDK counts them: brackets outside strings.
func nested(data []byte) int {
	var depth, deepest int
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return deepest
}

// hasKey reports whether the JSON object obj has any of keys, spelt
// exactly (the SDK reads member names case-sensitively).
func hasKey(obj []byte, keys ...string) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(obj, &members) != nil {
		return false
	}
	for _, k := range keys {
		if _, ok := members[k]; ok {
			return true
		}
	}
	return false
}

// requestID returns the id of a single JSON-RPC request, or nil.
func requestID(body []byte) json.RawMessage {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return nil
	}
	switch v := bytes.TrimSpace(probe.ID); {
	case len(v) == 0:
		return nil
	case v[0] == '"' || v[0] == '-' || ('0' <= v[0] && v[0] <= '9'):
		return v
	}
	return nil
}

// callID returns the id of msg when it is a call (a request with an id),
// and nil for a notification or a response: only a call is answered by id.
func callID(msg jsonrpc.Message) json.RawMessage {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return nil
	}
	id, err := json.Marshal(req.ID.Raw())
	if err != nil {
		return nil
	}
	return id
}

// sdkNotHandled starts the SDK's error for a method it does not have
// (jsonrpc2.ErrNotHandled, which its stdio side answers with -32601).
const sdkNotHandled = "JSON RPC not handled"

// rpcRefusal stands between the SDK's streamable HTTP handler and the
// client for one POST. The SDK (v1.8.0, servePOST) refuses a message it
// will not route with a plain-text 400 — `JSON RPC not handled: "foo/bar"
// unsupported`, `invalid request: missing required "params"` — where its
// stdio side answers a JSON-RPC error. rpcRefusal holds such a response
// back, and answer writes the JSON-RPC error instead. Every other response
// passes through as the SDK writes it, streamed. TestProtocolErrors pins
// the SDK's texts, so an upgrade that changes them fails there.
type rpcRefusal struct {
	http.ResponseWriter
	held    bool            // a plain-text 400 is being held back
	text    strings.Builder // its body, up to maxRefusalText
	started bool            // the SDK's response went out
}

// maxRefusalText bounds the SDK text kept for the error's message.
const maxRefusalText = 1 << 10

func (w *rpcRefusal) WriteHeader(status int) {
	if !w.started && !w.held && status == http.StatusBadRequest && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.held = true
		return
	}
	w.started = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *rpcRefusal) Write(b []byte) (int, error) {
	if w.held {
		if room := maxRefusalText - w.text.Len(); room > 0 {
			w.text.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	w.started = true
	return w.ResponseWriter.Write(b)
}

func (w *rpcRefusal) Flush() {
	if !w.held {
		w.started = true
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *rpcRefusal) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// answer writes the JSON-RPC error for a held refusal of msg, on out (the
// writer under w); it reports whether there was one. A call for a method
// the server does not have is answered like any call, 200 with the error
// (a 404 would tell the client its session is gone); anything else the SDK
// refused stays 400.
func (w *rpcRefusal) answer(out http.ResponseWriter, msg jsonrpc.Message) (status, code int, text string, held bool) {
	if !w.held {
		return 0, 0, "", false
	}
	sdkText := strings.TrimSpace(w.text.String())
	status, code, text = http.StatusBadRequest, jsonrpc.CodeInvalidRequest, sdkText
	id := callID(msg)
	if strings.HasPrefix(sdkText, sdkNotHandled) {
		code = jsonrpc.CodeMethodNotFound
		if req, ok := msg.(*jsonrpc.Request); ok {
			text = fmt.Sprintf("method not found: %q", req.Method)
		}
		if id != nil {
			status = http.StatusOK
		}
	}
	writeRPCError(out, status, id, code, text, nil)
	return status, code, text, true
}

// writeRPCError writes a JSON-RPC error response for the request with the
// given id (nil: null) as one line of application/json, with an HTTP status
// (ignored by the stdio writer).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data json.RawMessage) {
	if id == nil {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	body, _ := airlock.EncodeJSON(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, msg, data}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// errClientGone is why a call ends when the HTTP request that carried it
// does (boundToRequest).
var errClientGone = errors.New("the client closed the HTTP request that carried the call")

// tokenInfoRequest is the auth.TokenInfo.Extra key that carries the
// context of the HTTP request a call came in, for boundToRequest.
const tokenInfoRequest = "airlock.request"

// boundToRequest returns ctx, ended too when the HTTP request that carried
// the call ends: the client went away (or the server is shutting down).
// The call's response could not reach the client then (Airlock keeps no
// event store to replay it from), and a wait such as approval_status's
// would hold on for nothing. The SDK ties a call to its session, not to
// its request, for the revisions Airlock speaks. stop releases the tie; in
// process there is none.
func boundToRequest(ctx context.Context, req *mcp.CallToolRequest) (_ context.Context, stop func()) {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return ctx, func() {}
	}
	carrier, ok := req.Extra.TokenInfo.Extra[tokenInfoRequest].(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	release := context.AfterFunc(carrier, func() { cancel(errClientGone) })
	return ctx, func() {
		release()
		cancel(nil)
	}
}

// cancelReason says why a call's context ended.
func cancelReason(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case cause == nil:
		return "it was not cancelled"
	case errors.Is(cause, errClientGone):
		return cause.Error()
	case errors.Is(cause, context.DeadlineExceeded):
		return "its deadline passed"
	case errors.Is(cause, context.Canceled):
		// notifications/cancelled, or (in process) the context the
		// session was connected with.
		return "the client cancelled it"
	case errors.Is(cause, io.EOF), errors.Is(cause, io.ErrClosedPipe), errors.Is(cause, mcp.ErrConnectionClosed):
		return "the client closed the connection"
	default:
		return "its MCP connection ended (" + cause.Error() + ")"
	}
}

// codeRequestCancelled is the JSON-RPC error code of a cancelled call: the
// one LSP gives it, as neither JSON-RPC nor MCP names one.
const codeRequestCancelled = -32800

// cancelledError is the JSON-RPC error a cancelled call is answered with.
func cancelledError(reason string) error {
	return &jsonrpc.Error{Code: codeRequestCancelled, Message: "request cancelled: " + reason}
}
