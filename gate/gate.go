// Package gate is `airlock gate`: a stdio MCP proxy that puts Airlock's
// approval in front of any MCP server (docs/adapters.md).
//
// It starts the upstream server as a subprocess and, when its client
// initializes, initializes the upstream as that client: with the client's
// name and version and only the capabilities the client declared. The
// client gets the upstream's capabilities, instructions and server info.
// Everything else is relayed as the JSON it arrived as (lists in the
// upstream's order with their keys as they were, results, errors with
// their codes, notifications, and the upstream's sampling, elicitation and
// roots requests to the client), except a tools/call of a tool its Rules
// select: that does not reach the upstream server until a reviewer
// approves exactly that call. The gate asks Airlock with the tool name and
// the arguments as intercepted, sends progress notifications while it
// waits, withdraws the request when the client cancels the call, and on
// approval claims the one execution through the client package's Gate
// (which checks expires_at immediately before starting and keeps a journal
// so that a call runs at most once) and forwards the call. A denial comes
// back as an isError result carrying the reviewer's note; an expiry as an
// isError result saying nobody decided in time. A tool that requires task
// augmentation is refused before anyone is asked: the gate does not relay
// the upstream's tasks. A client at 2026-07-28 that declares the Tasks
// extension gets a gated call as a task of the gate's own (task.go).
//
// The gate registers an Airlock instance at start and deletes it at exit,
// which cancels whatever is still pending. Stdout carries nothing but MCP
// messages.
package gate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProtocolVersions are the MCP revisions the gate negotiates with its
// client, newest first. At 2026-07-28 (stateless: server/discover and a
// per-request _meta instead of initialize) the gate offers its upstream
// the same revision and falls back to 2025-11-25 when the upstream refuses
// it; at an older one the upstream is initialized at the client's.
var ProtocolVersions = []string{Revision2026, "2025-11-25", "2025-06-18", "2025-03-26"}

// Revision2026 is the stateless MCP revision.
const Revision2026 = "2026-07-28"

// DefaultProgressInterval is how often the gate tells a waiting client that
// it still waits for a reviewer.
const DefaultProgressInterval = 5 * time.Second

// Config configures Run. Command or URL, Client, JournalDir, In and Out
// are required.
type Config struct {
	// Command is the upstream MCP server's command line.
	Command []string
	// URL, instead of Command, is a streamable-HTTP upstream MCP server's
	// endpoint (such as https://mcp.example.com/mcp), sent Header with
	// every request (an Authorization header, say).
	URL    string
	Header http.Header
	// Env is the upstream's environment. Default: the gate's own, without
	// any AIRLOCK_* variable, so the upstream never sees the agent's token.
	Env []string
	// Dir is the upstream's working directory (default: the gate's).
	Dir string
	// Client talks to Airlock with an agent token.
	Client *client.Client
	// Rules select the calls that need approval (zero value: every tool not
	// annotated read-only).
	Rules Rules
	// JournalDir holds one journal per gate process (a subdirectory named
	// by its instance). At start the gate settles the journals that gates
	// which died left behind.
	JournalDir string
	// InstanceName names the gate's instance in the inbox (default:
	// "airlock gate: " and the command).
	InstanceName string
	// TokenAudience, when set, is the aud of the approval tokens the gate
	// hands its upstream: the upstream's name for itself.
	TokenAudience string
	// In and Out are the MCP client's side (stdin and stdout).
	In  io.ReadCloser
	Out io.WriteCloser
	// Stderr receives the upstream server's stderr (default os.Stderr).
	Stderr io.Writer
	// Logger receives the gate's notices (default: discard).
	Logger *slog.Logger
	// ProgressInterval is how often a waiting call gets a progress
	// notification (default DefaultProgressInterval).
	ProgressInterval time.Duration
	// AcceptEdits sends a call a reviewer approved with changed arguments
	// upstream with those arguments, and tells the model in the result
	// what changed (docs/protocol.md, "Edits"). Without it such a call is
	// refused with a result naming the edited request.
	AcceptEdits bool
	// ToolApproval turns on the experimental tool-approval extension
	// (MCP SEP-2848, draft; docs/adapters.md, "Tool approval"): a gated
	// call answered as a task completes with its execution disposition,
	// a call that did not run completes as a denial, and the task's
	// statusMessage carries no text from the upstream or a reviewer.
	ToolApproval bool
	// Version is the gate's version, in its Airlock instance's metadata
	// and, when the client names no implementation, as the version the
	// upstream server hears (default "dev").
	Version string
}

// proxy is one running gate.
type proxy struct {
	cfg Config
	log *slog.Logger
	sdk *slog.Logger
	ctx context.Context // ends when the gate stops
	// waitCtx ends also when the client's input ends: waiting for a
	// reviewer stops then.
	waitCtx  context.Context
	gate     *client.Gate
	inst     string
	idPrefix string // of the gate's own JSON-RPC IDs and progress tokens

	upPeer      *peer // the upstream's connection, from the start
	down        *peer // the client's connection
	srv         *mcp.Server
	clientReady chan struct{} // closed once the client is initialized
	readyOnce   sync.Once
	upReady     chan *mcp.ClientSession // the upstream session, once initialized
	// upFailed carries why the upstream could not be initialized, sent
	// once the client has been answered with an error (failUpstream), so
	// that the gate exits after its client has heard why.
	upFailed  chan error
	upFailure error // set by failUpstream; guarded by mu
	// upInit serializes the upstream's initialization for a client at
	// 2026-07-28, whose first request (server/discover or any other)
	// starts it.
	upInit sync.Mutex
	upErr  error // why it could not be initialized

	mu sync.Mutex
	ss *mcp.ServerSession // the downstream session, once it initializes
	up *mcp.ClientSession // the upstream session, once initialized
	// upMeta is the _meta every request to an upstream at 2026-07-28
	// carries (its revision, the client's name and capabilities as the
	// gate offers them); nil for an upstream at an older revision.
	upMeta   map[string]any
	tools    map[string]*upstreamTool
	syncMu   sync.Mutex // one tool list refresh at a time
	progress map[string]*progressRoute
	nextTok  atomic.Int64
	tasks    map[string]*gateTask // gated calls answered as tasks (task.go)
}

// Run runs the gate until the client closes its side (nil), ctx ends
// (nil), or the upstream server exits (an error).
func Run(ctx context.Context, cfg Config) error {
	if (len(cfg.Command) == 0 || cfg.Command[0] == "") == (cfg.URL == "") {
		return errors.New("gate: give the upstream MCP server's command after --, or its URL with --upstream-url, not both")
	}
	if cfg.Client == nil {
		return errors.New("gate: Config.Client is required")
	}
	if cfg.JournalDir == "" {
		return errors.New("gate: Config.JournalDir is required")
	}
	if cfg.In == nil || cfg.Out == nil {
		return errors.New("gate: Config.In and Config.Out are required")
	}
	if err := cfg.Rules.Validate(); err != nil {
		return fmt.Errorf("gate: rules: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Env == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AIRLOCK_") {
				cfg.Env = append(cfg.Env, kv)
			}
		}
	}
	if cfg.InstanceName == "" {
		cfg.InstanceName = "airlock gate: " + strings.Join(cfg.Command, " ") + cfg.URL
		if len(cfg.InstanceName) > 200 {
			cfg.InstanceName = cfg.InstanceName[:197] + "..."
		}
	}
	p := &proxy{
		cfg: cfg, log: cfg.Logger,
		sdk:      mcpsdk.Logger(cfg.Logger.Handler()),
		idPrefix: "airlock-gate-" + rand.Text()[:8] + "-",
		tools:    map[string]*upstreamTool{}, progress: map[string]*progressRoute{},
		clientReady: make(chan struct{}), upReady: make(chan *mcp.ClientSession, 1), upFailed: make(chan error, 1),
	}
	return p.run(ctx)
}

func (p *proxy) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.ctx = ctx

	upstream := map[string]any{"adapter": "airlock gate", "version": p.cfg.Version, "command": p.cfg.Command, "pid": os.Getpid()}
	if p.cfg.URL != "" {
		upstream = map[string]any{"adapter": "airlock gate", "version": p.cfg.Version, "url": p.cfg.URL, "pid": os.Getpid()}
	}
	meta, _ := json.Marshal(upstream)
	inst, err := p.cfg.Client.RegisterInstance(ctx, p.cfg.InstanceName, meta, client.WithTokenAudience(p.cfg.TokenAudience))
	if err != nil {
		return fmt.Errorf("gate: register with Airlock at %s (check --url and the agent token): %w", p.cfg.Client.BaseURL(), err)
	}
	p.inst = inst.ID
	p.log.Info("registered", "instance", inst.ID)
	defer p.deleteInstance()

	if err := p.openJournal(ctx); err != nil {
		return err
	}
	defer p.closeJournal()

	// When the client's input ends, calls still waiting for a reviewer are
	// abandoned (and their requests withdrawn) at once; the SDK waits for
	// every handler before it lets the session end.
	waitCtx, inputEnded := context.WithCancel(ctx)
	defer inputEnded()
	p.waitCtx = waitCtx

	if err := p.startUpstream(ctx); err != nil {
		return err
	}
	defer p.closeUpstream()
	p.newServer()
	in := &eofReader{ReadCloser: p.cfg.In, onEnd: inputEnded}
	conn, err := (&mcp.IOTransport{Reader: in, Writer: p.cfg.Out}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("gate: serve the MCP client: %w", err)
	}
	p.down = newPeer(ctx, conn, "the MCP client", p.idPrefix, p.taskMethods(), p.fromClient)
	p.down.onAnswered = p.answered
	ss, err := p.srv.Connect(ctx, connected{p.down}, nil)
	if err != nil {
		return fmt.Errorf("gate: serve the MCP client: %w", err)
	}
	downDone := make(chan error, 1)
	go func() { downDone <- ss.Wait() }()
	var upDone chan error // once the upstream is initialized
	for {
		select {
		case <-downDone:
			select {
			case err := <-p.upFailed: // answered, then the client left
				return err
			default:
			}
			p.log.Info("the MCP client closed the session")
			return nil
		case <-ctx.Done():
			ss.Close()
			return nil
		case err := <-p.upFailed:
			inputEnded() // nothing can be approved: stop waiting for reviewers
			ss.Close()   // after the client has its answer
			return err
		case up := <-p.upReady:
			upDone = make(chan error, 1)
			go func() { upDone <- up.Wait() }()
		case err := <-upDone:
			inputEnded()
			ss.Close()
			if err == nil {
				err = errors.New("it closed its output")
			}
			return fmt.Errorf("gate: the upstream MCP server exited: %v", err)
		}
	}
}

// closeUpstream ends the upstream session (or, when the client never
// initialized, the process), waiting for the process to exit.
func (p *proxy) closeUpstream() {
	if up := p.upstream(); up != nil {
		up.Close()
	} else {
		p.upPeer.Close()
	}
}

// deleteInstance deletes the gate's instance, cancelling what is pending.
func (p *proxy) deleteInstance() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n, err := p.cfg.Client.DeleteInstance(ctx, p.inst)
	if err != nil {
		p.log.Warn("could not delete the instance; its pending requests will expire", "instance", p.inst, "err", err)
		return
	}
	p.log.Info("deleted the instance", "instance", p.inst, "cancelled", n)
}

// openJournal settles the journals of gates that died, then opens this
// gate's own.
func (p *proxy) openJournal(ctx context.Context) error {
	if err := os.MkdirAll(p.cfg.JournalDir, 0o700); err != nil {
		return fmt.Errorf("gate: journal: %w", err)
	}
	entries, err := os.ReadDir(p.cfg.JournalDir)
	if err != nil {
		return fmt.Errorf("gate: journal: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != p.inst {
			p.settle(ctx, e.Name())
		}
	}
	g, err := client.NewGate(client.GateConfig{
		Client: p.cfg.Client, InstanceID: p.inst, JournalDir: filepath.Join(p.cfg.JournalDir, p.inst),
		Timeout: p.cfg.Rules.Timeout, AcceptEdits: p.cfg.AcceptEdits,
	})
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	p.gate = g
	return nil
}

// settle recovers the journal of another gate's instance unless that gate
// still runs (its journal is locked), and removes it once settled.
func (p *proxy) settle(ctx context.Context, name string) {
	dir := filepath.Join(p.cfg.JournalDir, name)
	g, err := client.NewGate(client.GateConfig{Client: p.cfg.Client, InstanceID: name, JournalDir: dir})
	if err != nil {
		return // in use by a running gate, or not a journal
	}
	defer g.Close()
	recs, err := g.Recover(ctx)
	if err != nil {
		p.log.Warn("could not read an old journal", "dir", dir, "err", err)
		return
	}
	for _, r := range recs {
		if r.Err != nil {
			p.log.Warn("could not report a call a previous gate left unfinished", "request", r.RequestID, "err", r.Err)
		} else {
			p.log.Warn("reported a call a previous gate left unfinished", "request", r.RequestID, "status", r.Status)
		}
	}
	if n, err := g.Outstanding(); err == nil && n == 0 {
		g.Close()
		os.RemoveAll(dir)
	}
}

// closeJournal releases the journal, removing it when nothing in it is
// outstanding.
func (p *proxy) closeJournal() {
	n, err := p.gate.Outstanding()
	p.gate.Close()
	if err == nil && n == 0 {
		os.RemoveAll(filepath.Join(p.cfg.JournalDir, p.inst))
	}
}

// eofReader calls onEnd when its reader ends or fails.
type eofReader struct {
	io.ReadCloser
	onEnd func()
}

func (r *eofReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil {
		r.onEnd()
	}
	return n, err
}
