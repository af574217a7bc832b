package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/airlockhq/airlock/mcpserver"
)

// runMCP is `airlock mcp`: MCP over stdio (docs/mcp.md). An MCP
// client starts it as a subprocess; it connects to a running `airlock
// serve` over HTTP with an agent token and relays every tool call. Stdout
// carries nothing but MCP messages; logs go to stderr. It exits 0 when the
// client closes stdin (or signals it to stop).
func runMCP(ctx context.Context, a *App, args []string) error {
	fs := a.newFlagSet("mcp")
	url := fs.String("url", "http://127.0.0.1:8080", "the Airlock server to relay to (its /mcp endpoint)")
	token := agentTokenVar(fs, "the agent's bearer token; prefer the environment variable, since other users can see command lines")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	if err := a.parseFlags(fs, args); err != nil {
		return err
	}
	if token.v == "" {
		return usageErrorf("no token: set %s (or pass --token) to an agent token", agentTokenEnv)
	}
	if _, err := mcpserver.Endpoint(*url); err != nil {
		return &usageError{msg: err.Error()}
	}
	level, err := parseLevel(*logLevel)
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	log := slog.New(slog.NewTextHandler(a.Stderr, &slog.HandlerOptions{Level: level}))
	err = mcpserver.RunStdio(ctx, mcpserver.StdioConfig{
		URL: *url, Token: token.v, In: os.Stdin, Out: a.Stdout, Logger: log, Version: userAgentVersion(),
	})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // stopped by a signal: the client is done with us
	}
	return err
}
