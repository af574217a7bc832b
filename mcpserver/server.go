// Package mcpserver is Airlock's MCP server (docs/mcp.md, MCP revisions
// 2026-07-28 back to 2025-03-26): the tools an agent uses to ask a person before it acts
// (approval_request, approval_status, approval_cancel), to keep a session
// that receives decisions as instructions (session_open, session_heartbeat,
// session_close), and to read the work board its commands act on
// (work_list, work_get); and approval_prompt, Claude Code's
// --permission-prompt-tool.
//
// Like the REST API it is a thin layer over provider.Service: every rule is
// the provider's and the domain's, so both surfaces enforce the same ones.
// It is served over streamable HTTP by Handler (mounted at /mcp by `airlock
// serve`) and over stdio by `airlock mcp`, which bridges stdio to a running
// server's /mcp with RunStdio. It is built on the official Go SDK,
// github.com/modelcontextprotocol/go-sdk.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/provider"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProtocolVersions are the MCP revisions the server negotiates, newest
// first. Airlock is built to 2025-06-18; 2025-11-25 adds nothing the tools
// rely on and 2025-03-26 clients read the same results as text.
// 2026-07-28 (Revision2026) has no initialize handshake and no transport
// session: each request names its revision and the client's capabilities
// in _meta, and over HTTP it is served statelessly (docs/mcp.md,
// "Revisions"). An MCP-Protocol-Version header naming any other revision
// is refused with 400.
var ProtocolVersions = []string{Revision2026, "2025-11-25", "2025-06-18", "2025-03-26"}

// Revision2026 is MCP revision 2026-07-28, the first without sessions.
const Revision2026 = "2026-07-28"

// ServerName is the implementation name the server reports at initialize.
const ServerName = "airlock"

// Config configures the MCP server. Zero fields take the documented
// defaults; only Service is required.
type Config struct {
	// Service is the provider the tools are a layer over. Required.
	Service *provider.Service
	// Logger receives internal errors, once each, cancelled tool calls at
	// info, and HTTP refusals at debug level. Default slog.Default().
	Logger *slog.Logger
	// Version is reported as the server's version at initialize. Default "dev".
	Version string

	// The fields below configure the streamable HTTP transport (Handler,
	// Server.HTTPHandler).

	// AllowedHosts are the Host header values (host or host:port), besides
	// loopback names (localhost, 127.0.0.1, [::1]), that /mcp answers. Any
	// other Host is refused with 403: a DNS-rebinding page cannot reach a
	// server that only answers names it knows.
	AllowedHosts []string
	// Limiter, when set, is the per-token request budget /mcp shares with
	// the REST API (airlock serve passes one Limiter to both); over it, 429.
	Limiter *ratelimit.Limiter
	// AuthGuard throttles failed authentications per client address and
	// overall (429 with Retry-After), and logs them; airlock serve shares
	// one with the REST API and the inbox's sign-in. Default: one of the
	// transport's own, with ratelimit's defaults.
	AuthGuard *ratelimit.Guard
	// MaxBodyBytes bounds one HTTP request body (default
	// airlock.MaxBodyBytes); larger ones are refused with 413.
	MaxBodyBytes int64
	// SessionTimeout closes an MCP transport session (not an Airlock
	// session) after this long without a request. Default 1h.
	SessionTimeout time.Duration
	// PublicURL is the server's address as reviewers reach it (airlock
	// serve's --public-url). With it, a 2026-07-28 client that declares
	// URL-mode elicitation is sent the request's inbox page instead of
	// waiting inside approval_status or approval_prompt (docs/mcp.md,
	// "Waiting without a blocking call"). Default none: the calls wait.
	PublicURL string
	// Context, when set, ends open server-to-client streams (GET /mcp)
	// and closes every MCP transport session when it is done, so a server
	// shutdown is not held up by them.
	Context context.Context
}

// Server is the MCP server: the SDK server with Airlock's tools, bound to
// the provider. One Server serves any number of MCP sessions, each as the
// caller that authenticated it.
type Server struct {
	svc    *provider.Service
	log    *slog.Logger
	mcp    *mcp.Server
	sdkLog *slog.Logger // the SDK's: warnings and errors only
	cfg    Config
	impl   *mcp.Implementation

	// handlers are the tools' handlers by name, as the SDK has them.
	handlers map[string]mcp.ToolHandler
	// direct is the SDK's receiving middleware and tool dispatch for the
	// tools/call Airlock serves itself at 2026-07-28 (directCall).
	direct mcp.MethodHandler
	// sdkOnly sends every call to the SDK: the differential tests'
	// reference.
	sdkOnly bool
}

// New returns a Server for cfg. It panics when cfg.Service is nil, a
// wiring mistake no request could recover from.
func New(cfg Config) *Server {
	if cfg.Service == nil {
		panic("mcpserver: Config.Service is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{svc: cfg.Service, log: cfg.Logger, cfg: cfg}
	s.sdkLog = mcpsdk.Logger(cfg.Logger.Handler())
	s.impl = &mcp.Implementation{Name: ServerName, Title: "Airlock", Version: cfg.Version}
	s.mcp = mcp.NewServer(s.impl, &mcp.ServerOptions{
		Instructions:              instructions,
		Logger:                    s.sdkLog,
		SupportedProtocolVersions: ProtocolVersions,
		// Tools only: no logging, prompts or resources; and the Tasks
		// extension (docs/mcp.md, "Tasks").
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{},
			Extensions: map[string]any{TasksExtension: map[string]any{}}},
	})
	s.handlers = map[string]mcp.ToolHandler{}
	add := func(def *mcp.Tool, h mcp.ToolHandler) {
		s.mcp.AddTool(sdkTool(def), h)
		s.handlers[def.Name] = h
	}
	for _, t := range s.tools() {
		h := s.handler(t)
		if t.def.Name == ToolApprovalStatus {
			h = s.mrtr(h, false)
		}
		add(t.def, h)
	}
	add(s.approvalPromptTool(), s.mrtr(s.approvalPrompt, true))
	// The first runs first: m1(m2(m3(handler))), for the SDK and for
	// the calls Airlock serves itself alike.
	middleware := []mcp.Middleware{refuseUndeclared, s.taskMiddleware, traceCalls}
	s.mcp.AddReceivingMiddleware(middleware...)
	s.direct = s.callTool
	for _, m := range slices.Backward(middleware) {
		s.direct = m(s.direct)
	}
	return s
}

// callTool is the SDK's tools/call dispatch (v1.8.0, Server.callTool) for
// a tool directToolCall found: the handler, and a result with both
// content and input requests refused as the SDK refuses it.
func (s *Server) callTool(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
	call := req.(*mcp.CallToolRequest)
	res, err := s.handlers[call.Params.Name](ctx, call)
	if err != nil {
		return nil, err
	}
	if res != nil && res.InputRequests != nil && (len(res.Content) > 0 || res.StructuredContent != nil) {
		s.sdkLog.Warn("handler returned both content and inputRequests")
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
	}
	if res == nil {
		return nil, nil
	}
	return res, nil
}

// sdkTool returns def with its schemas as the JSON text they stand for.
// At 2026-07-28 the SDK (v1.8.0, validateParamHeaders) encodes a tool's
// input schema again on every tools/call, looking for x-mcp-header
// annotations; as JSON text that costs a copy, where a *jsonschema.Schema
// is encoded anew by reflection each time. tools/list shows the same text
// either way. The tools validate their arguments against resolved
// schemas of their own, never the SDK's.
func sdkTool(def *mcp.Tool) *mcp.Tool {
	t := *def
	t.InputSchema = schemaText(def.InputSchema)
	if def.OutputSchema != nil {
		t.OutputSchema = schemaText(def.OutputSchema)
	}
	return &t
}

// schemaText encodes a schema once, or panics: the schemas are Airlock's
// own constants.
func schemaText(s any) json.RawMessage {
	text, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: encode schema: %v", err))
	}
	return text
}

// undeclared are the methods of the features Airlock does not declare
// (prompts and resources): the SDK would answer them with empty lists, as
// if the server had them.
var undeclared = map[string]bool{
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// refuseUndeclared answers a method of an undeclared feature with
// "method not found", as a server without that capability must.
func refuseUndeclared(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if undeclared[method] {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method + " (Airlock serves tools only)"}
		}
		return next(ctx, method, req)
	}
}

// instructions is what an MCP client may show its model about the server.
const instructions = `Airlock asks a person before you act. Use approval_request to propose a change; the result is "pending" until a reviewer decides — being accepted is not being approved, and nothing has happened yet. Open a session (session_open) and pass its sessionId so decisions and answers reach you as instructions on session_heartbeat; or check approval_status. Advisory proposals only record the decision: you act on an approval yourself, within its limits. Command proposals (work_move) are executed by Airlock itself, only if approved.`

// Connect serves one MCP session over t, in process, as caller c: every
// tool call is made as c. It is for embedding and tests (with
// mcp.NewInMemoryTransports); over HTTP, Handler authenticates each
// request's bearer token instead.
func (s *Server) Connect(ctx context.Context, t mcp.Transport, c airlock.Caller) (*mcp.ServerSession, error) {
	return s.mcp.Connect(withCaller(ctx, c), t, nil)
}

// MCP returns the underlying SDK server, for transports this package does
// not provide.
func (s *Server) MCP() *mcp.Server { return s.mcp }

type callerKey struct{}

// withCaller binds a caller to a connection's context, for transports
// that authenticate once (in process).
func withCaller(ctx context.Context, c airlock.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf returns the caller of one tool call: over HTTP, the token that
// authenticated this very request (carried in the request's TokenInfo);
// in process, the caller the connection was made with.
func callerOf(ctx context.Context, req *mcp.CallToolRequest) (airlock.Caller, bool) {
	if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		c, ok := req.Extra.TokenInfo.Extra[tokenInfoCaller].(airlock.Caller)
		return c, ok
	}
	c, ok := ctx.Value(callerKey{}).(airlock.Caller)
	return c, ok
}

// tool is one MCP tool: its definition, as tools/list shows it, and its
// call. call returns a one-sentence summary for the model, the structured
// result (which conforms to def.OutputSchema), or an error.
type tool struct {
	def  *mcp.Tool
	call func(ctx context.Context, c airlock.Caller, args []byte) (summary string, out any, err error)
}

// handler adapts a tool to the SDK. Refused and invalid calls are tool
// results with isError (docs/mcp.md, "Errors"), so the model can read what
// to fix; only calls the SDK cannot route are protocol errors.
func (s *Server) handler(t tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, ok := callerOf(ctx, req)
		if !ok {
			return s.errorResult(t.def.Name, airlock.Errorf(airlock.CodeUnauthorized, "this MCP connection is not authenticated: send Authorization: Bearer <agent token>")), nil
		}
		ctx, stop := boundToRequest(ctx, req)
		defer stop()
		started := time.Now()
		summary, out, err := t.call(ctx, c, req.Params.Arguments)
		if err != nil && ctx.Err() != nil {
			// Not an internal error: the call was ended from outside.
			return nil, s.cancelled(ctx, t.def.Name, c, req.Params.Arguments, time.Since(started), err)
		}
		if err != nil {
			return s.errorResult(t.def.Name, err), nil
		}
		text, err := airlock.EncodeJSON(out)
		if err != nil {
			return s.errorResult(t.def.Name, fmt.Errorf("encode %s result: %w", t.def.Name, err)), nil
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: summary}, &mcp.TextContent{Text: string(text)}},
			StructuredContent: out,
		}, nil
	}
}

// cancelled logs a tool call that ended because its context did, at info,
// as what it is: which call, whose, after how long and why (cancelReason).
// It returns the JSON-RPC error to answer the call with, which the client
// seldom reads: it asked for the end, or is gone.
func (s *Server) cancelled(ctx context.Context, toolName string, c airlock.Caller, args json.RawMessage, took time.Duration, err error) error {
	reason := cancelReason(ctx)
	if s.cfg.Context != nil && s.cfg.Context.Err() != nil {
		// Shutting down ends the call's session and its HTTP request,
		// whichever comes first: the cause is the shutdown.
		reason = "the server is shutting down"
	}
	attrs := []any{"tool", toolName, "token", c.ID, "principal", c.Principal, "after", took.Round(time.Millisecond), "reason", reason}
	var ids struct {
		ApprovalID string `json:"approvalId"`
		SessionID  string `json:"sessionId"`
	}
	if json.Unmarshal(args, &ids) == nil {
		if ids.ApprovalID != "" {
			attrs = append(attrs, "approvalId", clip(ids.ApprovalID))
		}
		if ids.SessionID != "" {
			attrs = append(attrs, "sessionId", clip(ids.SessionID))
		}
	}
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		attrs = append(attrs, "err", err) // what the call was doing when it ended
	}
	s.log.Info("MCP tool call cancelled", attrs...)
	return cancelledError(reason)
}

// errorResult turns err into a tool result with isError. Its text starts
// with the error code and says what to fix. Errors that are not
// *airlock.Error are internal: logged here, once, and shown as "internal
// error". An unavailable store is logged here too, with its cause, and the
// text says when to retry. Error results carry no structuredContent:
// clients validate structured results against the tool's output schema,
// which describes success.
func (s *Server) errorResult(toolName string, err error) *mcp.CallToolResult {
	var e *airlock.Error
	switch {
	case !errors.As(err, &e) || e.Code == airlock.CodeInternal:
		s.log.Error("internal error in MCP tool", "tool", toolName, "err", err)
		e = &airlock.Error{Code: airlock.CodeInternal, Message: "internal error; the call may not have taken effect: retry it (with the same idempotencyKey for approval_request)"}
	case e.Code == airlock.CodeUnavailable:
		s.log.Error("store unavailable in MCP tool", "tool", toolName, "err", err)
		e = &airlock.Error{Code: e.Code, Message: unavailableText(e.Message)}
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: errorText(e)}},
		IsError: true,
	}
}

// unavailableText is what an agent reads when the store cannot serve: why
// and when to retry (the message says both), and how to retry safely.
func unavailableText(message string) string {
	return message + " (approval_request with the same idempotencyKey is safe to retry)"
}

// errorText is "code: message", with the state that holds when a
// transition lost a race.
func errorText(e *airlock.Error) string {
	msg := e.Message
	if msg == "" {
		msg = string(e.Code)
	}
	text := string(e.Code) + ": " + msg
	if e.State != "" && !strings.Contains(msg, string(e.State)) {
		text += " (the request is " + string(e.State) + ")"
	}
	return text
}
