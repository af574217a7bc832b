package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/gate"
)

// runGate is `airlock gate`: an MCP client starts it instead of the
// upstream server; it starts the upstream itself and proxies, asking
// Airlock before each selected tools/call. Stdout carries nothing but MCP
// messages; logs and the upstream's stderr go to stderr. It exits 0 when
// the client closes stdin, 1 when the upstream server exits.
func runGate(ctx context.Context, a *App, args []string) error {
	flags, command := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		flags, command = args[:i], args[i+1:]
	}
	fs := a.newFlagSet("gate")
	url := fs.String("url", "http://127.0.0.1:8080", "the Airlock server")
	token := agentTokenVar(fs, "an agent token; prefer the environment variable, since other users can see command lines")
	rules := fs.String("rules", "", "a JSON rules file choosing the tools that need approval (default: every tool not annotated readOnlyHint; see docs/adapters.md)")
	journal := fs.String("journal", defaultJournal(), "directory of the gate's journals, which make each approved call run at most once across crashes")
	name := fs.String("name", "", "the instance name reviewers see (default: \"airlock gate: \" and the command)")
	var progress time.Duration
	durationVar(fs, &progress, "progress-interval", gate.DefaultProgressInterval, "how often a call waiting for approval gets a progress notification")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	upstreamURL := fs.String("upstream-url", "", "a streamable-HTTP upstream MCP server's endpoint, instead of a command after --")
	audience := fs.String("token-audience", "", "the upstream's name for itself: its approval tokens carry it as aud (docs/tokens.md)")
	acceptEdits := fs.Bool("accept-edits", false, "when a reviewer approves a call with changed arguments, send those upstream (and tell the model what changed) instead of refusing the call")
	toolApproval := fs.Bool("experimental-tool-approval", false, "answer gated calls by the draft tool-approval extension (MCP SEP-2848) to clients with tasks: a completed task says whether the tool ran (docs/adapters.md)")
	var headers headerList
	fs.Var(&headers, "header", `a header for the HTTP upstream, "Name: value" (repeat for more); prefer the environment variable for secrets`)
	if err := a.parseFlags(fs, flags); err != nil {
		if errors.Is(err, errFlagParse) || errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v; put the upstream MCP server's command after --, as in: airlock gate -- npx @modelcontextprotocol/server-filesystem /tmp", err)
	}
	switch {
	case len(command) == 0 && *upstreamURL == "":
		return usageErrorf("no upstream: put the MCP server's command after --, as in: airlock gate -- npx @modelcontextprotocol/server-filesystem /tmp, or give its URL with --upstream-url")
	case len(command) > 0 && *upstreamURL != "":
		return usageErrorf("give the upstream's command after -- or its --upstream-url, not both")
	case len(headers) > 0 && *upstreamURL == "":
		return usageErrorf("--header is for an HTTP upstream (--upstream-url); a command's environment is its own")
	}
	if *upstreamURL != "" {
		if u, err := neturl.Parse(*upstreamURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("--upstream-url %q is not an http(s) URL such as https://mcp.example.com/mcp", *upstreamURL)
		}
	}
	if token.v == "" {
		return usageErrorf("no token: set %s (or pass --token) to an agent token", agentTokenEnv)
	}
	if *journal == "" {
		return usageErrorf("no journal directory: pass --journal (no user cache directory was found)")
	}
	if progress <= 0 {
		return usageErrorf("--progress-interval must be positive")
	}
	level, err := parseLevel(*logLevel)
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	var r gate.Rules
	if *rules != "" {
		if r, err = gate.LoadRules(*rules); err != nil {
			return &usageError{msg: err.Error()}
		}
	}
	c, err := client.New(*url, token.v, client.WithUserAgent("airlock-gate/"+userAgentVersion()))
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	log := slog.New(slog.NewTextHandler(a.Stderr, &slog.HandlerOptions{Level: level}))
	return gate.Run(ctx, gate.Config{
		Command: command, URL: *upstreamURL, Header: headers.header(), Client: c, Rules: r, JournalDir: *journal, InstanceName: *name, TokenAudience: *audience,
		In: os.Stdin, Out: writeOnly{a.Stdout}, Stderr: a.Stderr, Logger: log,
		ProgressInterval: progress, Version: userAgentVersion(), AcceptEdits: *acceptEdits, ToolApproval: *toolApproval,
	})
}

// headerList is the repeatable --header flag: "Name: value".
type headerList []string

func (h *headerList) String() string { return strings.Join(*h, ", ") }

func (h *headerList) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
		return fmt.Errorf("%q is not a header: write it as \"Name: value\"", s)
	}
	*h = append(*h, name+": "+value)
	return nil
}

func (h headerList) header() http.Header {
	out := http.Header{}
	for _, kv := range h {
		name, value, _ := strings.Cut(kv, ": ")
		out.Add(name, value)
	}
	return out
}

// writeOnly gives stdout the Close the MCP transport wants; the process
// closes stdout itself when it exits.
type writeOnly struct{ io.Writer }

func (writeOnly) Close() error { return nil }

// defaultJournal is the journal directory under the user's cache
// directory, or "" when there is none.
func defaultJournal() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "airlock", "gate")
}
