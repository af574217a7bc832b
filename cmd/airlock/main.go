// Command airlock is Airlock's one binary: the server (REST API, MCP and
// inbox), `airlock mcp`, `airlock gate`, the reviewer's CLI and `airlock
// bench`. Run `airlock help` for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlockhq/airlock/cmd/airlock/internal/bench"
)

// main only wires the process to an App and maps its error to an exit code;
// everything else lives in App so tests can run it in-process.
func main() {
	// `airlock bench` re-executes this binary as its server, to measure
	// the server's CPU apart from its own.
	if bench.IsChild() {
		os.Exit(bench.ChildMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app := &App{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, IsTerminal: isTerminal}
	err := app.Run(ctx, os.Args[1:])
	stop()
	os.Exit(exitCode(app, err))
}
