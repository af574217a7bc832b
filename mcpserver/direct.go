package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// A tools/call at 2026-07-28 is served here, not by the SDK's stateless
// handler, when it is in the shape the SDK's clients send (directCall):
// the SDK (v1.8.0) connects a session for each such request and decodes
// the body four more times, each decode with a 32 KiB buffer, which made
// a call cost the server twice what it costs at 2025-11-25
// (docs/performance.md, "What an MCP call costs at each revision").
//
// Served here, the call takes the same steps the SDK's would once its
// checks pass: the same receiving middleware (refuseUndeclared,
// taskMiddleware, traceCalls), the same tool handler, the result
// completed as the SDK completes it (content never null, resultType
// "complete", serverInfo in _meta) and framed as the SDK frames it (one
// text/event-stream event). Anything outside that shape — another header
// or _meta member, a capability that needs a session (Tasks, elicitation),
// a progress token, an unknown tool — goes to the SDK, decided before
// anything runs. TestDirectMatchesSDK and FuzzToolCall2026 send the same
// requests both ways and require the same answers.

// directCall is a tools/call Airlock answers itself.
type directCall struct {
	id      jsonrpc.ID
	params  *mcp.CallToolParamsRaw
	handler mcp.ToolHandler
}

// directToolCall reports whether r, carrying msg, is a tools/call at
// 2026-07-28 that Airlock answers itself, and returns it decoded as the
// SDK would decode it.
func (s *Server) directToolCall(r *http.Request, msg jsonrpc.Message) (directCall, bool) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method != "tools/call" || s.sdkOnly {
		return directCall{}, false
	}
	h := r.Header
	if !only(h, headerProtocolVersion, Revision2026) || !only(h, "Content-Type", "application/json") ||
		!only(h, "Accept", "application/json, text/event-stream") || !only(h, "Mcp-Method", "tools/call") ||
		len(h.Values("Last-Event-ID")) > 0 {
		return directCall{}, false
	}
	members, err := airlock.ParseObject(req.Params)
	if err != nil {
		return directCall{}, false
	}
	var name string
	for _, m := range members {
		switch m.Key {
		case "name":
			if m.Value[0] != '"' || json.Unmarshal(m.Value, &name) != nil {
				return directCall{}, false
			}
		case "arguments":
			if m.Value[0] != '{' {
				return directCall{}, false
			}
		case "_meta":
			if !s.directMeta(m.Value) {
				return directCall{}, false
			}
		default:
			return directCall{}, false
		}
	}
	handler, known := s.handlers[name]
	if !known || !only(h, "Mcp-Name", name) {
		return directCall{}, false
	}
	// The SDK's own decoder, so that arguments are the same bytes.
	var p mcp.CallToolParamsRaw
	if _, err := segjson.Parse(req.Params, &p, segjson.DontMatchCaseInsensitiveStructFields); err != nil || p.Meta == nil {
		return directCall{}, false
	}
	return directCall{id: req.ID, params: &p, handler: handler}, true
}

// only reports whether header key has exactly the one value v.
func only(h http.Header, key, v string) bool {
	values := h.Values(key)
	return len(values) == 1 && values[0] == v
}

// directMeta reports whether a call's _meta is one Airlock answers the
// way the SDK would: the revision, the client's capabilities and
// optionally its name, and trace context; no progress token (progress
// goes out on the SDK's session) and no capability whose call needs one.
func (s *Server) directMeta(raw json.RawMessage) bool {
	members, err := airlock.ParseObject(raw)
	if err != nil {
		return false
	}
	var version, caps bool
	for _, m := range members {
		switch m.Key {
		case mcp.MetaKeyProtocolVersion:
			var v string
			if json.Unmarshal(m.Value, &v) != nil || v != Revision2026 {
				return false
			}
			version = true
		case mcp.MetaKeyClientCapabilities:
			if !directCapabilities(m.Value) {
				return false
			}
			caps = true
		case mcp.MetaKeyClientInfo:
			if !stringMembers(m.Value, "name", "version", "title") {
				return false
			}
		case "traceparent", "tracestate":
			if m.Value[0] != '"' {
				return false
			}
		default:
			return false
		}
	}
	return version && caps
}

// directCapabilities reports whether a client's capabilities are ones
// under which the SDK's session changes nothing a tool does: not the Tasks
// extension (taskMiddleware), not elicitation (mrtr).
func directCapabilities(raw json.RawMessage) bool {
	members, err := airlock.ParseObject(raw)
	if err != nil {
		return false
	}
	for _, m := range members {
		switch m.Key {
		case "roots":
			inner, err := airlock.ParseObject(m.Value)
			if err != nil {
				return false
			}
			for _, r := range inner {
				if r.Key != "listChanged" || (string(r.Value) != "true" && string(r.Value) != "false") {
					return false
				}
			}
		case "sampling":
			if string(m.Value) != "{}" {
				return false
			}
		case "experimental", "extensions":
			inner, err := airlock.ParseObject(m.Value)
			if err != nil {
				return false
			}
			for _, e := range inner {
				if e.Key == TasksExtension || e.Value[0] != '{' {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// stringMembers reports whether raw is an object whose members are among
// keys, each a string.
func stringMembers(raw json.RawMessage, keys ...string) bool {
	members, err := airlock.ParseObject(raw)
	if err != nil {
		return false
	}
	for _, m := range members {
		if !slices.Contains(keys, m.Key) || m.Value[0] != '"' {
			return false
		}
	}
	return true
}

// serveDirect answers call for caller c as the SDK's stateless handler
// would (see directCall).
func (h *httpHandler) serveDirect(w http.ResponseWriter, r *http.Request, c airlock.Caller, call directCall) {
	// As in the SDK's session, the call is not ended by its request's
	// context itself: the tool handler binds it to the request
	// (boundToRequest), which says why it ended.
	req := &mcp.CallToolRequest{Params: call.params, Extra: &mcp.RequestExtra{
		TokenInfo: tokenInfo(r.Context(), c),
		Header:    r.Header,
	}}
	res, err := h.s.direct(context.WithoutCancel(r.Context()), "tools/call", req)
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Connection", "keep-alive")
	if r.Context().Err() != nil {
		// The client is gone, or the server is shutting down: the SDK
		// stops waiting for the answer and sends none.
		return
	}
	resp := &jsonrpc.Response{ID: call.id}
	if err == nil {
		resp.Result, err = h.s.completeResult(res)
	}
	if err != nil {
		resp.Result, resp.Error = nil, err
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		h.log.Error("encode MCP tool call result", "err", err)
		data, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: call.id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}})
	}
	if status := errorStatus(resp.Error); status != 0 {
		// SEP-2575: protocol errors with a status of their own are one
		// JSON body, not an event (the SDK's extractErrorStatus).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(data)
		return
	}
	var b bytes.Buffer
	b.Grow(len("event: message\ndata: \n\n") + len(data))
	b.WriteString("event: message\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	w.Write(b.Bytes())
	http.NewResponseController(w).Flush()
}

// errorStatus is the HTTP status the SDK gives a JSON-RPC error at
// 2026-07-28, or 0 for one sent as an event.
func errorStatus(err error) int {
	e, ok := err.(*jsonrpc.Error)
	if !ok {
		return 0
	}
	switch e.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, CodeMissingClientCapability:
		return http.StatusBadRequest
	}
	return 0
}

// completeResult encodes res as the SDK completes a tools/call result at
// 2026-07-28 (Server.callTool, ServerSession.handle): content [] rather
// than null, resultType "complete", and the server's Implementation in
// _meta, encoded without HTML escaping.
func (s *Server) completeResult(res mcp.Result) (json.RawMessage, error) {
	if res == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	if r, ok := res.(*mcp.CallToolResult); ok {
		out := completeCallToolResult() // resultType is the SDK's to set: copied
		out.Meta, out.Content, out.StructuredContent, out.IsError = r.Meta, r.Content, r.StructuredContent, r.IsError
		out.InputRequests, out.RequestState = r.InputRequests, r.RequestState
		if out.Content == nil && out.InputRequests == nil {
			out.Content = []mcp.Content{}
		}
		res = &out
	}
	m := res.GetMeta()
	if m == nil {
		m = map[string]any{}
	}
	if _, ok := m[mcp.MetaKeyServerInfo]; !ok {
		m[mcp.MetaKeyServerInfo] = s.impl
		res.SetMeta(m)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// completeCallToolResult returns an empty CallToolResult whose unexported
// resultType is "complete", the one way to set it outside the SDK. It is
// decoded at the first direct call, not at init: the SDK's decoder
// allocates 32 KiB, which every command's start would pay.
var completeCallToolResult = sync.OnceValue(func() mcp.CallToolResult {
	var r mcp.CallToolResult
	if err := r.UnmarshalJSON([]byte(`{"content":[],"resultType":"complete"}`)); err != nil {
		panic("mcpserver: " + err.Error())
	}
	r.Content = nil
	return r
})

// tokenInfo is the TokenInfo of a request authenticated as c: how the
// SDK hands the tool handlers their caller (callerOf) and the request
// they are bound to (boundToRequest).
func tokenInfo(ctx context.Context, c airlock.Caller) *auth.TokenInfo {
	return &auth.TokenInfo{UserID: c.ID, Scopes: c.Scopes, Extra: map[string]any{tokenInfoCaller: c, tokenInfoRequest: ctx}}
}
