package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

func runHelp(ctx context.Context, a *App, args []string) error {
	fs := a.newFlagSet("help")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errFlagParse, err)
	}
	switch fs.NArg() {
	case 0:
		printHelp(a.Stdout)
		return nil
	case 1, 2:
		c, ok := findCommand(fs.Arg(0))
		if !ok {
			return usageErrorf("unknown command %q; run `airlock help` for the list", fs.Arg(0))
		}
		args := []string{"-h"}
		if fs.NArg() == 2 {
			// `airlock help requests list` is `airlock requests list -h`.
			// The hook's agent is not a subcommand: its usage is the
			// hook's, shown without one.
			if _, ok := findSubcommand(c.name, fs.Arg(1)); ok {
				args = []string{fs.Arg(1), "-h"}
			} else if c.name != "hook" {
				return usageErrorf("%s has no subcommand %q; run `airlock help %s` for its usage", c.name, fs.Arg(1), c.name)
			}
		}
		// Every command prints its usage on stdout for -h.
		if err := c.exec(ctx, a, args); !errors.Is(err, flag.ErrHelp) {
			return fmt.Errorf("help %s: %s did not print its usage for -h (%v)", c.name, c.name, err)
		}
		return nil
	default:
		return usageErrorf("help takes a command and at most one subcommand")
	}
}

// printHelp lists every command with its summary.
func printHelp(w io.Writer) {
	fmt.Fprintf(w, "Airlock asks a person before an AI agent's tool call runs.\n\nUsage: airlock <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun `airlock help <command>` for a command's flags.\n")
}
