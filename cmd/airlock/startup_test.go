package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// initBudget is the most an Airlock package may allocate while it
// initialises, before main. Every airlock process pays for what any
// package does at init, the hook's included, whose answer should take
// no more than 50 ms (docs/performance.md). A compiled regexp with a
// bounded repetition ({1,128}) costs about 200 KB and a millisecond, a
// big map literal as much; build such things on first use (sync.OnceValue).
const initBudget = 16 << 10

// TestStartupInitWork runs `airlock version` with GODEBUG=inittrace=1,
// which has the runtime report each package's initialisation, and fails
// when one of Airlock's own packages allocates more than initBudget, or
// all of them together more than twice that. Allocations, unlike times,
// do not depend on how loaded the machine is.
func TestStartupInitWork(t *testing.T) {
	cmd := exec.Command(binary(t), "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("airlock version: %v\n%s", err, stderr.String())
	}
	ours, total := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(stderr.Bytes()))
	for sc.Scan() {
		// init github.com/airlockhq/airlock @2.1 ms, 0.003 ms clock, 608 bytes, 9 allocs
		f := strings.Fields(sc.Text())
		if len(f) != 11 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		pkg := f[1]
		if pkg != "main" && pkg != "github.com/airlockhq/airlock" && !strings.HasPrefix(pkg, "github.com/airlockhq/airlock/") {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		ours++
		total += n
		if n > initBudget {
			t.Errorf("package %s allocates %d bytes at init (budget %d): make its package-level tables and regexps lazy (sync.OnceValue)", pkg, n, initBudget)
		}
	}
	if ours == 0 {
		t.Fatalf("GODEBUG=inittrace=1 reported no Airlock package; its format may have changed:\n%s", stderr.String())
	}
	if total > 2*initBudget {
		t.Errorf("Airlock's packages allocate %d bytes at init together (budget %d)", total, 2*initBudget)
	}
	t.Logf("%d Airlock packages allocate %d bytes at init", ours, total)
}

// BenchmarkServeStart times `airlock serve` from exec to listening on an
// existing SQLite database (migrated, its keys made), as a restart or a new
// replica pays it: the target is 200 ms. Each server is stopped with
// SIGINT, outside the timer, before the next starts.
func BenchmarkServeStart(b *testing.B) {
	bin := binary(b)
	db := filepath.Join(b.TempDir(), "airlock.db")
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--admin-token", "bench-admin-token-0123456789"}
	first, err := testkit.TryServe(b, bin, "", nil, args...)
	if err != nil {
		b.Fatal(err)
	}
	first.Stop(time.Minute)
	for b.Loop() {
		p, err := testkit.TryServe(b, bin, "", nil, args...)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		p.Stop(time.Minute)
		b.StartTimer()
	}
}
