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
	case 1:
		c, ok := findCommand(fs.Arg(0))
		if !ok {
			return usageErrorf("unknown command %q; run `airlock help` for the list", fs.Arg(0))
		}
		// Every command parses its flags with a.newFlagSet, which prints
		// the command's usage for -h; show it on stdout.
		shown := *a
		shown.Stderr = a.Stdout
		if err := c.exec(ctx, &shown, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
			return fmt.Errorf("help %s: %s did not print its usage for -h (%v)", c.name, c.name, err)
		}
		return nil
	default:
		return usageErrorf("help takes at most one command name")
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
