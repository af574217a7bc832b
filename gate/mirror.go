// The gate forwards logging, sampling and roots between the client and the
// upstream for as long as MCP servers use them; the SDK marks them
// deprecated from protocol revision 2026-07-28, still working.
//
//lint:file-ignore SA1019 the gate forwards deprecated MCP features faithfully while upstreams use them

package gate

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectUpstream starts the upstream server and initializes a session
// with it. The handlers forward what the upstream sends on its own to the
// downstream client.
func (p *proxy) connectUpstream(ctx context.Context) error {
	cmd := exec.Command(p.cfg.Command[0], p.cfg.Command[1:]...)
	cmd.Env = p.cfg.Env
	cmd.Dir = p.cfg.Dir
	cmd.Stderr = p.cfg.Stderr
	p.upCli = mcp.NewClient(&mcp.Implementation{Name: "airlock-gate", Title: "Airlock gate", Version: p.cfg.Version}, &mcp.ClientOptions{
		Logger:                      p.sdk,
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { go p.resync(p.syncTools) },
		PromptListChangedHandler:    func(context.Context, *mcp.PromptListChangedRequest) { go p.resync(p.syncPrompts) },
		ResourceListChangedHandler:  func(context.Context, *mcp.ResourceListChangedRequest) { go p.resync(p.syncResources) },
		ResourceUpdatedHandler:      p.resourceUpdated,
		LoggingMessageHandler:       p.logMessage,
		ProgressNotificationHandler: p.upstreamProgress,
		CreateMessageHandler:        p.createMessage,
		ElicitationHandler:          p.elicit,
	})
	cs, err := p.upCli.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: upstreamVersion})
	if err != nil {
		return fmt.Errorf("gate: start the upstream MCP server %q: %w", p.cfg.Command[0], err)
	}
	p.up = cs
	return nil
}

// newServer builds the downstream server with the upstream's capabilities
// and instructions.
func (p *proxy) newServer() {
	init := p.up.InitializeResult()
	up := init.Capabilities
	if up == nil {
		up = &mcp.ServerCapabilities{}
	}
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if up.Logging != nil {
		caps.Logging = &mcp.LoggingCapabilities{}
	}
	if up.Prompts != nil {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	}
	if up.Resources != nil {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: up.Resources.Subscribe}
	}
	opts := &mcp.ServerOptions{
		Instructions:              init.Instructions,
		Logger:                    p.sdk,
		Capabilities:              caps,
		SupportedProtocolVersions: ProtocolVersions,
		InitializedHandler:        func(context.Context, *mcp.InitializedRequest) { go p.syncRoots() },
		RootsListChangedHandler:   func(context.Context, *mcp.RootsListChangedRequest) { go p.syncRoots() },
	}
	if up.Completions != nil {
		opts.CompletionHandler = func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return p.up.Complete(ctx, req.Params)
		}
	}
	if up.Resources != nil && up.Resources.Subscribe {
		opts.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return p.up.Subscribe(ctx, req.Params)
		}
		opts.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			return p.up.Unsubscribe(ctx, req.Params)
		}
	}
	impl := &mcp.Implementation{Name: "airlock-gate", Title: "Airlock gate", Version: p.cfg.Version}
	if si := init.ServerInfo; si != nil {
		title := si.Title
		if title == "" {
			title = si.Name
		}
		impl = &mcp.Implementation{Name: si.Name, Title: title + " (behind airlock gate)", Version: si.Version}
	}
	p.srv = mcp.NewServer(impl, opts)
	defer close(p.ready) // the upstream's notifications may use p.srv now
	// The client's log level goes upstream too, where the messages start.
	p.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "logging/setLevel" && up.Logging != nil {
				if params, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok {
					if err := p.up.SetLoggingLevel(ctx, params); err != nil {
						return nil, err
					}
				}
			}
			return next(ctx, method, req)
		}
	})
}

// syncAll mirrors everything the upstream offers.
func (p *proxy) syncAll(ctx context.Context) error {
	caps := p.up.InitializeResult().Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	if caps.Tools != nil {
		if err := p.syncTools(ctx); err != nil {
			return err
		}
	}
	if caps.Prompts != nil {
		if err := p.syncPrompts(ctx); err != nil {
			return err
		}
	}
	if caps.Resources != nil {
		if err := p.syncResources(ctx); err != nil {
			return err
		}
	}
	return nil
}

// resync runs one sync after the upstream said a list changed (once the
// server exists: a change during the first sync is synced after it).
func (p *proxy) resync(sync func(context.Context) error) {
	select {
	case <-p.ready:
	case <-p.ctx.Done():
		return
	}
	if err := sync(p.ctx); err != nil && p.ctx.Err() == nil {
		p.log.Warn("could not mirror a changed list of the upstream server", "err", err)
	}
}

// syncTools mirrors the upstream's tools: each call goes through callTool.
func (p *proxy) syncTools(ctx context.Context) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	seen := map[string]*mcp.Tool{}
	for t, err := range p.up.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		seen[t.Name] = t
	}
	p.mu.Lock()
	var gone []string
	for name := range p.tools {
		if seen[name] == nil {
			gone = append(gone, name)
		}
	}
	p.tools = seen
	p.mu.Unlock()
	p.srv.RemoveTools(gone...)
	for _, t := range seen {
		if err := addTool(p.srv, t, p.callTool); err != nil {
			p.log.Warn("not mirroring a tool the SDK refuses", "tool", t.Name, "err", err)
		}
	}
	return nil
}

// addTool adds a tool, turning the SDK's panic on a malformed schema into
// an error, so one bad tool does not stop the gate.
func addTool(s *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	s.AddTool(t, h)
	return nil
}

// tool returns the upstream tool named name.
func (p *proxy) tool(name string) *mcp.Tool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tools[name]
}

// syncPrompts mirrors the upstream's prompts.
func (p *proxy) syncPrompts(ctx context.Context) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	seen := map[string]bool{}
	var list []*mcp.Prompt
	for pr, err := range p.up.Prompts(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list prompts: %w", err)
		}
		seen[pr.Name] = true
		list = append(list, pr)
	}
	p.mu.Lock()
	var gone []string
	for name := range p.prompts {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	p.prompts = seen
	p.mu.Unlock()
	p.srv.RemovePrompts(gone...)
	for _, pr := range list {
		p.srv.AddPrompt(pr, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return p.up.GetPrompt(ctx, req.Params)
		})
	}
	return nil
}

// syncResources mirrors the upstream's resources and resource templates;
// reads go upstream.
func (p *proxy) syncResources(ctx context.Context) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return p.up.ReadResource(ctx, req.Params)
	}
	seen := map[string]bool{}
	var list []*mcp.Resource
	for r, err := range p.up.Resources(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list resources: %w", err)
		}
		seen[r.URI] = true
		list = append(list, r)
	}
	seenT := map[string]bool{}
	var tlist []*mcp.ResourceTemplate
	for t, err := range p.up.ResourceTemplates(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list resource templates: %w", err)
		}
		seenT[t.URITemplate] = true
		tlist = append(tlist, t)
	}
	p.mu.Lock()
	var gone, goneT []string
	for uri := range p.res {
		if !seen[uri] {
			gone = append(gone, uri)
		}
	}
	for uri := range p.tmpls {
		if !seenT[uri] {
			goneT = append(goneT, uri)
		}
	}
	p.res, p.tmpls = seen, seenT
	p.mu.Unlock()
	p.srv.RemoveResources(gone...)
	p.srv.RemoveResourceTemplates(goneT...)
	for _, r := range list {
		if err := guard(func() { p.srv.AddResource(r, read) }); err != nil {
			p.log.Warn("not mirroring a resource the SDK refuses", "uri", r.URI, "err", err)
		}
	}
	for _, t := range tlist {
		if err := guard(func() { p.srv.AddResourceTemplate(t, read) }); err != nil {
			p.log.Warn("not mirroring a resource template the SDK refuses", "template", t.URITemplate, "err", err)
		}
	}
	return nil
}

// guard runs f, turning a panic into an error.
func guard(f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	f()
	return nil
}

// resourceUpdated forwards an upstream resource update to subscribers.
func (p *proxy) resourceUpdated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	select {
	case <-p.ready:
		p.srv.ResourceUpdated(ctx, req.Params)
	default: // before the server exists nobody can have subscribed
	}
}

// logMessage forwards an upstream log message to the client.
func (p *proxy) logMessage(ctx context.Context, req *mcp.LoggingMessageRequest) {
	if ss := p.session(); ss != nil {
		ss.Log(ctx, req.Params)
	}
}

// errNoClient answers an upstream request that needs the client before it
// connected.
var errNoClient = errors.New("airlock gate: no MCP client is connected yet")

// createMessage forwards an upstream sampling request to the client.
func (p *proxy) createMessage(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	ss := p.session()
	if ss == nil {
		return nil, errNoClient
	}
	return ss.CreateMessage(ctx, req.Params)
}

// elicit forwards an upstream elicitation to the client.
func (p *proxy) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	ss := p.session()
	if ss == nil {
		return nil, errNoClient
	}
	return ss.Elicit(ctx, req.Params)
}

// syncRoots copies the client's roots to the upstream session (the SDK
// tells the upstream when they change).
func (p *proxy) syncRoots() {
	ss := p.session()
	if ss == nil {
		return
	}
	if ip := ss.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.RootsV2 == nil {
		return
	}
	res, err := ss.ListRoots(p.ctx, nil)
	if err != nil {
		p.log.Warn("could not list the client's roots", "err", err)
		return
	}
	p.mu.Lock()
	old := p.roots
	p.roots = nil
	for _, r := range res.Roots {
		p.roots = append(p.roots, r.URI)
	}
	p.mu.Unlock()
	p.upCli.RemoveRoots(old...)
	p.upCli.AddRoots(res.Roots...)
}
