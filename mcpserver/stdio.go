package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioConfig configures RunStdio, the bridge behind `airlock mcp`.
type StdioConfig struct {
	// URL is the Airlock server: its base (http://127.0.0.1:8080) or its
	// MCP endpoint (…/mcp). Required.
	URL string
	// Token is the agent's bearer token. Required.
	Token string
	// In and Out are the MCP client's side: newline-delimited JSON-RPC.
	// Nothing but protocol messages is ever written to Out.
	In  io.Reader
	Out io.Writer
	// Logger receives the bridge's own notices; give it stderr. Default:
	// discard.
	Logger *slog.Logger
	// HTTPClient talks to the server. Default: a client with a 2 minute
	// timeout per request (approval_status waits at most a minute). Its
	// Timeout bounds each request, but approval_prompt, which waits for
	// a person up to PromptWait, is bounded by that wait and a minute
	// more (callBound).
	HTTPClient *http.Client
	// Version is reported to the MCP client. Default "dev".
	Version string
}

// Endpoint returns the /mcp URL of a server given its base URL or its
// MCP endpoint.
func Endpoint(base string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q is not an http(s) URL such as http://127.0.0.1:8080", base)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--url %q must not carry a query, fragment or credentials: pass the token with --token or AIRLOCK_AGENT_TOKEN", base)
	}
	if !strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/mcp") {
		u.Path = strings.TrimRight(u.Path, "/") + "/mcp"
	}
	return u.String(), nil
}

// RunStdio serves MCP over In and Out by relaying every tool to a running
// Airlock server's /mcp, as the agent whose token it holds. It connects
// before it reads anything, so a wrong URL or token fails at once with a
// message on the log and an error; it returns nil when In ends (the MCP
// client closed it) and ctx.Err() when ctx ends first. Rules, validation
// and errors are all the server's: a tool result passes through unchanged.
func RunStdio(ctx context.Context, cfg StdioConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Token == "" {
		return errors.New("no token: pass --token or set AIRLOCK_AGENT_TOKEN to an agent token")
	}
	endpoint, err := Endpoint(cfg.URL)
	if err != nil {
		return err
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 2 * time.Minute}
	}
	// The client's one Timeout would cut a waiting approval_prompt
	// short: each request is bounded by its context instead, a tool
	// call's by callBound, any other's by the Timeout (bounded).
	client := *cfg.HTTPClient
	client.Timeout = 0
	client.Transport = bounded{timeout: cfg.HTTPClient.Timeout, next: mcpsdk.Bearer{Token: cfg.Token, Next: cfg.HTTPClient.Transport}}
	up := &upstream{endpoint: endpoint, http: &client, timeout: cfg.HTTPClient.Timeout, log: cfg.Logger, version: cfg.Version}
	cs, err := up.session(ctx)
	if err != nil {
		return err
	}
	defer up.close()

	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the tools of %s: %w", endpoint, err)
		}
		tools = append(tools, t)
	}
	init := cs.InitializeResult()
	impl := &mcp.Implementation{Name: ServerName, Version: cfg.Version}
	if init != nil && init.ServerInfo != nil {
		impl = init.ServerInfo
	}
	opts := &mcp.ServerOptions{
		Logger:                    mcpsdk.Logger(cfg.Logger.Handler()),
		SupportedProtocolVersions: ProtocolVersions,
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	}
	if init != nil {
		opts.Instructions = init.Instructions
		if init.ProtocolVersion >= Revision2026 && init.Capabilities != nil {
			// A 2026-07-28 client's calls pass through (passthrough.go),
			// so it gets the server's extensions (Tasks): declare them.
			opts.Capabilities.Extensions = maps.Clone(init.Capabilities.Extensions)
		}
	}
	local := mcp.NewServer(impl, opts)
	for _, t := range tools {
		local.AddTool(t, up.relay)
	}
	revision := ""
	if init != nil {
		revision = init.ProtocolVersion
	}
	out := &syncWriter{w: cfg.Out}
	up.out = out
	var divert func(line []byte, id json.RawMessage, msg jsonrpc.Message) bool
	var diverted sync.WaitGroup
	defer diverted.Wait() // a task method's answer is written before RunStdio returns
	if revision >= Revision2026 {
		// The server speaks 2026-07-28: a client at that revision gets
		// what it would get over HTTP (passthrough.go).
		local.AddReceivingMiddleware(up.passThrough)
		divert = func(line []byte, id json.RawMessage, msg jsonrpc.Message) bool {
			req, ok := msg.(*jsonrpc.Request)
			if !ok || !req.IsCall() || !taskMethods[req.Method] {
				return false
			}
			diverted.Go(func() { up.relayTask(ctx, line, id, req) })
			return true
		}
	}
	cfg.Logger.Info("relaying MCP over stdio", "server", endpoint, "revision", revision, "tools", len(tools))

	// The SDK ends a stdio session at the first line that is not a
	// JSON-RPC message; a JSON-RPC server answers it with an error and
	// goes on. The filter does that, and passes every good line on.
	pr, pw := io.Pipe()
	go filterLines(cfg.In, pw, out, maxLineBytes, divert)
	defer pr.Close() // unblocks the filter if the session ends first
	err = local.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: nopWriteCloser{out}})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, mcp.ErrConnectionClosed):
		cfg.Logger.Info("stdin closed; ending the MCP session")
		return nil
	}
	return fmt.Errorf("stdio: %w", err)
}

// upstream is the bridge's MCP session with the server. It reconnects
// when the server has forgotten the session (a restart), on the next call.
type upstream struct {
	endpoint string
	http     *http.Client
	log      *slog.Logger
	version  string

	out     *syncWriter   // the client's side, for what passes through
	timeout time.Duration // the bound of a request (callBound); 0: none

	mu sync.Mutex
	cs *mcp.ClientSession // nil after a lost connection
}

// session returns the live session, connecting first when there is none.
func (u *upstream) session(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		return u.cs, nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "airlock-mcp-stdio", Version: u.version}, &mcp.ClientOptions{
		Logger: mcpsdk.Logger(u.log.Handler()),
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: u.endpoint, HTTPClient: u.http,
		// The server sends nothing unprompted; no stream to hold open.
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to Airlock at %s: %w (is `airlock serve` running there, and is the token an agent token that is not revoked?)", u.endpoint, err)
	}
	u.cs = cs
	return cs, nil
}

// lost forgets cs after it failed, so the next call reconnects.
func (u *upstream) lost(cs *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs == cs {
		u.cs = nil
		go cs.Close()
	}
}

func (u *upstream) close() {
	u.mu.Lock()
	cs := u.cs
	u.cs = nil
	u.mu.Unlock()
	if cs != nil {
		cs.Close() // ends the session on the server (DELETE)
	}
}

// relay forwards one tool call and returns the server's result as it is.
// A call the server refused at the protocol level is a protocol error
// here too; a call the connection lost is an isError result, since it
// may or may not have taken effect.
func (u *upstream) relay(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	cs, err := u.session(ctx)
	if err != nil {
		u.log.Error("reconnect", "err", err)
		return unreachable(err), nil
	}
	// The client's _meta (a traceparent) goes with the call; the SDK
	// session names its own revision and capabilities.
	meta := maps.Clone(req.Params.Meta)
	for _, k := range []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, mcp.MetaKeyClientInfo, "progressToken"} {
		delete(meta, k)
	}
	params := &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments, Meta: meta}
	client := ctx // the MCP client's: ended when it cancels the call
	if bound := u.callBound("tools/call", req.Params.Name); bound > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	res, err := cs.CallTool(ctx, params)
	if errors.Is(err, mcp.ErrSessionMissing) {
		// The server does not know the session (it restarted, or the
		// session idled out) and so never saw the call: start a new
		// session and send it again.
		u.log.Info("the Airlock server forgot the MCP session; reconnecting", "tool", req.Params.Name)
		u.lost(cs)
		if cs, err = u.session(ctx); err != nil {
			u.log.Error("reconnect", "err", err)
			return unreachable(err), nil
		}
		res, err = cs.CallTool(ctx, params)
	}
	if err == nil {
		return res, nil
	}
	if client.Err() != nil {
		// The MCP client cancelled the call or closed stdin; the SDK
		// client has told the server (notifications/cancelled). A call
		// past its bound is not cancelled: it is unreachable, below.
		reason := cancelReason(client)
		u.log.Info("MCP tool call cancelled", "tool", req.Params.Name, "reason", reason)
		return nil, cancelledError(reason)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport && !errors.Is(err, mcp.ErrSessionMissing) {
		return nil, rpcErr
	}
	u.log.Warn("call to the Airlock server failed; reconnecting on the next call", "tool", req.Params.Name, "err", err)
	u.lost(cs)
	return unreachable(err), nil
}

// codeRejectedByTransport is the code of the SDK's jsonrpc2.ErrRejected
// (internal to the SDK, v1.8.0), which wraps a call its HTTP transport
// could not deliver: the server was unreachable or answered 502, 503, 504
// or 429. Such a call is unreachable, not refused by the server.
const codeRejectedByTransport = -32005

// unreachable is the result of a call that may not have reached the
// server: unavailable, like a store that cannot serve, since nothing about
// the call is wrong and it may be made again later.
func unreachable(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: string(airlock.CodeUnavailable) + ": the Airlock server could not be reached or lost the session (" +
			err.Error() + "); the call may or may not have taken effect: retry it (approval_request with the same idempotencyKey is safe to retry)"}},
		IsError: true,
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// maxLineBytes bounds one stdin message: the server's own body limit, with
// room for the envelope.
const maxLineBytes = airlock.MaxBodyBytes + 64<<10

// filterLines copies newline-delimited messages from in to pass, and
// answers each line that is not one JSON-RPC message itself, on out, with
// a JSON-RPC error (checkMessage), or -32600 for a line over max bytes. A
// line divert takes (when not nil and it returns true) is not passed on. It
// closes pass when in ends or fails.
func filterLines(in io.Reader, pass *io.PipeWriter, out *syncWriter, max int, divert func(line []byte, id json.RawMessage, msg jsonrpc.Message) bool) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r, max)
		switch {
		case tooLong:
			out.rpcError(nil, -32600, fmt.Sprintf("message exceeds %d bytes", max))
		case len(bytes.TrimSpace(line)) > 0:
			if m, id, code, msg, ok := checkMessage(line); !ok {
				out.rpcError(id, code, msg)
			} else if divert != nil && divert(bytes.TrimSpace(line), callID(m), m) {
				// answered by divert
			} else if _, werr := pass.Write(append(bytes.TrimRight(line, "\r\n"), '\n')); werr != nil {
				return // the session is over
			}
		}
		if err != nil {
			pass.CloseWithError(err)
			return
		}
	}
}

// readLine reads one line of at most max bytes; a longer one is read to
// its end and reported as tooLong. err is io.EOF at the end of in.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, tooLong, err
	}
}

// syncWriter serializes whole-message writes from the SDK and the filter.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) rpcError(id json.RawMessage, code int, msg string) {
	var b bytes.Buffer
	writeRPCError(&bufferResponse{b: &b}, 0, id, code, msg, nil)
	s.Write(b.Bytes())
}

// bufferResponse is an http.ResponseWriter into a buffer, so stdio errors
// are written exactly as HTTP ones.
type bufferResponse struct{ b *bytes.Buffer }

func (r *bufferResponse) Header() http.Header         { return http.Header{} }
func (r *bufferResponse) WriteHeader(int)             {}
func (r *bufferResponse) Write(p []byte) (int, error) { return r.b.Write(p) }

// bounded bounds each HTTP request that has no deadline of its own by
// timeout, from its start to the end of its body; a request whose context
// has a deadline (a tool call's, callBound) keeps it.
type bounded struct {
	timeout time.Duration // 0: no bound
	next    http.RoundTripper
}

func (b bounded) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, ok := r.Context().Deadline(); ok || b.timeout <= 0 {
		return b.next.RoundTrip(r)
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.timeout)
	resp, err := b.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a request's bound once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
