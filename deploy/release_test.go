package deploy

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestSDKVersionsMatch holds the SDK packages to the one version of a
// release, ../VERSION (docs/operations.md, "Releases"): package.json and
// its lock file, pyproject.toml and airlock.__version__.
func TestSDKVersionsMatch(t *testing.T) {
	t.Parallel()
	version := strings.TrimSpace(readFile(t, "../VERSION"))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(version) {
		t.Fatalf("VERSION is %q, not MAJOR.MINOR.PATCH", version)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal([]byte(readFile(t, "../sdk/typescript/package.json")), &pkg); err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Version  string
		Packages map[string]struct{ Version string }
	}
	if err := json.Unmarshal([]byte(readFile(t, "../sdk/typescript/package-lock.json")), &lock); err != nil {
		t.Fatal(err)
	}
	line := func(file, re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(readFile(t, file))
		if m == nil {
			t.Fatalf("%s has no line matching %s", file, re)
		}
		return m[1]
	}
	for file, got := range map[string]string{
		"sdk/typescript/package.json":           pkg.Version,
		"sdk/typescript/package-lock.json":      lock.Version,
		`sdk/typescript/package-lock.json ("")`: lock.Packages[""].Version,
		"sdk/python/pyproject.toml":             line("../sdk/python/pyproject.toml", `(?m)^version = "([^"]*)"$`),
		"sdk/python/airlock/__init__.py":        line("../sdk/python/airlock/__init__.py", `(?m)^__version__ = "([^"]*)"$`),
	} {
		if got != version {
			t.Errorf("%s says version %q; VERSION says %q", file, got, version)
		}
	}
	if !strings.Contains(readFile(t, "../CHANGELOG.md"), "\n## [Unreleased]\n") {
		t.Error("CHANGELOG.md has no ## [Unreleased] section")
	}
}
