package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
)

// gitHead is the commit the tests build from.
func gitHead(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// releaseLdflags asks scripts/release.sh for the -ldflags of a release
// (args "--ldflags") or a snapshot ("--snapshot", "--ldflags") build, so
// that the test stamps exactly what a release stamps.
func releaseLdflags(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"scripts/release.sh"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/release.sh %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// buildStamped builds airlock with ldflags and flags, the way the tests
// build it otherwise (-race when they run with it, else static), so that
// only the link step is new.
func buildStamped(t *testing.T, ldflags string, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "airlock")
	args := append([]string{"build", "-ldflags", ldflags, "-o", bin}, flags...)
	cmd := exec.Command("go")
	if testkit.Race {
		args = append(args, "-race")
	} else {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	cmd.Args = append(cmd.Args, append(args, ".")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", ldflags, err, out)
	}
	return bin
}

func runVersionOf(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	return string(out)
}

var versionDateRE = regexp.MustCompile(`(?m)^date:   \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// TestVersionOfReleaseBuilds builds airlock with the stamps of a release
// and of a snapshot, as scripts/release.sh makes them, and checks that
// `airlock version` names the version from VERSION, the commit and its
// date: a release build never says only "dev".
func TestVersionOfReleaseBuilds(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	base, head := strings.TrimSpace(string(raw)), gitHead(t)
	for _, tc := range []struct {
		name    string
		args    []string
		version string
	}{
		{"a release says VERSION", []string{"--ldflags"}, base},
		{"a snapshot says VERSION-SNAPSHOT-<commit>", []string{"--snapshot", "--ldflags"}, base + "-SNAPSHOT-" + head[:12]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ldflags := releaseLdflags(t, tc.args...)
			for _, want := range []string{"-s", "-w", "-X main.version=", "-X main.commit=", "-X main.date="} {
				if !strings.Contains(ldflags, want) {
					t.Errorf("release ldflags %q lack %q", ldflags, want)
				}
			}
			out := runVersionOf(t, buildStamped(t, ldflags))
			lines := strings.Split(out, "\n")
			if lines[0] != "airlock "+tc.version {
				t.Errorf("first line %q, want %q:\n%s", lines[0], "airlock "+tc.version, out)
			}
			if strings.Contains(out, "dev") {
				t.Errorf("a release build says dev:\n%s", out)
			}
			if !strings.Contains(out, "\ncommit: "+head+"\n") {
				t.Errorf("no line commit: %s (not modified: the commit is stamped):\n%s", head, out)
			}
			if !versionDateRE.MatchString(out) {
				t.Errorf("no date: line in RFC 3339, UTC:\n%s", out)
			}
		})
	}
}

// TestVersionOfCheckoutBuild checks that a build from a checkout without
// stamps (go build, go install ./cmd/airlock) names the pseudo-version,
// commit and date from the build information Go records. Go records them
// unless -buildvcs=false, which GOFLAGS may set (these machines' go env
// does), so the test asks for them.
//
// It needs a clone: go build finds no repository in a git worktree.
func TestVersionOfCheckoutBuild(t *testing.T) {
	t.Parallel()
	if st, err := os.Stat("../../.git"); err != nil || !st.IsDir() {
		// go build looks for a .git folder; a worktree's .git is a file.
		testkit.Unavailable(t, "the checkout has no .git folder (a git worktree's is a file), so go build records no VCS information; run this test in a clone")
	}
	out := runVersionOf(t, buildStamped(t, "", "-buildvcs=true"))
	head := gitHead(t)
	// Go (1.24 on) derives a pseudo-version from the commit it records.
	if !regexp.MustCompile(`^airlock 0\.0\.0-\d{14}-` + head[:12] + `(\+dirty)?\n`).MatchString(out) {
		t.Errorf("an unstamped build from a checkout should name the pseudo-version of its commit %s first:\n%s", head[:12], out)
	}
	if !regexp.MustCompile(`(?m)^commit: ` + head + `( \(modified\))?$`).MatchString(out) {
		t.Errorf("no commit: %s line from the VCS stamp:\n%s", head, out)
	}
	if !versionDateRE.MatchString(out) {
		t.Errorf("no date: line from vcs.time:\n%s", out)
	}
	if !strings.Contains(out, "\ngo:     go1.") {
		t.Errorf("no go: line:\n%s", out)
	}
}
