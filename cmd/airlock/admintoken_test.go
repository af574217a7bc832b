package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store/sqlite"
)

// tokenRE matches a token's secret wherever it is printed.
var tokenRE = regexp.MustCompile(`airlock_[a-z2-7]{20,}`)

var adminTokenRE = regexp.MustCompile(`Admin token \(shown once\): (airlock_[a-z2-7]+)\r?\n`)

// readTokenFile reads the token --admin-token-file wrote, checking the
// file is the admin's alone (mode 0600).
func readTokenFile(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v; want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSuffix(string(b), "\n")
	if !tokenRE.MatchString(tok) || tokenRE.FindString(tok) != tok {
		t.Fatalf("%s holds %q; want one token and a line feed", path, b)
	}
	return tok
}

// bootstrapStored reports whether the SQLite database at db holds an
// admin token.
func bootstrapStored(t *testing.T, db string) bool {
	t.Helper()
	st, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.GetToken(t.Context(), provider.BootstrapTokenID)
	return err == nil
}

// TestFirstRunTokenOnTerminal: the real binary on a pseudo-terminal prints
// a working admin token at its first start, once; a restart prints none
// and keeps it; --admin-token replaces it.
func TestFirstRunTokenOnTerminal(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "airlock.db")
	serveOnTerminal := func() (*ptyRun, string) {
		t.Helper()
		p := startOnTerminal(t, "", "", "serve", "--addr", "127.0.0.1:0", "--db", db)
		return p, "http://" + p.out.WaitFor(t, testkit.ListeningRE, p.exited)[2]
	}
	stop := func(p *ptyRun) {
		t.Helper()
		p.cmd.Process.Signal(os.Interrupt)
		<-p.exited
	}

	first, url := serveOnTerminal()
	token := first.out.WaitFor(t, adminTokenRE, first.exited)[1]
	newAPI(t, url).call("GET", "/v1/tokens", token, "").want(t, 200, "list tokens with the printed token")
	stop(first)
	if n := strings.Count(first.out.String(), token); n != 1 {
		t.Errorf("the token appears %d times on the terminal, want exactly once", n)
	}

	second, url := serveOnTerminal()
	newAPI(t, url).call("GET", "/v1/tokens", token, "").want(t, 200, "the first token after a restart")
	stop(second)
	if strings.Contains(second.out.String(), "Admin token") {
		t.Errorf("the second start printed an admin token:\n%s", second.out)
	}

	third := startApp(t, map[string]string{"AIRLOCK_ADMIN_TOKEN": testAdmin}, "--addr", "127.0.0.1:0", "--db", db)
	c := newAPI(t, third.url)
	c.call("GET", "/v1/tokens", token, "").want(t, 401, "the generated token once --admin-token replaced it")
	c.call("GET", "/v1/tokens", testAdmin, "").want(t, 200, "the --admin-token token")
	if strings.Contains(third.out.String(), "Admin token") || strings.Contains(third.out.String(), testAdmin) {
		t.Errorf("a start with --admin-token printed a token:\n%s", third.out)
	}
}

// TestFirstRunTokenOnPipe: the real binary whose output is a pipe (a log)
// never prints an admin token. With nowhere to show one it generates none
// and says how to get one; with --admin-token-file it writes one there,
// mode 0600, that works; it never writes over a file it did not write.
func TestFirstRunTokenOnPipe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "airlock.db")
	file := filepath.Join(dir, "admin-token")

	bare := startProcess(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--db", db)
	bare.Out.WaitFor(t, regexp.MustCompile(`No admin token yet.*\n`), bare.Exited)
	bare.Stop(time.Minute)
	// The notice comes first: no log line before it at the default level.
	if !strings.HasPrefix(bare.Out.String(), "Airlock listening on ") {
		t.Errorf("the first start's output does not begin with where it listens:\n%s", bare.Out)
	}
	if tok := tokenRE.FindString(bare.Out.String()); tok != "" {
		t.Errorf("a token reached the pipe: %s\n%s", tok, bare.Out)
	}
	if bootstrapStored(t, db) {
		t.Fatal("a first start with nowhere to show the admin token stored one")
	}

	written := startProcess(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--admin-token-file", file)
	written.Out.WaitFor(t, regexp.MustCompile(`Admin token written to `+regexp.QuoteMeta(file)+` .*\n.*\n  AIRLOCK_URL=\S+ AIRLOCK_TOKEN=\$\(cat `+regexp.QuoteMeta(file)+`\) \S+ tokens create`), written.Exited)
	token := readTokenFile(t, file)
	newAPI(t, written.URL).call("GET", "/v1/tokens", token, "").want(t, 200, "list tokens with the token in the file")
	written.Stop(time.Minute)
	if strings.Contains(written.Out.String(), token) {
		t.Errorf("the token written to the file reached the pipe too:\n%s", written.Out)
	}

	// A restart has no token to write: it leaves the file as it is.
	again := startProcess(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--admin-token-file", file)
	newAPI(t, again.URL).call("GET", "/v1/tokens", token, "").want(t, 200, "the token in the file after a restart")
	again.Stop(time.Minute)
	if got := readTokenFile(t, file); got != token {
		t.Errorf("a restart rewrote the token file")
	}

	// A new database with that file: the file is another database's.
	other := filepath.Join(dir, "other.db")
	out, err := exec.Command(binary(t), "serve", "--addr", "127.0.0.1:0", "--db", other, "--admin-token-file", file).CombinedOutput()
	if code := exitStatus(err); code != exitUsage || !strings.Contains(string(out), "--admin-token-file "+file+" already exists") {
		t.Errorf("a first start over an existing token file: exit %d, %s; want exit 2 naming the file", code, out)
	}
	if got := readTokenFile(t, file); got != token {
		t.Errorf("the refused start changed the file")
	}
	if bootstrapStored(t, other) {
		t.Errorf("the refused start stored an admin token nobody saw")
	}
}

// exitStatus is a finished command's exit code.
func exitStatus(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestJSONLogsOnly: with --log-format json, every line the server writes,
// to stdout and to stderr, from its first to its last (the notice, the
// debug logs, the shutdown), is a JSON object, and none holds a token.
func TestJSONLogsOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra []string
		want  string // in some line's msg
	}{
		{"nowhere to show a token", nil, "No admin token yet"},
		{"a token file", []string{"--admin-token-file", "admin-token"}, "written to --admin-token-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd := exec.Command(binary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--db", "airlock.db",
				"--log-format", "json", "--log-level", "debug"}, tc.extra...)...)
			cmd.Dir, cmd.Env = dir, testkit.CleanEnv()
			stdout, stderr := testkit.NewOutput(), testkit.NewOutput()
			cmd.Stdout, cmd.Stderr = stdout, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })
			url := stderr.WaitFor(t, testkit.ListeningRE, exited)[1]
			newAPI(t, url).call("GET", "/readyz", "", "").want(t, 200, "ready")
			cmd.Process.Signal(os.Interrupt)
			<-exited

			msgs := ""
			for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
				if tok := tokenRE.FindString(out); tok != "" {
					t.Errorf("a token reached %s: %s", name, tok)
				}
				for line := range strings.Lines(out) {
					var rec map[string]any
					if err := json.Unmarshal([]byte(line), &rec); err != nil {
						t.Errorf("%s line is not JSON (%v): %q", name, err, line)
						continue
					}
					msg, _ := rec["msg"].(string)
					msgs += msg + "\n"
				}
			}
			for _, want := range []string{"Airlock listening on " + url, tc.want, "stopped"} {
				if !strings.Contains(msgs, want) {
					t.Errorf("no JSON record says %q; messages:\n%s", want, msgs)
				}
			}
		})
	}
}

// TestAdminTokenFileWithAdminToken: the two flags contradict each other,
// and serve says so before it opens anything.
func TestAdminTokenFileWithAdminToken(t *testing.T) {
	t.Parallel()
	app := &App{}
	err := app.Run(context.Background(), []string{"serve", "--db", filepath.Join(t.TempDir(), "a.db"),
		"--admin-token", testAdmin, "--admin-token-file", filepath.Join(t.TempDir(), "f")})
	if code := exitCode(app, err); code != exitUsage || !strings.Contains(err.Error(), "--admin-token-file") {
		t.Fatalf("exit %d, %v; want 2 naming --admin-token-file", code, err)
	}
}

// TestSelfCommand: the next command the notice prints names this binary
// as "airlock" only when that is what PATH finds; otherwise by its path,
// so that it runs as printed.
func TestSelfCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	this, other, none := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(exe, filepath.Join(this, "airlock")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "airlock"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{this, "airlock"},
		{other, shellQuote(exe)},
		{none, shellQuote(exe)},
	} {
		t.Setenv("PATH", tc.path)
		if got := selfCommand(); got != tc.want {
			t.Errorf("with PATH=%s, selfCommand() = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// TestJSONNoticeAtWarnLevel: with JSON logs (the default off a terminal)
// and --log-level warn, the start-up notice still says where the server
// listens, as the text notice does: it is a notice, not a log line, and
// scripts and the replicas' tests wait for it.
func TestJSONNoticeAtWarnLevel(t *testing.T) {
	t.Parallel()
	srv := startApp(t, map[string]string{"AIRLOCK_LOG_FORMAT": "json", "AIRLOCK_LOG_LEVEL": "warn"},
		"--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "airlock.db"), "--admin-token", testAdmin)
	for line := range strings.Lines(srv.out.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a line is not JSON: %q", line)
		}
		if rec["level"] == "INFO" && !strings.HasPrefix(fmt.Sprint(rec["msg"]), "Airlock listening on ") {
			t.Errorf("an info line at --log-level warn: %q", line)
		}
	}
}
