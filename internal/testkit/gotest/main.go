// Command gotest is the README's test command:
//
//	go run ./internal/testkit/gotest [go test flags] [packages]
//
// It runs `go test -json` with its arguments and prints what `go test`
// prints without -v: each package's ok, ? or FAIL line, and the output of
// the tests that failed, ending with go test's closing lines and exit
// status. Then it prints one line naming every test that skipped because
// something it needs is missing (PostgreSQL, Chromium, node, npm
// packages…) and why: such tests skip through testkit.Unavailable, whose
// message starts with testkit.MissingTag, and `go test` alone shows no
// skip of a package that passes.
//
// With -v or -bench it prints everything, as `go test` does; with -json
// it is `go test -json`.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/airlockhq/airlock/internal/testkit"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs go test with args and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	verbose, raw := false, false
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "args" {
			break // the rest are the test binary's
		}
		switch {
		case name == "v" && value != "false", name == "bench":
			verbose = true
		case name == "json" && value != "false":
			raw = true
		}
	}
	// Ctrl-C reaches go test, which is in the same process group; this
	// process waits for it to end and report what it ran. (Notify, not
	// Ignore: an ignored signal would stay ignored in go test.)
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)

	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stdin, cmd.Stderr = os.Stdin, stderr
	if raw {
		cmd.Args = append([]string{"go", "test"}, args...)
		cmd.Stdout = stdout
		return exitStatus(cmd.Run(), stderr)
	}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "gotest: %v\n", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "gotest: %v\n", err)
		return 1
	}
	p := newPrinter(stdout, stderr, verbose)
	p.read(pipe)
	code := exitStatus(cmd.Wait(), stderr)
	p.close()
	return code
}

// exitStatus is the exit status of a finished go command.
func exitStatus(err error, stderr io.Writer) int {
	var xe *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &xe) && xe.ExitCode() > 0:
		return xe.ExitCode()
	default:
		fmt.Fprintf(stderr, "gotest: go test: %v\n", err)
		return 1
	}
}

// event is one line of `go test -json` (go doc cmd/test2json), with the
// build events of Go 1.24.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail
}

// printer turns a stream of events into go test's output.
type printer struct {
	out, errOut io.Writer
	verbose     bool
	module      string // the module's path, left out of package names
	pkgs        map[string]*pkgOutput
	failed      bool     // a package failed
	missing     []skip   // tests skipped for a missing part
	order       []string // reasons of missing, in the order first seen
}

// pkgOutput is what a package's test binary has printed so far.
type pkgOutput struct {
	running map[string][]string // each running test's output
	failed  []string            // the output of the tests that failed
	lines   []string            // output of no test: PASS, FAIL, ok, …
}

// skip is a test skipped for a missing part.
type skip struct{ pkg, test, why string }

func newPrinter(out, errOut io.Writer, verbose bool) *printer {
	p := &printer{out: out, errOut: errOut, verbose: verbose, pkgs: map[string]*pkgOutput{}}
	if bi, ok := debug.ReadBuildInfo(); ok {
		p.module = bi.Main.Path
	}
	return p
}

// read handles every event of r; a line that is not an event is printed
// as it is.
func (p *printer) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(p.out, sc.Text())
			continue
		}
		p.event(e)
	}
}

// framing is the lines go test -v adds around a test's output, which go
// test without -v leaves out.
var framing = regexp.MustCompile(`^=== (RUN|PAUSE|CONT|NAME) `)

// missingLine is the line that testkit.Unavailable's t.Skip writes:
// "    file_test.go:12: missing: why".
var missingLine = regexp.MustCompile(`^\s+\S+:\d+: ` + regexp.QuoteMeta(testkit.MissingTag) + `(.*)`)

func (p *printer) event(e event) {
	if e.Action == "build-output" {
		// go test prints what fails to build as go build does.
		fmt.Fprint(p.errOut, e.Output)
		return
	}
	if e.Package == "" {
		return
	}
	pk := p.pkgs[e.Package]
	if pk == nil {
		pk = &pkgOutput{running: map[string][]string{}}
		p.pkgs[e.Package] = pk
	}
	if e.Action == "output" && p.verbose {
		fmt.Fprint(p.out, e.Output)
	}
	if e.Test != "" {
		switch e.Action {
		case "output":
			pk.running[e.Test] = append(pk.running[e.Test], e.Output)
		case "skip":
			for _, line := range pk.running[e.Test] {
				if m := missingLine.FindStringSubmatch(line); m != nil {
					p.missed(skip{pkg: e.Package, test: e.Test, why: strings.TrimSpace(m[1])})
					break
				}
			}
			delete(pk.running, e.Test)
		case "fail":
			pk.failed = append(pk.failed, pk.running[e.Test]...)
			delete(pk.running, e.Test)
		case "pass", "bench":
			delete(pk.running, e.Test)
		}
		return
	}
	switch e.Action {
	case "output":
		pk.lines = append(pk.lines, e.Output)
	case "pass", "skip":
		if !p.verbose {
			// go test shows a package that passed, or has no tests, by
			// its summary line alone.
			for _, l := range pk.lines {
				if strings.HasPrefix(l, "ok  ") || strings.HasPrefix(l, "?   ") {
					fmt.Fprint(p.out, l)
				}
			}
		}
		delete(p.pkgs, e.Package)
	case "fail":
		p.failed = true
		if !p.verbose {
			// What go test prints of a package that failed: the output
			// of its failed tests, of those it stopped in the middle of
			// (a panic, a timeout), and its own.
			p.print(pk.failed)
			names := make([]string, 0, len(pk.running))
			for name := range pk.running {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				p.print(pk.running[name])
			}
			for _, l := range pk.lines {
				fmt.Fprint(p.out, l)
			}
		}
		delete(p.pkgs, e.Package)
	}
}

// print prints a test's output without go test -v's framing.
func (p *printer) print(lines []string) {
	for _, l := range lines {
		if !framing.MatchString(l) {
			fmt.Fprint(p.out, l)
		}
	}
}

func (p *printer) missed(s skip) {
	if !slices.ContainsFunc(p.missing, func(m skip) bool { return m.why == s.why }) {
		p.order = append(p.order, s.why)
	}
	p.missing = append(p.missing, s)
}

// close ends the output as go test does, with FAIL when a package failed,
// and then names the tests skipped for a missing part.
func (p *printer) close() {
	if p.failed {
		fmt.Fprintln(p.out, "FAIL")
	}
	if line := p.missingLine(); line != "" {
		fmt.Fprintln(p.out, line)
	}
}

// missingLine is the one line that names the tests skipped for a missing
// part, grouped by why: for each reason, its packages, each with its
// tests' names or, past three, their number.
func (p *printer) missingLine() string {
	if len(p.missing) == 0 {
		return ""
	}
	var groups []string
	for _, why := range p.order {
		var pkgs []string
		tests := map[string][]string{}
		for _, s := range p.missing {
			if s.why != why {
				continue
			}
			name := p.pkgName(s.pkg)
			if tests[name] == nil {
				pkgs = append(pkgs, name)
			}
			tests[name] = append(tests[name], s.test)
		}
		var where []string
		for _, name := range pkgs {
			if ts := tests[name]; len(ts) > 3 {
				where = append(where, fmt.Sprintf("%s: %d tests", name, len(ts)))
			} else {
				where = append(where, name+": "+strings.Join(ts, ", "))
			}
		}
		groups = append(groups, why+" ["+strings.Join(where, "; ")+"]")
	}
	n := len(p.missing)
	s := "s"
	if n == 1 {
		s = ""
	}
	return fmt.Sprintf("SKIP %d test%s for a missing part (-v shows each): %s", n, s, strings.Join(groups, " | "))
}

// pkgName is a package's path within the module; the module's own
// package is its last element.
func (p *printer) pkgName(path string) string {
	if p.module == "" {
		return path
	}
	if path == p.module {
		return path[strings.LastIndexByte(path, '/')+1:]
	}
	if rest, ok := strings.CutPrefix(path, p.module+"/"); ok {
		return rest
	}
	return path
}
