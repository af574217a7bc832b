package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// App is the airlock program as a value: it parses arguments and runs one
// subcommand. main gives it the process's streams and environment; tests
// give it buffers and a map, and run it in-process.
type App struct {
	// Stdin is what `airlock hook` reads the agent's payload from
	// (os.Stdin in main); nil reads nothing.
	Stdin io.Reader
	// Stdout receives a command's results (version, help).
	Stdout io.Writer
	// Stderr receives logs, usage and the server's start-up notices.
	Stderr io.Writer
	// LookupEnv reads an AIRLOCK_* variable (os.LookupEnv in main); nil
	// means an empty environment.
	LookupEnv func(key string) (string, bool)
	// IsTerminal reports whether a stream is an interactive terminal
	// (isTerminal in main; nil, never): serve's logs default to text on
	// one and to JSON otherwise.
	IsTerminal func(w any) bool
}

// Run runs the subcommand named by args[0] with the rest of args. With no
// arguments it prints the help. It returns when the command is done; for
// serve, when ctx ends and the server has shut down.
func (a *App) Run(ctx context.Context, args []string) error {
	if a.Stdin == nil {
		a.Stdin = strings.NewReader("")
	}
	if a.Stdout == nil {
		a.Stdout = io.Discard
	}
	if a.Stderr == nil {
		a.Stderr = io.Discard
	}
	if a.LookupEnv == nil {
		a.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if a.IsTerminal == nil {
		a.IsTerminal = func(any) bool { return false }
	}
	if len(args) == 0 {
		printHelp(a.Stderr)
		return usageErrorf("no command given")
	}
	switch args[0] {
	case "-h", "-help", "--help":
		args = []string{"help"}
	case "-version", "--version":
		args = []string{"version"}
	}
	c, ok := findCommand(args[0])
	if !ok {
		return usageErrorf("unknown command %q; run `airlock help` for the list", args[0])
	}
	return c.exec(ctx, a, args[1:])
}

// env reads an environment variable; an empty value counts as unset, so
// `AIRLOCK_DB= airlock serve` means the default.
func (a *App) env(key string) (string, bool) {
	v, ok := a.LookupEnv(key)
	return v, ok && v != ""
}

// usageError is a mistake in how airlock was invoked (unknown command, bad
// flag or configuration): exit code 2, like the flag package.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Exit codes: 0 success, 1 the command failed, 2 it was invoked wrongly.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// exitCode prints err (unless the flag package already did) and maps it to
// the process's exit code.
func exitCode(a *App, err error) int {
	var ue *usageError
	var xe *exitError // the API commands' 3, 4 and 5 (requests.go)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &xe):
		fmt.Fprintf(a.Stderr, "airlock: %v\n", err)
		return xe.code
	case errors.As(err, &ue):
		fmt.Fprintf(a.Stderr, "airlock: %v\n", err)
		return exitUsage
	case errors.Is(err, errFlagParse):
		return exitUsage // the flag package has printed the error and usage
	default:
		fmt.Fprintf(a.Stderr, "airlock: %v\n", err)
		return exitFailure
	}
}

// errFlagParse marks a flag error the flag package has already reported.
var errFlagParse = errors.New("invalid flags")

// parseFlags parses args into fs, after filling every flag from its
// AIRLOCK_* environment twin, so a flag given on the command line wins over
// the environment. It refuses positional arguments.
func (a *App) parseFlags(fs *flag.FlagSet, args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := flagEnv(f)
		v, ok := a.env(key)
		if _, agent := f.Value.(*agentToken); agent && !ok {
			if v, ok = a.env(legacyTokenEnv); ok {
				fmt.Fprintf(a.Stderr, "airlock %s: %s is deprecated for agent commands; set %s instead\n", fs.Name(), legacyTokenEnv, agentTokenEnv)
			}
		}
		if !ok || envErr != nil {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			envErr = usageErrorf("environment variable %s: %v", key, err)
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errFlagParse, err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s takes no arguments, got %q", fs.Name(), fs.Args())
	}
	return nil
}

// newFlagSet returns a flag set for the named command whose usage lists
// each flag with its environment twin.
func (a *App) newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	a.setUsage(fs, commandUsage(fs, name))
	return fs
}

// commandUsage returns what prints the usage of the named command, whose
// flags fs holds.
func commandUsage(fs *flag.FlagSet, name string) func(w io.Writer) {
	c, _ := findCommand(name)
	return func(w io.Writer) {
		fmt.Fprintf(w, "Usage: airlock %s %s\n\n%s\n", c.name, c.args, c.summary)
		if hasFlags(fs) {
			fmt.Fprintf(w, "\nFlags (each also read from its environment variable; a flag wins):\n")
			fs.VisitAll(func(f *flag.Flag) {
				fmt.Fprintf(w, "  --%s  [$%s]\n    \t%s", f.Name, flagEnv(f), f.Usage)
				if !zeroDefault(f) {
					fmt.Fprintf(w, " (default %s)", f.DefValue)
				}
				fmt.Fprintln(w)
			})
		}
	}
}

// setUsage makes usage fs's usage. Asked for (-h, --help), the usage is
// the command's output, on stdout, and the command exits 0; after a flag
// error it follows the error on stderr. The flag package writes an
// error to the flag set's output just before it calls Usage, and writes
// nothing there before the usage it was asked for, so what was written
// tells the two apart.
func (a *App) setUsage(fs *flag.FlagSet, usage func(w io.Writer)) {
	out := &flagOutput{w: a.Stderr}
	fs.SetOutput(out)
	fs.Usage = func() {
		if out.wrote {
			usage(a.Stderr)
			return
		}
		usage(a.Stdout)
	}
}

// flagOutput is a flag set's output: stderr, remembering whether the
// flag package reported an error on it.
type flagOutput struct {
	w     io.Writer
	wrote bool
}

func (o *flagOutput) Write(p []byte) (int, error) {
	o.wrote = true
	return o.w.Write(p)
}

// zeroDefault reports whether f's default is its type's zero value (0,
// false, "", 0s), which usage leaves out as the flag package does: a flag
// whose usage explains its own default would otherwise read "(default 8)
// … (default 0)".
func zeroDefault(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	var zero reflect.Value
	if t.Kind() == reflect.Pointer {
		zero = reflect.New(t.Elem())
	} else {
		zero = reflect.Zero(t)
	}
	v, ok := zero.Interface().(flag.Value)
	return f.DefValue == "" || ok && f.DefValue == v.String()
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// The agent-side commands (hook, mcp, gate) take an agent token, and the
// CLI a reviewer's or admin's: one variable for both meant a shell set up
// for one handed the wrong token to the other. So the agent's is
// AIRLOCK_AGENT_TOKEN; AIRLOCK_TOKEN still works for the agent commands,
// with a warning, and is the CLI's.
const (
	agentTokenEnv  = "AIRLOCK_AGENT_TOKEN"
	legacyTokenEnv = "AIRLOCK_TOKEN"
)

// agentToken is the --token flag of an agent-side command, read from
// AIRLOCK_AGENT_TOKEN (see agentTokenEnv).
type agentToken struct{ v string }

func (t *agentToken) String() string {
	if t == nil {
		return ""
	}
	return t.v
}

func (t *agentToken) Set(s string) error { t.v = s; return nil }

// agentTokenVar defines an agent command's --token flag.
func agentTokenVar(fs *flag.FlagSet, usage string) *agentToken {
	t := new(agentToken)
	fs.Var(t, "token", usage)
	return t
}

// flagEnv returns the variable a flag is read from.
func flagEnv(f *flag.Flag) string {
	if _, ok := f.Value.(*agentToken); ok {
		return agentTokenEnv
	}
	return envName(f.Name)
}

// envName returns the environment twin of a flag: --min-timeout is
// AIRLOCK_MIN_TIMEOUT.
func envName(flagName string) string {
	b := []byte("AIRLOCK_" + flagName)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
