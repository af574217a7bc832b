package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Output collects what a process (or an in-process server) writes and
// lets a test wait for a line. Safe for concurrent use.
type Output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

// NewOutput returns an empty Output.
func NewOutput() *Output { return &Output{changed: make(chan struct{})} }

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Wait waits until the output matches re and returns the submatches. It
// returns an error, naming the output, when exited is closed first or
// within passes; it may run on any goroutine.
func (o *Output) Wait(re *regexp.Regexp, exited <-chan struct{}, within time.Duration) ([]string, error) {
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		m := re.FindStringSubmatch(o.buf.String())
		changed := o.changed
		o.mu.Unlock()
		if m != nil {
			return m, nil
		}
		select {
		case <-changed:
		case <-exited:
			if m := re.FindStringSubmatch(o.String()); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("exited before printing %q; its output:\n%s", re, o)
		case <-timeout.C:
			return nil, fmt.Errorf("no %q within %v; output:\n%s", re, within, o)
		}
	}
}

// WaitFor is Wait with a minute that fails t.
func (o *Output) WaitFor(t testing.TB, re *regexp.Regexp, exited <-chan struct{}) []string {
	t.Helper()
	m, err := o.Wait(re, exited, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ListeningRE matches the notice `airlock serve` prints once it listens:
// submatch 1 is its URL, 2 its address.
var ListeningRE = regexp.MustCompile(`Airlock listening on (http://(\S+)) `)

// CleanEnv is this process's environment without AIRLOCK_* variables, so
// that a child process is configured by its flags and what the test adds.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIRLOCK_") {
			env = append(env, kv)
		}
	}
	return env
}

// Process is a real airlock binary running as a child process.
type Process struct {
	Cmd    *exec.Cmd
	Out    *Output       // its stdout and stderr
	Exited chan struct{} // closed once the process is reaped
	URL    string        // where it listens, as http://host:port
	Addr   string        // where it listens, as host:port
}

// Serve starts bin with args in dir ("" for this one) with CleanEnv plus
// env, and waits until it listens. The process is killed at the end of
// the test if still running.
func Serve(t testing.TB, bin, dir string, env []string, args ...string) *Process {
	t.Helper()
	p, err := TryServe(t, bin, dir, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TryServe is Serve for any goroutine: it returns what went wrong instead
// of failing the test.
func TryServe(t testing.TB, bin, dir string, env []string, args ...string) (*Process, error) {
	p := &Process{Cmd: exec.Command(bin, args...), Out: NewOutput(), Exited: make(chan struct{})}
	p.Cmd.Dir = dir
	p.Cmd.Env = append(CleanEnv(), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Out, p.Out
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.Cmd.Wait()
		close(p.Exited)
	}()
	t.Cleanup(p.Kill)
	m, err := p.Out.Wait(ListeningRE, p.Exited, time.Minute)
	if err != nil {
		return nil, errors.New("airlock serve " + err.Error())
	}
	p.URL, p.Addr = m[1], m[2]
	return p, nil
}

// AwaitLoad waits until done is closed, as a load test does before it
// kills the process mid-load. It fails t when the process exits first or
// a minute passes; what says what done counts, for the message.
func (p *Process) AwaitLoad(t testing.TB, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-p.Exited:
		t.Fatalf("the server exited under load:\n%s", p.Out)
	case <-time.After(time.Minute):
		t.Fatalf("fewer than %s in a minute", what)
	}
}

// Kill kills the process with SIGKILL (kill -9) and reaps it.
func (p *Process) Kill() {
	p.Cmd.Process.Kill()
	<-p.Exited
}

// Stop ends the process as Ctrl-C would and reaps it, killing it when it
// has not exited within.
func (p *Process) Stop(within time.Duration) {
	p.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.Exited:
	case <-time.After(within):
		p.Kill()
	}
}

// Pipes returns cmd's stdin and stdout, for a test that speaks to it (an
// MCP server over stdio), failing t when either cannot be made. Call it
// before cmd.Start.
func Pipes(t testing.TB, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	return stdin, stdout
}
