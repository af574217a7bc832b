package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// The test binary, re-executed with one of these set, is a process a test
// needs (TestMain).
const (
	// burnEnv makes it burn that much CPU (a duration), say so on stdout,
	// and wait for its stdin to end.
	burnEnv = "AIRLOCK_BENCH_TEST_BURN"
	// runEnv makes it a run: it starts a raw-over-HTTP server in a child
	// process on the SQLite file the variable names, prints the child's
	// process ID, and waits for its stdin to end.
	runEnv = "AIRLOCK_BENCH_TEST_RUN"
)

// burnMain burns CPU until this process has used what burnEnv says.
func burnMain() int {
	want, err := time.ParseDuration(os.Getenv(burnEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	x := uint64(1)
	for cpuTime() < want {
		for range 1 << 16 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	fmt.Printf("burnt %d\n", x&1)
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// runMain starts a child server, as a run does, and waits.
func runMain() int {
	c, err := startChild(context.Background(), childSpec{Kind: childRawHTTP, Store: storeSpec{SQLite: os.Getenv(runEnv)}}, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(c.pid)
	io.Copy(io.Discard, os.Stdin)
	c.stop(context.Background())
	return 0
}

// gone reports whether process pid has ended: it is no longer in /proc, or
// is a zombie its new parent has not reaped yet.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	end := bytes.LastIndexByte(b, ')')
	return err == nil && end >= 0 && strings.HasPrefix(string(b[end+1:]), " Z")
}

func needProc(t *testing.T) {
	t.Helper()
	if !procCPUAvailable() {
		t.Skipf("no /proc/<pid>/stat on %s", runtime.GOOS)
	}
}

// TestParseProcStat reads utime and stime from stat lines, also when the
// command name holds spaces and parentheses, and refuses lines that are
// not one.
func TestParseProcStat(t *testing.T) {
	t.Parallel()
	const rest = " S 1 2 3 0 -1 4194560 100 0 0 0 %d %d 5 6 20 0 9 0 1234 1000000 200 18446744073709551615"
	for _, tt := range []struct {
		name         string
		comm         string
		utime, stime int
		want         time.Duration
	}{
		{"plain", "airlock", 150, 25, 1750 * time.Millisecond},
		{"spaces and parentheses in the name", "a) (b c) S 9", 3, 4, 70 * time.Millisecond},
		{"no CPU yet", "bench.test", 0, 0, 0},
	} {
		line := fmt.Sprintf("4242 (%s)"+rest+"\n", tt.comm, tt.utime, tt.stime)
		got, err := parseProcStat([]byte(line))
		if err != nil || got != tt.want {
			t.Errorf("%s: parseProcStat(%q) = %v, %v; want %v", tt.name, line, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "4242 airlock S 1 2", "4242 (airlock) S 1 2 3", "4242 (airlock) S 1 2 3 0 -1 4194560 100 0 0 0 x 7 5"} {
		if got, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) = %v, want an error", bad, got)
		}
	}
}

// TestProcCPU reads the CPU time of a real child process that burnt at
// least 300 ms of it: at least that much (less a tick), and no more than
// the kernel counts it once it has exited.
func TestProcCPU(t *testing.T) {
	needProc(t)
	t.Parallel()
	const burn = 300 * time.Millisecond
	cmd := exec.CommandContext(t.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), burnEnv+"="+burn.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if l, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(l, "burnt") {
		t.Fatalf("the burner said %q, %v", l, err)
	}
	got, err := procCPU(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if got < burn-time.Second/userHZ {
		t.Errorf("procCPU of a process that burnt %s = %s", burn, got)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if final := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(); got > final+time.Second/userHZ {
		t.Errorf("procCPU read %s before the process exited, more than the %s the kernel counted at its exit", got, final)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("procCPU of a process ID past any pid_max succeeded")
	}
}

// TestChildDiesWithRun kills a run (a process that started a server in a
// child, as `airlock bench` does) with SIGKILL, which it cannot catch: its
// server process must end too, not serve on.
func TestChildDiesWithRun(t *testing.T) {
	needProc(t)
	t.Parallel()
	run := exec.Command(os.Args[0])
	run.Env = append(os.Environ(), runEnv+"="+filepath.Join(t.TempDir(), "raw.db"))
	var stderr bytes.Buffer
	run.Stderr = &stderr
	stdin, err := run.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	l, err := bufio.NewReader(stdout).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(l))
	if err != nil || perr != nil {
		run.Process.Kill()
		run.Wait()
		t.Fatalf("the run printed %q (%v), not its server's process ID; stderr:\n%s", l, err, stderr.String())
	}
	if gone(pid) {
		t.Fatalf("the server process %d is not running before the run dies", pid)
	}
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run.Wait()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("the server process %d to end with its run", pid), func() bool { return gone(pid) })
}

// TestServersStopWithTheRun checks that the server processes of a run
// that ends early (its context cancelled as the measuring starts) are
// stopped before Run returns.
func TestServersStopWithTheRun(t *testing.T) {
	needProc(t)
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		mu   sync.Mutex
		pids []int
	)
	cfg := Config{Scenario: Lifecycle, Clients: 2, Duration: time.Minute, Count: MaxOps,
		Progress: cancelOn{"lifecycle: 2 clients", cancel},
		onChild: func(pid int) {
			mu.Lock()
			defer mu.Unlock()
			pids = append(pids, pid)
		},
	}
	if _, err := Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("Run cancelled as it measured = %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pids) != 1 {
		t.Fatalf("the run started %d server processes, want 1", len(pids))
	}
	if !gone(pids[0]) {
		t.Errorf("the server process %d outlived its run", pids[0])
	}
}

// cancelOn cancels when progress says what it waits for.
type cancelOn struct {
	say    string
	cancel func()
}

func (c cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.say) {
		c.cancel()
	}
	return len(p), nil
}

// TestChildStartFailure checks that a server process that cannot start
// says why, and leaves no process behind.
func TestChildStartFailure(t *testing.T) {
	needProc(t)
	t.Parallel()
	for _, tt := range []struct {
		name string
		spec childSpec
		want string
	}{
		{"unknown kind", childSpec{Kind: "soak", Store: storeSpec{SQLite: filepath.Join(t.TempDir(), "a.db")}}, `unknown kind of server "soak"`},
		{"store it cannot open", childSpec{Kind: childAirlock, Store: storeSpec{SQLite: filepath.Join(t.TempDir(), "no", "such", "dir", "a.db")}}, "open the SQLite store"},
		{"policy it cannot read", childSpec{Kind: childAirlock, Store: storeSpec{SQLite: filepath.Join(t.TempDir(), "b.db")}, Policy: filepath.Join(t.TempDir(), "none.yaml")}, "policy"},
	} {
		c, err := startChild(t.Context(), tt.spec, io.Discard)
		if err == nil {
			c.stop(t.Context())
			t.Errorf("%s: the server process started", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
}

// TestChildCPUProfile checks that an Airlock server process started with a
// CPU profile writes one when it stops, and that a run does not overwrite a
// file already there.
func TestChildCPUProfile(t *testing.T) {
	needProc(t)
	t.Parallel()
	dir := t.TempDir()
	profile := filepath.Join(dir, "cpu.pprof")
	spec := childSpec{Kind: childAirlock, Store: storeSpec{SQLite: filepath.Join(dir, "a.db")}, CPUProfile: profile}
	c, err := startChild(t.Context(), spec, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.stop(t.Context())
	b, err := os.ReadFile(profile)
	if err != nil {
		t.Fatalf("no profile after the server stopped: %v", err)
	}
	// A Go CPU profile is a gzipped protocol buffer.
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("the profile is not gzipped: %d bytes starting %q", len(b), b[:min(len(b), 8)])
	}

	spec.Store.SQLite = filepath.Join(dir, "b.db")
	if c, err := startChild(t.Context(), spec, io.Discard); err == nil {
		c.stop(t.Context())
		t.Fatal("a second server wrote over the first one's profile")
	} else if !strings.Contains(err.Error(), "--cpuprofile") {
		t.Fatalf("%v, want an error naming --cpuprofile", err)
	}
	if after, err := os.ReadFile(profile); err != nil || !bytes.Equal(after, b) {
		t.Fatalf("the first profile changed (%v)", err)
	}
}

func TestCPUProfileFiles(t *testing.T) {
	for _, tt := range []struct {
		path    string
		replica int
		want    string
	}{
		{"", 2, ""},
		{"cpu.pprof", 0, "cpu.pprof"},
		{"cpu.pprof", 2, "cpu.2.pprof"},
		{"/tmp/cpu", 1, "/tmp/cpu.1"},
	} {
		if got := (Config{CPUProfile: tt.path}).profileOf(tt.replica); got != tt.want {
			t.Errorf("profileOf(%q, %d) = %q, want %q", tt.path, tt.replica, got, tt.want)
		}
	}
	cfg := Config{Scenario: Lifecycle, CPUProfile: "cpu.pprof", URLs: []string{"http://127.0.0.1:1"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Errorf("--cpuprofile with --url: %v, want a refusal naming --cpuprofile", err)
	}
}

// TestPhaseProfile: expiry and scale, whose servers run in the bench's
// process, profile that process over a phase, to the path or to the path
// with the phase's name before its extension; other scenarios do not, and
// a profile over a URL is refused.
func TestPhaseProfile(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Scenario: Expiry, CPUProfile: filepath.Join(dir, "cpu.pprof")}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("expiry with --cpuprofile: %v", err)
	}
	for _, suffix := range []string{"", "expiry"} {
		stop, err := cfg.phaseProfile(suffix)
		if err != nil {
			t.Fatal(err)
		}
		stop()
		stop() // a second stop does nothing
	}
	for _, name := range []string{"cpu.pprof", "cpu.expiry.pprof"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a gzipped protocol buffer
			t.Errorf("%s is not a Go CPU profile: %d bytes starting %q", name, len(b), b[:min(len(b), 8)])
		}
	}
	if _, err := cfg.phaseProfile(""); err == nil {
		t.Error("a phase profile over an existing file: no error, want a refusal")
	}
	lifecycle := Config{Scenario: Lifecycle, CPUProfile: filepath.Join(dir, "lifecycle.pprof")}
	stop, err := lifecycle.phaseProfile("")
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := os.Stat(lifecycle.CPUProfile); !os.IsNotExist(err) {
		t.Errorf("lifecycle wrote a phase profile (%v): its servers profile themselves", err)
	}
	remote := Config{Scenario: Expiry, CPUProfile: "cpu.pprof", URLs: []string{"http://127.0.0.1:1"}}
	if err := remote.Validate(); err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Errorf("expiry --cpuprofile with --url: %v, want a refusal naming --cpuprofile", err)
	}
}

// TestWindowProfile: the consume scenario's server profiles its measured
// consumes only: no profile file exists yet when its tokens are made (a
// profile from the server's start would), and each window writes its own
// (--half-max's maximum to the name with .max).
func TestWindowProfile(t *testing.T) {
	t.Parallel()
	needProc(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "consume.pprof")
	maxPath := filepath.Join(dir, "consume.max.pprof")
	var progress bytes.Buffer
	var w *watchWriter
	w = &watchWriter{w: &progress, on: "tokens made", check: func() {
		// The maximum's tokens come first, then the paced run's.
		next := []string{maxPath, path}[min(w.seen, 2)-1]
		if _, err := os.Stat(next); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v) when its window's tokens are made: the profile covers the setup", filepath.Base(next), err)
		}
	}}
	cfg := Config{Scenario: Consume, Clients: 2, Duration: 20 * time.Second, Count: 16, HalfMax: true, CPUProfile: path, Progress: w}
	if _, err := Run(t.Context(), cfg); err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	if w.seen != 2 {
		t.Errorf("saw %d lines of tokens made, want 2 (the maximum's and the paced run's)", w.seen)
	}
	for _, p := range []string{path, maxPath} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a gzipped protocol buffer
			t.Errorf("%s is not a Go CPU profile: %d bytes starting %q", filepath.Base(p), len(b), b[:min(len(b), 8)])
		}
	}
}

// watchWriter calls check each time a write contains on, before passing
// it on.
type watchWriter struct {
	w     io.Writer
	on    string
	check func()
	seen  int
}

func (w *watchWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.on)) {
		w.seen++
		w.check()
	}
	return w.w.Write(p)
}
