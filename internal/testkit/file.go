package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// TempFile writes content to a file called name in a directory of t's own,
// removed when t ends, and returns its path: a policy or a rules file for
// the code under test to read.
func TempFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
