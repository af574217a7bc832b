package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/hook"
)

// DefaultHookWait is how long a hook waits for a decision by default: well
// under Claude Code's default command-hook timeout of 600 s, which the
// settings raise above --wait anyway (docs/integrations/claude-code.md).
const DefaultHookWait = 5 * time.Minute

// hookFaultEnv injects a panic into the hook, so the tests can prove a
// crashing hook still blocks the call (exit 2). It is read from the
// environment of the one process it breaks.
const hookFaultEnv = "AIRLOCK_HOOK_FAULT"

// runHook is `airlock hook AGENT`: it reads the agent's hook payload on
// stdin and writes the agent's answer on stdout.
//
// An agent runs the call when its hook exits with any code but 0 or 2
// (Claude Code, Codex and Gemini CLI alike), so every path here ends in an
// answer on stdout with exit 0, or a reason on stderr with exit 2 (which
// all three read as "block"): bad flags and a panic exit 2; bad input, a
// missing token and an unreachable server answer --on-timeout with exit 0.
// "allow" comes only from an approval this hook claimed.
func runHook(ctx context.Context, a *App, args []string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &exitError{exitUsage, fmt.Errorf("hook: internal error (%v); blocking this call", r)}
		}
	}()
	fs := a.newFlagSet("hook")
	url := fs.String("url", "http://127.0.0.1:8080", "the Airlock server")
	token := agentTokenVar(fs, "an agent token; prefer the environment variable, since other users can see command lines")
	var wait time.Duration
	durationVar(fs, &wait, "wait", DefaultHookWait, "how long to wait for a reviewer; set the agent's hook timeout above it")
	onTimeout := fs.String("on-timeout", "ask", "the answer without a decision (no decision in time, expiry, cancellation, server down, bad input): ask or deny")
	event := fs.String("event", "pre-tool-use", "the hook event: pre-tool-use, or for claude-code post-tool-use and session-end")
	var match globList
	fs.Var(&match, "match", "glob of the tools to gate, such as Bash or mcp__github__* (repeat, or separate with commas; default every tool)")
	stateDir := fs.String("state-dir", defaultHookState(), "directory where the hook remembers each session's instance")
	acceptEdits := fs.Bool("accept-edits", false, "claude-code: when a reviewer approves the call with changed arguments, allow it with those (updatedInput) instead of denying it")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			// `airlock hook -h`, which `airlock help hook` runs: a
			// person asking, since no agent is named. The usage goes to
			// stdout, exit 0, like every command's.
			fs.Usage()
			return flag.ErrHelp
		}
		return usageErrorf("hook: name the agent: airlock hook claude-code|codex|gemini [flags]; blocking this call")
	}
	agent, ok := hook.Agents[args[0]]
	if !ok {
		return usageErrorf("hook: unknown agent %q: use claude-code, codex or gemini; blocking this call", args[0])
	}
	// With an agent named, this is an agent's hook command line, and an
	// agent reads stdout as its answer and exit 0 as "no objection". So
	// the usage, when asked for here, goes to stderr with exit 2, which
	// every agent reads as "block".
	fs.SetOutput(a.Stderr)
	usage := commandUsage(fs, "hook")
	fs.Usage = func() { usage(a.Stderr) }
	if err := a.parseFlags(fs, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &exitError{exitUsage, errors.New("hook: help asked for on an agent's hook command line (the usage is above; `airlock help hook` prints it alone); blocking this call")}
		}
		return &exitError{exitUsage, fmt.Errorf("hook: %v; blocking this call", err)}
	}
	fallback, err := hook.ParseFallback(*onTimeout)
	if err != nil {
		return &exitError{exitUsage, fmt.Errorf("hook: %v; blocking this call", err)}
	}
	for _, g := range match {
		if err := hook.CheckGlob(g); err != nil {
			return &exitError{exitUsage, fmt.Errorf("hook: %v; blocking this call", err)}
		}
	}
	if wait < time.Second {
		return &exitError{exitUsage, errors.New("hook: --wait must be at least 1s; blocking this call")}
	}
	if v, _ := a.env(hookFaultEnv); v == "panic" {
		panic("fault injected by " + hookFaultEnv)
	}

	gate := &hook.Gate{Wait: wait, Fallback: fallback, AcceptEdits: *acceptEdits}
	answer := func(ans hook.Answer) error {
		_, err := a.Stdout.Write(agent.Encode(ans))
		return err
	}
	warn := func(format string, args ...any) {
		fmt.Fprintf(a.Stderr, "airlock hook %s: %s\n", agent.Name, fmt.Sprintf(format, args...))
	}
	refuse := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		warn("%s", msg)
		return answer(gate.FallbackAnswer(msg))
	}

	switch *event {
	case "pre-tool-use":
	case "post-tool-use", "session-end":
		if agent.Name != hook.ClaudeCode.Name {
			return &exitError{exitUsage, fmt.Errorf("hook: --event %s is for claude-code; %s hooks answer %s only", *event, agent.Name, agent.Event)}
		}
	default:
		return &exitError{exitUsage, fmt.Errorf("hook: unknown --event %q: use pre-tool-use, post-tool-use or session-end; blocking this call", *event)}
	}

	data, err := io.ReadAll(io.LimitReader(a.Stdin, hook.MaxPayload+1))
	var p hook.Payload
	switch {
	case err != nil:
		err = fmt.Errorf("could not read the hook input: %v", err)
	case len(data) > hook.MaxPayload:
		err = fmt.Errorf("the hook input is over %d bytes; Airlock takes tool calls up to %d bytes", hook.MaxPayload, airlock.MaxBodyBytes)
	default:
		p, err = hook.ParsePayload(data)
	}
	if err != nil {
		if *event != "pre-tool-use" {
			warn("%v", err)
			_, werr := a.Stdout.Write(hook.Nothing)
			return werr
		}
		return refuse("%v", err)
	}

	if *event == "pre-tool-use" {
		call, err := agent.Call(p)
		if err != nil {
			return refuse("%v", err)
		}
		if !hook.Match(match, call.Tool) {
			_, err := a.Stdout.Write(hook.Nothing)
			return err
		}
		if token.v == "" {
			return refuse("no agent token: set %s (or pass --token) in the hook's command", agentTokenEnv)
		}
		c, err := newHookClient(*url, token.v)
		if err != nil {
			return refuse("%v", err)
		}
		gate.Backend = clientBackend{c}
		gate.Cache = newFileCache(*stateDir, *url, token.v)
		ans := gate.Decide(ctx, call)
		if ans.Verdict != hook.Allow {
			warn("%s", ans.Reason)
		}
		return answer(ans)
	}

	// PostToolUse and SessionEnd decide nothing: they answer {} whatever
	// happens, and say on stderr what went wrong.
	defer func() {
		if err == nil {
			_, err = a.Stdout.Write(hook.Nothing)
		}
	}()
	if p.SessionID == "" {
		warn("the hook input has no session_id")
		return nil
	}
	if token.v == "" {
		warn("no agent token: set %s (or pass --token) in the hook's command", agentTokenEnv)
		return nil
	}
	c, err := newHookClient(*url, token.v)
	if err != nil {
		warn("%v", err)
		return nil
	}
	gate.Backend = clientBackend{c}
	gate.Cache = newFileCache(*stateDir, *url, token.v)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if *event == "session-end" {
		n, err := gate.EndSession(wctx, hook.ClaudeCode.Name, p.SessionID)
		if err != nil {
			warn("could not end session %s in Airlock: %s", p.SessionID, err)
		} else if n > 0 {
			warn("session %s ended: %d pending request(s) cancelled", p.SessionID, n)
		}
		return nil
	}
	if !hook.Match(match, p.ToolName) || p.ToolUseID == "" {
		return nil
	}
	report := airlock.ReportInput{Status: airlock.ExecSucceeded, Detail: hook.Detail(string(p.ToolResponse))}
	if p.HookEventName == "PostToolUseFailure" || p.Error != "" {
		report = airlock.ReportInput{Status: airlock.ExecFailed, Detail: hook.Detail(p.Error)}
	}
	if _, err := gate.Report(wctx, hook.ClaudeCode.Name, p.SessionID, p.ToolName, p.ToolUseID, report); err != nil {
		warn("could not report how %s ran: %s", p.ToolUseID, err)
	}
	return nil
}

// newHookClient is the REST client of a hook: few, quick retries, since an
// agent is waiting and the fallback answer is always at hand.
func newHookClient(url, token string) (*client.Client, error) {
	return client.New(url, token,
		client.WithUserAgent("airlock-hook/"+userAgentVersion()),
		client.WithRetry(client.Retry{Attempts: 3, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}),
		client.WithTimeout(15*time.Second))
}

// globList is a repeatable flag of comma-separated globs.
type globList []string

func (g *globList) String() string { return strings.Join(*g, ",") }

func (g *globList) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*g = append(*g, part)
		}
	}
	return nil
}

// defaultHookState is the hook's state directory under the user's cache
// directory, or "" (no cache) when there is none.
func defaultHookState() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "airlock", "hook")
}

// fileCache remembers each session's instance in a file, one per session,
// under a directory per server and token. Losing it costs one list of
// instances; a wrong entry costs one not_found, after which the hook looks
// again.
type fileCache struct{ dir string }

func newFileCache(root, url, token string) hook.InstanceCache {
	if root == "" {
		return nil
	}
	return fileCache{filepath.Join(root, digest(url + "\x00" + token)[:24])}
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (f fileCache) path(key string) string { return filepath.Join(f.dir, digest(key)[:32]) }

func (f fileCache) Get(key string) (string, bool) {
	b, err := os.ReadFile(f.path(key))
	id := strings.TrimSpace(string(b))
	return id, err == nil && strings.HasPrefix(id, "ins_")
}

func (f fileCache) Put(key, id string) {
	if os.MkdirAll(f.dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(f.dir, ".tmp-")
	if err != nil {
		return
	}
	_, werr := tmp.WriteString(id)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), f.path(key)) != nil {
		os.Remove(tmp.Name())
	}
}

func (f fileCache) Forget(key string) { os.Remove(f.path(key)) }

// clientBackend is the hook's Backend over the REST client.
type clientBackend struct{ c *client.Client }

func (b clientBackend) Instances(ctx context.Context) ([]airlock.Instance, error) {
	list, err := b.c.ListInstances(ctx)
	out := make([]airlock.Instance, 0, len(list))
	for _, in := range list {
		out = append(out, airlock.Instance{ID: in.ID, Name: in.Name, CreatedAt: in.CreatedAt})
	}
	return out, err
}

func (b clientBackend) RegisterInstance(ctx context.Context, in airlock.InstanceInput) (airlock.Instance, error) {
	r, err := b.c.RegisterInstance(ctx, in.Name, in.Metadata)
	if err != nil {
		return airlock.Instance{}, err
	}
	return airlock.Instance{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt}, nil
}

func (b clientBackend) DeleteInstance(ctx context.Context, id string) (int, error) {
	return b.c.DeleteInstance(ctx, id)
}

func (b clientBackend) CreateRequest(ctx context.Context, instanceID, key string, in airlock.CreateRequestInput) (airlock.Request, error) {
	r, _, err := b.c.CreateRequest(ctx, instanceID, key, client.CreateRequestInput{
		Tool: in.Tool, Arguments: in.Arguments, Timeout: in.Timeout, AgentReasoning: in.AgentReasoning, Context: in.Context,
	})
	return fromClient(r), err
}

func (b clientBackend) Await(ctx context.Context, id string, wait time.Duration) (airlock.Request, error) {
	r, err := b.c.LongPollRequest(ctx, id, wait)
	return fromClient(r), err
}

func (b clientBackend) Cancel(ctx context.Context, id string) (airlock.Request, error) {
	r, err := b.c.CancelRequest(ctx, id)
	return fromClient(r), err
}

func (b clientBackend) Claim(ctx context.Context, id string) (airlock.Request, error) {
	r, err := b.c.ClaimExecution(ctx, id)
	return fromClient(r), err
}

func (b clientBackend) Report(ctx context.Context, id string, in airlock.ReportInput) (airlock.Request, error) {
	r, err := b.c.ReportExecution(ctx, id, in.Status, in.Detail)
	return fromClient(r), err
}

func (b clientBackend) Requests(ctx context.Context, instanceID, tool string, state airlock.State) ([]airlock.Request, error) {
	page, err := b.c.ListRequests(ctx, client.ListRequestsOptions{InstanceID: instanceID, Tool: tool, State: state, Limit: 200})
	if err != nil {
		return nil, err
	}
	out := make([]airlock.Request, 0, len(page.Items))
	for i := range page.Items {
		out = append(out, fromClient(&page.Items[i]))
	}
	return out, nil
}

// fromClient keeps what the hook reads of a request.
func fromClient(r *client.ApprovalRequest) airlock.Request {
	if r == nil {
		return airlock.Request{}
	}
	out := airlock.Request{ID: r.ID, InstanceID: r.InstanceID, State: r.State, Tool: r.Tool, Arguments: r.Arguments, Context: r.Context,
		DerivedFrom: r.DerivedFrom}
	if d := r.Decision; d != nil {
		out.ReplacedBy = d.ReplacedBy
		out.Decision = &airlock.Decision{Status: d.Status, Note: d.Note, DecidedAt: d.DecidedAt, DecidedBy: d.DecidedBy, ExpiresAt: d.ExpiresAt}
	}
	if e := r.Execution; e != nil {
		out.Execution = &airlock.Execution{ClaimedAt: e.ClaimedAt, Status: e.Status, FinishedAt: e.FinishedAt, Detail: e.Detail}
	}
	return out
}
