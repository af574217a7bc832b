package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/internal/heapfloor"
	"github.com/airlockhq/airlock/internal/telemetry"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/store/sqlite"
)

// A run's server goes in a child process (the same binary, re-executed),
// so that the server's CPU is measured apart from the load generator's:
// the kernel counts each process's CPU, and the run reads the child's
// before and after the measured window. The child is the server alone: the
// run makes and removes its store, and talks to it over stdin and stdout,
// one JSON line at a time:
//
//	run → child   the childSpec, then commands ("stats"; "profile start PATH" and "profile stop", windowProfile; "tokens on" and "tokens off", claim.go; "audit on" and "audit off", audit.go; "push on" and "push off", push.go; a receiver's, receiver.go); closing stdin stops it
//	child → run   a childHello once it listens (or why it could not), then one answer per command
//
// The child stops when its stdin ends, so it outlives no run: a run that
// stops closes it, and a run that dies has it closed by the kernel; on
// Linux the child is also killed at once when the run dies (Pdeathsig).

// childEnv, set to childEnvValue, makes the binary a run's server instead
// of itself: `airlock` (cmd/airlock's main) and the test binaries of the
// packages that run benchmarks check it first (IsChild).
const (
	childEnv      = "AIRLOCK_BENCH_CHILD"
	childEnvValue = "server-v1"
)

// Bounds of a child's life.
const (
	// childStartBound is how long a child may take to listen: opening a
	// PostgreSQL store migrates its schema.
	childStartBound = 2 * time.Minute
	// childStopBound is how long a child may take to stop once its stdin
	// ends (the server's shutdown grace is 5s); then it is killed.
	childStopBound = 30 * time.Second
	// childTail is how much of a child's stderr an error about it quotes.
	childTail = 2 << 10
)

// Kinds of child.
const (
	childAirlock  = "airlock"  // `airlock serve`'s assembly (cmd/airlock/internal/server)
	childRawHTTP  = "rawhttp"  // the raw baseline over HTTP (rawhttp.go)
	childReceiver = "receiver" // a run's webhook receivers (receiver.go)
)

// storeSpec says where a run's store is: a SQLite file, or a schema of a
// PostgreSQL database. The run makes it and removes it; servers open it.
type storeSpec struct {
	SQLite   string `json:"sqlite,omitempty"`
	Postgres string `json:"postgres,omitempty"`
	Schema   string `json:"schema,omitempty"`
}

// childSpec is what a child serves.
type childSpec struct {
	Kind  string    `json:"kind"`
	Store storeSpec `json:"store"`
	// Admin is the admin token an Airlock child sets (the first replica's).
	Admin string `json:"admin,omitempty"`
	// Policy is a policy file an Airlock child loads.
	Policy string `json:"policy,omitempty"`
	// Connections is the raw baseline's pool on PostgreSQL.
	Connections int `json:"connections,omitempty"`
	// TokenKeys, for the raw baseline, is the key set (a JWKS document)
	// its consume verifies approval tokens with; without it, the raw
	// server has no consume.
	TokenKeys json.RawMessage `json:"token_keys,omitempty"`
	// CPUProfile, when set, is a file the child writes its CPU profile
	// to, from its start to its stop (Config.CPUProfile).
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// childHello is a child's first line: where it listens, or why it could
// not start.
type childHello struct {
	URL string `json:"url,omitempty"`
	// Describe and Connections are the raw baseline's store, for progress
	// and the report.
	Describe    string `json:"describe,omitempty"`
	Connections int    `json:"connections,omitempty"`
	Error       string `json:"error,omitempty"`
}

// childStats answers "stats": an Airlock child's SQLite write counters.
type childStats struct {
	SQLite   bool  `json:"sqlite"`
	Ops      int64 `json:"ops"`
	Commits  int64 `json:"commits"`
	MaxBatch int64 `json:"max_batch"`
}

// IsChild reports whether this process was started by `airlock bench` as
// the server of its run; the caller then runs ChildMain instead of itself.
func IsChild() bool { return os.Getenv(childEnv) == childEnvValue }

// ChildMain serves as the server of the run that started this process,
// until the run closes its stdin or it gets SIGINT or SIGTERM, and returns
// the process's exit code.
func ChildMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The standard OTEL_* variables turn tracing on here as in serve, so
	// that a run measures the server with it (docs/operations.md).
	stopTracing, err := telemetry.Start(ctx, telemetry.Config{Version: "bench", Getenv: os.Getenv, Logger: log})
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlock bench's server process: %v\n", err)
		return 1
	}
	defer stopTracing(context.WithoutCancel(ctx))
	defer heapfloor.Start(heapfloor.DefaultFloor)() // as serve's
	if err := serveChild(ctx, os.Stdin, os.Stdout, log); err != nil {
		fmt.Fprintf(os.Stderr, "airlock bench's server process: %v\n", err)
		return 1
	}
	return 0
}

// childServer is what a child runs.
type childServer struct {
	hello childHello
	stats func() childStats
	// tokens switches the server's approval tokens (claim.go); nil where
	// it signs none.
	tokens func(on bool)
	// audit switches the server's audit log sequencer (audit.go); nil
	// where it has none.
	audit func(ctx context.Context, on bool) error
	// push starts or stops the server's delivery engine (push.go); nil
	// where it has none.
	push func(on bool) error
	// command answers the commands of a kind of child of its own
	// (receiver.go); ok is false for a line it does not know.
	command func(line string) (answer any, ok bool)
	stop    func()
}

// serveChild reads the spec from in, starts its server, says so on out,
// and answers commands until in ends or ctx does.
func serveChild(ctx context.Context, in io.Reader, out io.Writer, log *slog.Logger) error {
	rd := bufio.NewReader(in)
	enc := json.NewEncoder(out)
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read the run's spec from stdin: %w", err)
	}
	var spec childSpec
	if err := json.Unmarshal(line, &spec); err != nil {
		return fmt.Errorf("read the run's spec: %w", err)
	}
	if spec.CPUProfile != "" {
		stopProfile, err := startCPUProfile(spec.CPUProfile)
		if err != nil {
			enc.Encode(childHello{Error: err.Error()})
			return err
		}
		defer stopProfile()
	}
	// A profile the run starts and stops over a measured window
	// ("profile start PATH", "profile stop"); one at a time.
	var stopWindow func()
	defer func() {
		if stopWindow != nil {
			stopWindow()
		}
	}()
	srv, err := startChildServer(ctx, spec, log)
	if err != nil {
		enc.Encode(childHello{Error: err.Error()})
		return err
	}
	defer srv.stop()
	if err := enc.Encode(srv.hello); err != nil {
		return err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		for {
			l, err := rd.ReadString('\n')
			if err != nil {
				return // the run closed stdin, or died
			}
			select {
			case lines <- strings.TrimSpace(l):
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			switch l {
			case "stats":
				err = enc.Encode(srv.stats())
			case "profile stop":
				if stopWindow == nil {
					err = enc.Encode(childProfile{Error: "no profile is running"})
					break
				}
				stopWindow()
				stopWindow = nil
				err = enc.Encode(childProfile{})
			case "tokens on", "tokens off":
				err = enc.Encode(tokensCommand(l, srv.tokens))
			case "audit on", "audit off":
				err = enc.Encode(auditCommand(ctx, l, srv.audit))
			case "push on", "push off":
				err = enc.Encode(pushCommand(l, srv.push))
			default:
				if path, ok := strings.CutPrefix(l, "profile start "); ok {
					var a childProfile
					switch {
					case spec.CPUProfile != "" || stopWindow != nil:
						a.Error = "a profile is running already"
					default:
						if stopWindow, err = startCPUProfile(path); err != nil {
							a.Error = err.Error()
						}
					}
					err = enc.Encode(a)
					break
				}
				if srv.command != nil {
					if a, ok := srv.command(l); ok {
						err = enc.Encode(a)
						break
					}
				}
				err = enc.Encode(map[string]string{"error": fmt.Sprintf("unknown command %q", l)})
			}
			if err != nil {
				return err
			}
		}
	}
}

// childProfile answers "profile start PATH" and "profile stop".
type childProfile struct {
	Error string `json:"error,omitempty"`
}

// startCPUProfile profiles this process's CPU into a new file at path,
// until the function it returns is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w (the run writes a new file; remove it or name another)", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// startChildServer starts the server spec asks for.
func startChildServer(ctx context.Context, spec childSpec, log *slog.Logger) (*childServer, error) {
	switch spec.Kind {
	case childAirlock:
		store, err := openStore(ctx, spec.Store, nil)
		if err != nil {
			return nil, err
		}
		var pol *policy.Engine
		if spec.Policy != "" {
			if pol, err = policy.NewEngine(spec.Policy, log); err != nil {
				store.Close()
				return nil, fmt.Errorf("policy %s: %w", spec.Policy, err)
			}
		}
		rep, stop, err := startServer(ctx, store, spec.Admin, pol, log)
		if err != nil {
			store.Close()
			return nil, err
		}
		lite, _ := store.(*sqlite.Store)
		return &childServer{
			hello: childHello{URL: rep.url},
			stats: func() childStats {
				if lite == nil {
					return childStats{}
				}
				s := lite.WriteStats()
				return childStats{SQLite: true, Ops: s.Ops, Commits: s.Commits, MaxBatch: s.MaxBatch}
			},
			tokens: rep.svc.SetApprovalTokens,
			audit:  func(ctx context.Context, on bool) error { return switchAudit(ctx, rep.svc, on) },
			push:   rep.notifications,
			stop:   func() { stop(context.WithoutCancel(ctx)) },
		}, nil
	case childReceiver:
		return startReceiverChild()
	case childRawHTTP:
		var keys *approvaltoken.KeySet
		if len(spec.TokenKeys) > 0 {
			var err error
			if keys, err = approvaltoken.ParseKeySet(spec.TokenKeys); err != nil {
				return nil, fmt.Errorf("the raw consume's key set: %w", err)
			}
		}
		rs, err := openRawAt(ctx, spec.Store, spec.Connections)
		if err != nil {
			return nil, err
		}
		base, stop, err := serveRaw(rs, keys)
		if err != nil {
			rs.close()
			return nil, err
		}
		return &childServer{
			hello: childHello{URL: base, Describe: rs.describe, Connections: rs.connections},
			stats: func() childStats { return childStats{} },
			stop:  func() { stop(); rs.close() },
		}, nil
	}
	return nil, fmt.Errorf("unknown kind of server %q", spec.Kind)
}

// child is a server process a run started.
type child struct {
	pid   int
	proc  *os.Process
	hello childHello

	stdin *os.File // the write end: closing it stops the child
	out   *os.File // the read end of its stdout
	rd    *bufio.Reader
	tail  *tailWriter

	mu       sync.Mutex // one command at a time
	stopOnce sync.Once
	exited   chan struct{}
	waitErr  error
}

// startChild starts a child serving spec and waits until it listens.
// Its stderr (the server's warnings) goes to progress. The child is
// killed when ctx ends; stop stops it otherwise.
func startChild(ctx context.Context, spec childSpec, progress io.Writer) (_ *child, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to start the benchmark's server process: %w", err)
	}
	if spec.Policy != "" {
		if spec.Policy, err = filepath.Abs(spec.Policy); err != nil {
			return nil, err
		}
	}
	if spec.CPUProfile != "" {
		if spec.CPUProfile, err = filepath.Abs(spec.CPUProfile); err != nil {
			return nil, err
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c := &child{stdin: inW, out: outR, rd: bufio.NewReader(outR), tail: &tailWriter{max: childTail}, exited: make(chan struct{})}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+childEnvValue)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, io.MultiWriter(progress, c.tail)
	cmd.SysProcAttr = childProcAttr()
	cmd.WaitDelay = 5 * time.Second // for its stderr, should something it started hold it
	started := make(chan error, 1)
	go func() {
		// On Linux the child is killed when the thread that started it
		// ends (Pdeathsig), not the process: keep this goroutine on its
		// thread, and the thread alive, until the child has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	err = <-started
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start the benchmark's server process (%s): %w", exe, err)
	}
	c.pid, c.proc = cmd.Process.Pid, cmd.Process
	defer func() {
		if err != nil {
			c.stop(context.WithoutCancel(ctx))
		}
	}()
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if _, err := inW.Write(append(b, '\n')); err != nil {
		return nil, c.exitError("before it read what to serve")
	}
	type answer struct {
		line []byte
		err  error
	}
	ready := make(chan answer, 1)
	go func() {
		l, err := c.rd.ReadBytes('\n')
		ready <- answer{l, err}
	}()
	timer := time.NewTimer(childStartBound)
	defer timer.Stop()
	select {
	case a := <-ready:
		if a.err != nil {
			return nil, c.exitError("before it was ready")
		}
		if err := json.Unmarshal(a.line, &c.hello); err != nil {
			return nil, fmt.Errorf("the benchmark's server process %d said %.200q, not where it listens: %w", c.pid, a.line, err)
		}
		if c.hello.Error != "" {
			return nil, fmt.Errorf("the benchmark's server process: %s", c.hello.Error)
		}
		if c.hello.URL == "" {
			return nil, fmt.Errorf("the benchmark's server process %d did not say where it listens", c.pid)
		}
		return c, nil
	case <-timer.C:
		return nil, fmt.Errorf("the benchmark's server process %d was not ready after %s", c.pid, childStartBound)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// exitError says that the child exited, with what it last wrote.
func (c *child) exitError(when string) error {
	c.stop(context.Background())
	msg := fmt.Sprintf("the benchmark's server process %d exited %s (%v)", c.pid, when, c.waitErr)
	if t := strings.TrimSpace(c.tail.String()); t != "" {
		msg += "; it wrote: " + t
	}
	return errors.New(msg)
}

// cpu returns the CPU time the child has used so far.
func (c *child) cpu() (time.Duration, error) {
	d, err := procCPU(c.pid)
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of the benchmark's server process %d: %w", c.pid, err)
	}
	return d, nil
}

// profile sends an Airlock child "profile start PATH" or "profile stop".
func (c *child) profile(command string) error {
	var a childProfile
	if err := c.switchChild(command, &a); err != nil {
		return err
	}
	if a.Error != "" {
		return fmt.Errorf("the benchmark's server process %d, %q: %s", c.pid, command, a.Error)
	}
	return nil
}

// stats asks an Airlock child for its SQLite write counters.
func (c *child) stats() (childStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s childStats
	if _, err := c.stdin.Write([]byte("stats\n")); err != nil {
		return s, fmt.Errorf("ask the benchmark's server process %d for its counters: %w", c.pid, err)
	}
	l, err := c.rd.ReadBytes('\n')
	if err != nil {
		return s, fmt.Errorf("read the counters of the benchmark's server process %d: %w", c.pid, err)
	}
	return s, json.Unmarshal(l, &s)
}

// stop ends the child's stdin, waits for it to exit (killing it after
// childStopBound) and releases its pipes. It may be called more than once.
func (c *child) stop(context.Context) {
	c.stopOnce.Do(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(childStopBound):
			c.proc.Kill()
			<-c.exited
		}
		c.out.Close()
	})
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append(w.b[:0], w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// lockedWriter lets a run's progress be written by the run and by its
// children's stderr at once.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
