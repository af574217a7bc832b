package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
)

// auditFiles is a log written to files as an auditor keeps it: the entries
// (JSON lines), a checkpoint of all of them and one of the first few, kept
// earlier, and the verifier key.
type auditFiles struct {
	dir, entries, checkpoint, previous, key string
	lines                                   []string
}

func writeAuditFiles(t *testing.T, n, previousSize int) auditFiles {
	t.Helper()
	const origin = "airlock.test/audit"
	skey, vkey, err := auditlog.GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	f := auditFiles{dir: t.TempDir()}
	tree := &auditlog.MemoryTree{}
	var export []byte
	var previousNote []byte
	sign := func() []byte {
		root, err := tree.Root(tree.Size())
		if err != nil {
			t.Fatal(err)
		}
		msg, err := auditlog.SignCheckpoint(skey, auditlog.Checkpoint{Origin: origin, Size: tree.Size(), Root: root})
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for i := range n {
		leaf, err := auditlog.NewLeaf(airlock.Event{Type: airlock.EventTokenCreated, At: at.Add(time.Duration(i) * time.Second), Actor: "user:ada", UID: fmt.Sprintf("u%d", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Append(leaf); err != nil {
			t.Fatal(err)
		}
		line := auditlog.AppendEntry(nil, auditlog.Entry{Index: int64(i), Leaf: leaf})
		f.lines = append(f.lines, string(line))
		export = append(export, line...)
		if i+1 == previousSize {
			previousNote = sign()
		}
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(f.dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f.entries = write("entries.jsonl", export)
	f.checkpoint = write("checkpoint", sign())
	f.previous = write("previous", previousNote)
	f.key = write("key", []byte(vkey+"\n"))
	return f
}

// runCLI runs `airlock args...` in-process with no server and no token.
func runCLI(args ...string) cliRun {
	var stdout, stderr bytes.Buffer
	app := &App{Stdout: &stdout, Stderr: &stderr, LookupEnv: mapEnv(nil)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := app.Run(ctx, args)
	return cliRun{exit: exitCode(app, err), stdout: stdout.String(), stderr: stderr.String()}
}

// TestAuditVerifyOffline: `airlock audit verify` on files alone passes a
// true log, refuses each tampering with exit 1 naming what it can (the
// first index out of place; the root alone for a leaf changed in place,
// which needs the server's proofs to name), refuses a checkpoint another
// key signed, and checks a checkpoint kept earlier.
func TestAuditVerifyOffline(t *testing.T) {
	t.Parallel()
	f := writeAuditFiles(t, 40, 25)
	offline := func(extra ...string) []string {
		return append([]string{"audit", "verify", "--entries", f.entries, "--checkpoint", f.checkpoint, "--key", f.key}, extra...)
	}
	kept := filepath.Join(f.dir, "kept")
	out := runCLI(offline("--previous", f.previous, "--keep", kept)...).want(t, 0, "a true log").stdout
	if !strings.Contains(out, "Verified: the 40 entries of airlock.test/audit") || !strings.Contains(out, "kept earlier is of its first 25") {
		t.Errorf("verified:\n%s", out)
	}
	if k, err := os.ReadFile(kept); err != nil || !bytes.Equal(k, mustRead(t, f.checkpoint)) {
		t.Errorf("--keep wrote %q (%v), want the checkpoint", k, err)
	}
	// The key given as itself rather than a file.
	key := strings.TrimSpace(string(mustRead(t, f.key)))
	runCLI("audit", "verify", "--entries", f.entries, "--checkpoint", f.checkpoint, "--key", key).want(t, 0, "the key on the command line")

	verdict := func(r cliRun) auditVerdict {
		t.Helper()
		var v auditVerdict
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("--json: %v\n%s", err, r.stdout)
		}
		return v
	}
	tamper := func(name string, lines []string) string {
		p := filepath.Join(f.dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	edited := append([]string(nil), f.lines...)
	edited[17] = strings.Replace(edited[17], "user:ada", "user:eve", 1)
	deleted := append(append([]string(nil), f.lines[:9]...), f.lines[10:]...)
	appended := append(append([]string(nil), f.lines...), strings.Replace(f.lines[39], `"index":39`, `"index":40`, 1))
	for _, tc := range []struct {
		name, entries, reason string
		index                 int64 // -1: none named
	}{
		{"a leaf edited", tamper("edited", edited), "root", -1},
		{"an entry deleted", tamper("deleted", deleted), "order", 9},
		{"an entry appended", tamper("appended", appended), "extra", 40},
		{"the last entries cut", tamper("cut", f.lines[:30]), "missing", 30},
	} {
		r := runCLI("audit", "verify", "--json", "--entries", tc.entries, "--checkpoint", f.checkpoint, "--key", f.key).want(t, 1, tc.name)
		v := verdict(r)
		if v.Verified || v.Reason != tc.reason || (tc.index < 0) != (v.Index == nil) || (v.Index != nil && *v.Index != tc.index) {
			t.Errorf("%s: verdict %+v (index %v), want %s at %d", tc.name, v, v.Index, tc.reason, tc.index)
		}
		if !strings.Contains(r.stderr, "not verified") {
			t.Errorf("%s: stderr %q", tc.name, r.stderr)
		}
	}

	// A checkpoint signed by another key, and a previous checkpoint that
	// is not of this log's prefix (another log's, larger than this one).
	other := writeAuditFiles(t, 50, 45)
	v := verdict(runCLI(offline("--json", "--checkpoint", other.checkpoint)...).want(t, 1, "another key's checkpoint"))
	if v.Reason != "signature" {
		t.Errorf("another key's checkpoint: %+v", v)
	}
	runCLI(offline("--key", other.key)...).want(t, 1, "another key")
	otherKeyed := filepath.Join(f.dir, "longer-previous")
	if err := os.WriteFile(otherKeyed, mustRead(t, other.previous), 0o600); err != nil {
		t.Fatal(err)
	}
	v = verdict(runCLI(offline("--json", "--previous", otherKeyed)...).want(t, 1, "another log's previous checkpoint"))
	if v.Reason != "signature" {
		t.Errorf("another log's previous checkpoint: %+v", v)
	}

	// Usage: files without the checkpoint or the key; no token and no files.
	runCLI("audit", "verify", "--entries", f.entries, "--key", f.key).want(t, exitUsage, "no --checkpoint")
	runCLI("audit", "verify", "--entries", f.entries, "--checkpoint", f.checkpoint).want(t, exitUsage, "no --key")
	runCLI("audit", "verify").want(t, exitUsage, "no token, no files")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
