package client_test

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real `airlock serve`, built once per test binary without the race
// detector: under -race, SQLite (transpiled C) runs many times slower, and
// T06's figure is about the server's claims and the gates, not about
// race-checking SQLite, which the store's own tests do.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

func airlockBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-client-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "airlock")
		buildOut, buildErr = exec.Command("go", "build", "-o", binPath, "github.com/airlockhq/airlock/cmd/airlock").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build airlock: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

// setupBinary starts `airlock serve` on a fresh SQLite file and returns a
// bundle of clients for it (no service or clock: it is another process).
func setupBinary(t testing.TB) *bundle {
	t.Helper()
	bin := airlockBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"),
		"--admin-token", adminSecret, "--min-timeout", "1ms", "--rate-limit", "1000000")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	found := make(chan string, 1)
	var logMu sync.Mutex
	var logs strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`Airlock listening on (http://\S+) `)
		for sc.Scan() {
			logMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	var url string
	select {
	case url = <-found:
	case <-time.After(time.Minute):
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("airlock serve did not listen within a minute:\n%s", logs.String())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	b := &bundle{url: url, hc: &http.Client{Transport: tr}, pid: cmd.Process.Pid}
	t.Cleanup(tr.CloseIdleConnections)
	b.populate(t)
	return b
}
