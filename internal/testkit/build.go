package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// airlockPackage is Airlock's command, named by import path so that it
// builds from any package's directory.
const airlockPackage = "github.com/airlockhq/airlock/cmd/airlock"

// build is one binary built for the tests.
type build struct {
	once sync.Once
	path string
	err  error
}

var builds struct {
	mu  sync.Mutex
	dir string              // removed by Main
	by  map[buildKey]*build // what has been (or is being) built
}

type buildKey struct {
	pkg  string
	race bool
}

// Airlock builds the real airlock binary, once per test binary for each
// value of race, and returns its path. race builds it with -race; pass
// Race to build it the way the tests themselves run. Main removes it.
func Airlock(t testing.TB, race bool) string {
	t.Helper()
	return Build(t, airlockPackage, race)
}

// Build builds the main package pkg (an import path, or a path relative
// to the test's package such as "./testdata/upstream") once per test
// binary, with -race when race is set, and returns the binary's path.
// Main removes it.
func Build(t testing.TB, pkg string, race bool) string {
	t.Helper()
	builds.mu.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "airlock-test-bin-")
		if err != nil {
			builds.mu.Unlock()
			t.Fatalf("a folder for the test binaries: %v", err)
		}
		builds.dir, builds.by = dir, map[buildKey]*build{}
	}
	key := buildKey{pkg, race}
	b := builds.by[key]
	if b == nil {
		// A folder for each build, so that the binary keeps its own name
		// (what it prints as its name in usage messages).
		b = &build{path: filepath.Join(builds.dir, fmt.Sprint(len(builds.by)), path.Base(pkg))}
		builds.by[key] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		if err := os.MkdirAll(filepath.Dir(b.path), 0o755); err != nil {
			b.err = err
			return
		}
		args := []string{"build", "-o", b.path}
		cmd := exec.Command("go")
		if race {
			args = append(args, "-race") // built as the environment says
		} else {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // the static build the README recommends
		}
		cmd.Args = append(append(cmd.Args, args...), pkg)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// removeBuilds removes what Build built.
func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
}
