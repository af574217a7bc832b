// The gate tells the upstream the sampling and roots capabilities of its
// client, and relays logging, sampling and roots, for as long as MCP
// servers use them; the SDK marks them deprecated from protocol revision
// 2026-07-28, still working.
//
//lint:file-ignore SA1019 the gate mirrors the client's sampling and roots capabilities and the upstream's logging capability while MCP servers use them

package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The methods of the client the gate relays upstream as they are, with the
// upstream's raw answer (tools/call goes through callTool).
var relayedMethods = map[string]bool{
	"tools/list": true, "prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true, "logging/setLevel": true,
}

// startUpstream starts the upstream server's process. The MCP session
// starts when the client initializes (initialize), so that the upstream
// hears the client's own capabilities and name.
func (p *proxy) startUpstream(ctx context.Context) error {
	var conn mcp.Connection
	if p.cfg.URL != "" {
		// A streamable-HTTP upstream: the SDK's client transport, with
		// the configured headers on every request. Its session starts at
		// the client's initialize, as a subprocess's does.
		hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, header: p.cfg.Header}}
		c, err := (&mcp.StreamableClientTransport{Endpoint: p.cfg.URL, HTTPClient: hc}).Connect(ctx)
		if err != nil {
			return fmt.Errorf("gate: connect to the upstream MCP server at %s: %w", p.cfg.URL, err)
		}
		conn = c
	} else {
		cmd := exec.Command(p.cfg.Command[0], p.cfg.Command[1:]...)
		cmd.Env = p.cfg.Env
		cmd.Dir = p.cfg.Dir
		cmd.Stderr = p.cfg.Stderr
		c, err := (&mcp.CommandTransport{Command: cmd}).Connect(ctx)
		if err != nil {
			return fmt.Errorf("gate: start the upstream MCP server %q: %w", p.cfg.Command[0], err)
		}
		conn = c
	}
	ask := func(method string) servedMethod {
		return func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
			return p.askClient(ctx, method, params)
		}
	}
	p.upPeer = newPeer(ctx, conn, "the upstream MCP server", p.idPrefix, map[string]servedMethod{
		"sampling/createMessage": ask("sampling/createMessage"),
		"elicitation/create":     ask("elicitation/create"),
		"roots/list":             ask("roots/list"),
	}, p.fromUpstream)
	return nil
}

// newServer builds the downstream server. What it offers is the
// upstream's, set when the client initializes.
func (p *proxy) newServer() {
	p.srv = mcp.NewServer(&mcp.Implementation{Name: "airlock-gate", Title: "Airlock gate", Version: p.cfg.Version}, &mcp.ServerOptions{
		Logger:                    p.sdk,
		Capabilities:              &mcp.ServerCapabilities{},
		SupportedProtocolVersions: ProtocolVersions,
		InitializedHandler:        func(context.Context, *mcp.InitializedRequest) { p.readyOnce.Do(func() { close(p.clientReady) }) },
	})
	p.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch {
			case method == "initialize":
				return p.initialize(ctx, next, req)
			case method == "server/discover":
				return p.discover(ctx, next, req)
			case statelessClient(req) && p.upstream() == nil:
				// A client at 2026-07-28 need not discover first.
				if err := p.startStateless(req); err != nil {
					return nil, err
				}
			}
			switch {
			case method == "tools/call":
				return p.callTool(ctx, req.(*mcp.CallToolRequest))
			case relayedMethods[method]:
				return p.relay(ctx, method, req.GetParams())
			}
			return next(ctx, method, req)
		}
	})
}

// initialize answers the client's initialize: it initializes the upstream
// with the client's capabilities and implementation, and answers with the
// upstream's capabilities, instructions and server info.
func (p *proxy) initialize(ctx context.Context, next mcp.MethodHandler, req mcp.Request) (mcp.Result, error) {
	res, err := next(ctx, "initialize", req)
	if err != nil {
		return nil, err // a second initialize, say
	}
	ir := res.(*mcp.InitializeResult)
	ss, _ := req.GetSession().(*mcp.ServerSession)
	params, _ := req.GetParams().(*mcp.InitializeParams)
	p.mu.Lock()
	p.ss = ss
	p.mu.Unlock()
	up, err := p.initUpstream(params, ir.ProtocolVersion)
	if err == nil {
		err = p.syncTools(p.waitCtx)
		if err != nil {
			err = fmt.Errorf("gate: list the upstream MCP server's tools: %w", err)
		}
	}
	if err != nil {
		p.failUpstream(err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	ir.Capabilities, ir.Instructions, ir.ServerInfo = offered(up)
	return ir, nil
}

// offered is what the gate offers its client of the upstream's: its
// capabilities, instructions and server info (its title noting the gate).
func offered(up *mcp.ClientSession) (*mcp.ServerCapabilities, string, *mcp.Implementation) {
	ui := up.InitializeResult()
	caps := &mcp.ServerCapabilities{}
	if c := ui.Capabilities; c != nil {
		// Not tasks: the SDK has no tasks capability, and the gate does not
		// relay task-augmented calls (see callTool). Not experimental or
		// extension capabilities: their methods do not pass the gate.
		caps.Tools, caps.Prompts, caps.Resources, caps.Logging, caps.Completions = c.Tools, c.Prompts, c.Resources, c.Logging, c.Completions
	}
	var info *mcp.Implementation
	if si := ui.ServerInfo; si != nil {
		info = new(*si)
		title := si.Title
		if title == "" {
			title = si.Name
		}
		info.Title = title + " (behind airlock gate)"
	}
	return caps, ui.Instructions, info
}

// statelessClient reports whether req follows revision 2026-07-28: it
// names its revision in its _meta rather than in an initialize.
func statelessClient(req mcp.Request) bool {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= Revision2026
}

// discover answers a client's server/discover (revision 2026-07-28) as
// initialize is answered: the upstream is initialized, offered the same
// revision first, and the client gets its capabilities, instructions and
// server info (in _meta).
func (p *proxy) discover(ctx context.Context, next mcp.MethodHandler, req mcp.Request) (mcp.Result, error) {
	res, err := next(ctx, "server/discover", req)
	if err != nil {
		return nil, err // a revision the gate does not speak
	}
	dr, ok := res.(*mcp.DiscoverResult)
	if !ok || !statelessClient(req) {
		return res, nil
	}
	if err := p.startStateless(req); err != nil {
		return nil, err
	}
	var info *mcp.Implementation
	dr.Capabilities, dr.Instructions, info = offered(p.upstream())
	// A gated call is answered as a task to a client that declares the
	// Tasks extension (task.go).
	dr.Capabilities.Extensions = map[string]any{TasksExtension: map[string]any{}}
	if p.cfg.ToolApproval {
		dr.Capabilities.Extensions[ToolApprovalExtension] = map[string]any{}
	}
	if info != nil {
		if dr.Meta == nil {
			dr.Meta = mcp.Meta{}
		}
		dr.Meta[mcp.MetaKeyServerInfo] = info
	}
	return dr, nil
}

// startStateless initializes the upstream for a client at 2026-07-28, once:
// with the name and capabilities of the client's first request.
func (p *proxy) startStateless(req mcp.Request) error {
	p.upInit.Lock()
	defer p.upInit.Unlock()
	if p.upstream() != nil {
		return nil
	}
	if p.upErr != nil {
		return p.upErr
	}
	ss := req.GetSession().(*mcp.ServerSession)
	ip := ss.InitializeParams()
	p.mu.Lock()
	p.ss = ss
	p.mu.Unlock()
	_, err := p.initUpstream(ip, ip.ProtocolVersion)
	if err == nil {
		if err = p.syncTools(p.waitCtx); err != nil {
			err = fmt.Errorf("gate: list the upstream MCP server's tools: %w", err)
		}
	}
	if err != nil {
		p.failUpstream(err)
		p.upErr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		return p.upErr
	}
	p.readyOnce.Do(func() { close(p.clientReady) })
	return nil
}

// initUpstream initializes the MCP session with the upstream, as the
// client: its implementation (the title noting the gate) and only the
// capabilities it declared, at the protocol revision agreed with it.
func (p *proxy) initUpstream(client *mcp.InitializeParams, version string) (*mcp.ClientSession, error) {
	impl := &mcp.Implementation{Name: "airlock-gate", Title: "Airlock gate", Version: p.cfg.Version}
	caps := &mcp.ClientCapabilities{}
	if client != nil {
		if ci := client.ClientInfo; ci != nil && ci.Name != "" {
			impl = new(*ci)
			title := ci.Title
			if title == "" {
				title = ci.Name
			}
			impl.Title = title + " (via airlock gate)"
		}
		if c := client.Capabilities; c != nil {
			if c.RootsV2 != nil {
				caps.RootsV2 = new(*c.RootsV2)
			}
			if c.Sampling != nil {
				caps.Sampling = new(*c.Sampling)
			}
			if c.Elicitation != nil {
				caps.Elicitation = new(*c.Elicitation)
			}
		}
	}
	// The peer answers sampling, elicitation and roots requests and takes
	// every notification, so the SDK client needs no handlers; the
	// list-changed ones only make it subscribe to the changes of an
	// upstream at 2026-07-28, which sends them only to a subscriber.
	nop := func(context.Context, *mcp.ClientRequest[*mcp.ToolListChangedParams]) {}
	cli := mcp.NewClient(impl, &mcp.ClientOptions{Logger: p.sdk, Capabilities: caps,
		ToolListChangedHandler:     nop,
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) {},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {},
	})
	// At 2026-07-28 the SDK asks server/discover first and initializes at
	// 2025-11-25 when the upstream does not answer it.
	cs, err := cli.Connect(p.waitCtx, connected{p.upPeer}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, fmt.Errorf("gate: initialize the upstream MCP server %q: %w", p.upstreamName(), err)
	}
	var meta map[string]any
	if v := cs.InitializeResult().ProtocolVersion; v >= Revision2026 {
		meta = map[string]any{
			mcp.MetaKeyProtocolVersion:    v,
			mcp.MetaKeyClientInfo:         impl,
			mcp.MetaKeyClientCapabilities: capabilitiesJSON(caps),
		}
	}
	p.mu.Lock()
	p.up = cs
	p.upMeta = meta
	p.mu.Unlock()
	p.upReady <- cs
	return cs, nil
}

// failUpstream records why the upstream could not be initialized. The gate
// exits on it once the client's request has its error answer (answered):
// closing the session before that would leave the client with only EOF.
func (p *proxy) failUpstream(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.upFailure == nil {
		p.upFailure = err
	}
}

// answered is told of every answer written to the client. The first error
// answer written after failUpstream lets the gate exit.
func (p *proxy) answered(r *jsonrpc.Response) {
	if r.Error == nil {
		return
	}
	p.mu.Lock()
	err := p.upFailure
	p.mu.Unlock()
	if err == nil {
		return
	}
	select {
	case p.upFailed <- err:
	default:
	}
}

// upstream returns the upstream session, or nil before it is initialized.
func (p *proxy) upstream() *mcp.ClientSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up
}

// errNoUpstream answers a client whose upstream could not be initialized.
var errNoUpstream = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "airlock gate: the upstream MCP server is not initialized"}

// relay sends the client's request upstream and answers with the
// upstream's result or error as it came.
func (p *proxy) relay(ctx context.Context, method string, params mcp.Params) (mcp.Result, error) {
	if p.upstream() == nil {
		return nil, errNoUpstream
	}
	raw, err := p.upCall(ctx, method, marshalParams(params))
	if err != nil {
		return nil, answerError(ctx, err)
	}
	return p.result(raw), nil
}

// The _meta keys of revision 2026-07-28 that say who asks, at which
// revision: the gate's, toward its upstream, never the client's.
var revisionMeta = []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities}

// upCall sends a request upstream with the _meta its revision needs: the
// client's revision keys replaced by the gate's when the upstream speaks
// 2026-07-28, removed when it speaks an older revision. Params without
// them toward an older upstream go as they are.
func (p *proxy) upCall(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	p.mu.Lock()
	meta := p.upMeta
	p.mu.Unlock()
	if meta != nil || bytes.Contains(params, []byte(`"io.modelcontextprotocol/`)) {
		var err error
		if params, err = withRevisionMeta(params, meta); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "airlock gate: " + err.Error()}
		}
	}
	return p.upPeer.call(ctx, method, params)
}

// withRevisionMeta returns params with their revision keys in _meta
// replaced by meta's (removed when meta is nil).
func withRevisionMeta(params json.RawMessage, meta map[string]any) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &obj); err != nil {
			return nil, fmt.Errorf("read params: %w", err)
		}
	}
	m := map[string]any{}
	if raw, ok := obj["_meta"]; ok {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("read _meta: %w", err)
		}
	}
	for _, k := range revisionMeta {
		delete(m, k)
	}
	maps.Copy(m, meta)
	if len(m) == 0 {
		delete(obj, "_meta")
	} else {
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		obj["_meta"] = raw
	}
	return json.Marshal(obj)
}

// capabilitiesJSON is caps as _meta carries them at 2026-07-28: roots
// only when declared (the SDK's ClientCapabilities always writes it).
func capabilitiesJSON(caps *mcp.ClientCapabilities) map[string]any {
	data, _ := json.Marshal(caps)
	m := map[string]any{}
	json.Unmarshal(data, &m)
	delete(m, "roots")
	if caps.RootsV2 != nil {
		m["roots"] = caps.RootsV2
	}
	return m
}

// result is an upstream's raw result for the client. At 2026-07-28 every
// result says it is complete: one from an upstream at an older revision
// gets "resultType" ahead of its bytes, which are otherwise as they came.
func (p *proxy) result(raw json.RawMessage) *rawResult {
	ss := p.session()
	if ss == nil {
		return &rawResult{json: raw}
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.ProtocolVersion < Revision2026 {
		return &rawResult{json: raw}
	}
	var probe struct {
		ResultType *string `json:"resultType"`
	}
	trimmed := bytes.TrimSpace(raw)
	if json.Unmarshal(trimmed, &probe) != nil || probe.ResultType != nil || len(trimmed) < 2 || trimmed[0] != '{' {
		return &rawResult{json: raw}
	}
	rest := bytes.TrimSpace(trimmed[1:])
	out := []byte(`{"resultType":"complete"`)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return &rawResult{json: append(out, rest...)}
}

// answerError is the error to answer the client with: the upstream's
// JSON-RPC error as it came, the cancellation the client asked for, or an
// internal error.
func answerError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	return wireError(err)
}

// marshalParams is the JSON of a request's params; nil for none.
func marshalParams(params mcp.Params) json.RawMessage {
	data, err := json.Marshal(params)
	if err != nil || string(data) == "null" {
		return nil
	}
	return data
}

// fromUpstream handles the upstream's notifications: progress of a gated
// call is renumbered for its client, a changed tool list refreshes the
// gate's copy first; everything else goes to the client as it came.
func (p *proxy) fromUpstream(n *jsonrpc.Request) bool {
	switch n.Method {
	case "notifications/subscriptions/acknowledged":
		return false // the gate's own subscription, for its SDK session
	case "notifications/progress":
		if p.upstreamProgress(n.Params) {
			return true
		}
	case "notifications/tools/list_changed":
		p.upPeer.spawn(func(ctx context.Context) {
			if err := p.syncTools(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("could not list the upstream server's changed tools", "err", err)
			}
			p.toClient(n)
		})
		return true
	}
	p.toClient(n)
	return true
}

// toClient passes a notification to the client as it came.
func (p *proxy) toClient(n *jsonrpc.Request) {
	if err := p.down.notify(p.ctx, n.Method, n.Params); err != nil && p.ctx.Err() == nil {
		p.log.Debug("could not pass a notification to the MCP client", "method", n.Method, "err", err)
	}
}

// fromClient passes the client's notifications the SDK does not need to
// the upstream as they came: changed roots, and progress of a request the
// upstream sent.
func (p *proxy) fromClient(n *jsonrpc.Request) bool {
	switch n.Method {
	case "notifications/roots/list_changed", "notifications/progress":
		if p.upstream() != nil {
			if err := p.upPeer.notify(p.ctx, n.Method, n.Params); err != nil && p.ctx.Err() == nil {
				p.log.Debug("could not pass a notification upstream", "method", n.Method, "err", err)
			}
		}
		return true
	}
	return false
}

// askClient relays a request of the upstream (sampling, elicitation, roots)
// to the client once it is initialized, and answers with the client's
// result or error as it came. A request the client declared no capability
// for is answered by the gate: -32601 when it has none of the kind, -32602
// for an elicitation mode it lacks.
func (p *proxy) askClient(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	select {
	case <-p.clientReady:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var caps *mcp.ClientCapabilities
	if ss := p.session(); ss != nil {
		if ip := ss.InitializeParams(); ip != nil {
			caps = ip.Capabilities
			if ip.ProtocolVersion >= Revision2026 {
				// At 2026-07-28 a server asks its client only through a
				// result's inputRequests, never with a request of its own.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: fmt.Sprintf("airlock gate: the MCP client speaks revision %s, at which a server cannot send it %s", ip.ProtocolVersion, method)}
			}
		}
	}
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	notServed := func(what string) error {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("airlock gate: the MCP client did not declare the %s capability, so the gate does not pass %s on", what, method)}
	}
	switch method {
	case "sampling/createMessage":
		if caps.Sampling == nil {
			return nil, notServed("sampling")
		}
	case "roots/list":
		if caps.RootsV2 == nil {
			return nil, notServed("roots")
		}
	case "elicitation/create":
		e := caps.Elicitation
		if e == nil {
			return nil, notServed("elicitation")
		}
		// As the SDK reads it: no modes declared means form mode only.
		mode := elicitMode(params)
		if mode == "url" && e.URL == nil || mode == "form" && e.Form == nil && e.URL != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("airlock gate: the MCP client did not declare %s-mode elicitation", mode)}
		}
	}
	return p.down.call(ctx, method, params)
}

// elicitMode is an elicitation request's mode: as given, else "url" when
// it names a URL, else "form".
func elicitMode(params json.RawMessage) string {
	var e struct {
		Mode          string `json:"mode"`
		URL           string `json:"url"`
		ElicitationID string `json:"elicitationId"`
	}
	json.Unmarshal(params, &e)
	switch {
	case e.Mode != "":
		return e.Mode
	case e.URL != "" || e.ElicitationID != "":
		return "url"
	}
	return "form"
}

// upstreamTool is what the gate knows of one of the upstream's tools.
type upstreamTool struct {
	tool *mcp.Tool // what the rules read: name and annotations
	// taskSupport is its execution.taskSupport: "forbidden" (also when
	// absent), "optional" or "required".
	taskSupport string
	// err is why the gate could not read the tool's definition; its calls
	// are refused.
	err error
}

// syncTools refreshes the gate's copy of the upstream's tools, page by page.
func (p *proxy) syncTools(ctx context.Context) error {
	if up := p.upstream(); up == nil || up.InitializeResult().Capabilities == nil || up.InitializeResult().Capabilities.Tools == nil {
		return nil
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	tools := map[string]*upstreamTool{}
	seen := map[string]bool{}
	var cursor string
	for {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		raw, err := p.upCall(ctx, "tools/list", params)
		if err != nil {
			return err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return fmt.Errorf("read its tools/list result: %w", err)
		}
		for _, data := range page.Tools {
			name, t := readTool(data)
			if t.err != nil {
				p.log.Warn("the gate cannot read a tool of the upstream server; its calls are refused", "tool", name, "err", t.err)
			}
			if name != "" {
				tools[name] = t
			}
		}
		if page.NextCursor == "" {
			break
		}
		if seen[page.NextCursor] {
			return fmt.Errorf("its tools/list repeats the cursor %q", page.NextCursor)
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
	p.mu.Lock()
	p.tools = tools
	p.mu.Unlock()
	return nil
}

// readTool reads a tool of the upstream's tools/list, returning its name
// ("" when it has none) and what the gate knows of it. The definition must
// be strict JSON (airlock.CheckJSON): encoding/json matches keys
// case-insensitively and keeps the last of duplicates, so the gate could
// otherwise read annotations other than the ones the client reads.
func readTool(data json.RawMessage) (string, *upstreamTool) {
	var named struct {
		Name string `json:"name"`
	}
	json.Unmarshal(data, &named)
	if err := airlock.CheckJSON("tool", data); err != nil {
		return named.Name, &upstreamTool{err: err}
	}
	var t mcp.Tool
	var x struct {
		Execution *struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return named.Name, &upstreamTool{err: err}
	}
	if err := json.Unmarshal(data, &x); err != nil {
		return t.Name, &upstreamTool{err: err}
	}
	ut := &upstreamTool{tool: &t, taskSupport: "forbidden"}
	if x.Execution != nil && x.Execution.TaskSupport != "" {
		ut.taskSupport = x.Execution.TaskSupport
	}
	return t.Name, ut
}

// tool returns the upstream's tool named name, listing the tools again
// when the gate does not know it yet; nil when there is none.
func (p *proxy) tool(ctx context.Context, name string) (*upstreamTool, error) {
	p.mu.Lock()
	t := p.tools[name]
	p.mu.Unlock()
	if t != nil {
		return t, nil
	}
	if err := p.syncTools(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tools[name], nil
}

// session returns the downstream session, or nil before it initializes.
func (p *proxy) session() *mcp.ServerSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ss
}

// headerTransport adds the configured headers to every request to an
// HTTP upstream.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.header) == 0 {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, vs := range t.header {
		r.Header.Del(k)
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// upstreamName names the upstream in errors and in what reviewers see: its
// URL, or its command line.
func (p *proxy) upstreamName() string {
	if p.cfg.URL != "" {
		return p.cfg.URL
	}
	return strings.Join(p.cfg.Command, " ")
}
