package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// airlockPackage is what Airlock builds, named by import path so that the
// build works from any package's directory.
const airlockPackage = "github.com/airlockhq/airlock/cmd/airlock"

// build is one build of the binary: with or without the race detector.
type build struct {
	once sync.Once
	path string
	err  error
}

var (
	builds struct {
		mu   sync.Mutex
		dir  string
		race [2]build // [0] without, [1] with -race
	}
)

// Airlock builds the real airlock binary, once per test binary for each
// value of race, and returns its path. race builds it with -race; pass
// Race to build it the way the tests themselves run. Main removes it.
func Airlock(t testing.TB, race bool) string {
	t.Helper()
	builds.mu.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "airlock-bin-")
		if err != nil {
			builds.mu.Unlock()
			t.Fatalf("a folder for the airlock binary: %v", err)
		}
		builds.dir = dir
	}
	dir := builds.dir
	b := &builds.race[0]
	name := "airlock"
	if race {
		b, name = &builds.race[1], "airlock-race"
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		b.path = filepath.Join(dir, name)
		args := []string{"build", "-o", b.path}
		if race {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, airlockPackage)...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", airlockPackage, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// removeBuilds removes what Airlock built.
func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
}
