package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
)

// maxExposure is the most `systemd-analyze security` may rate the unit:
// 0 is locked down, 10 is no sandbox at all; "OK" ends at 3.9.
const maxExposure = 2.0

// unitCopy writes the unit with its ExecStart pointed at bin (a real
// airlock, since verify checks that the command exists) and edit
// applied, and returns its path.
func unitCopy(t *testing.T, bin string, edit func(string) string) string {
	t.Helper()
	unit := readFile(t, "systemd/airlock.service")
	if !strings.Contains(unit, "\nExecStart=/usr/local/bin/airlock serve\n") {
		t.Fatal("the unit's ExecStart is not /usr/local/bin/airlock serve")
	}
	unit = strings.Replace(unit, "ExecStart=/usr/local/bin/airlock", "ExecStart="+bin, 1)
	path := filepath.Join(t.TempDir(), "airlock.service")
	if err := os.WriteFile(path, []byte(edit(unit)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// analyze runs systemd-analyze with args and returns its exit error and
// everything it printed.
func analyze(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("systemd-analyze", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestSystemdUnit checks deploy/systemd/airlock.service with systemd's own
// tools: `systemd-analyze verify` finds no error or unknown setting (it
// prints a warning and exits 0 for those, so any output fails), and
// `systemd-analyze security` rates its sandbox at most maxExposure. It
// also holds the unit to what docs/operations.md promises of it.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		testkit.Unavailable(t, "systemd-analyze is not installed (Debian's systemd package): the unit is not verified")
	}
	bin := testkit.Airlock(t, false)
	unit := unitCopy(t, bin, func(s string) string { return s })
	if out, err := analyze(t, "verify", unit); err != nil || out != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The check can fail: a wrong value is reported.
	broken := unitCopy(t, bin, func(s string) string { return strings.Replace(s, "ProtectSystem=strict", "ProtectSystem=sometimes", 1) })
	if out, _ := analyze(t, "verify", broken); !strings.Contains(out, "sometimes") {
		t.Errorf("systemd-analyze verify said nothing of a wrong ProtectSystem: %q", out)
	}

	out, err := analyze(t, "security", "--offline=true", "--no-pager", unit)
	m := regexp.MustCompile(`Overall exposure level for airlock\.service: (\d+\.\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if level, _ := strconv.ParseFloat(m[1], 64); level > maxExposure {
		t.Errorf("exposure level %s, want at most %.1f:\n%s", m[1], maxExposure, out)
	}

	text := readFile(t, "systemd/airlock.service")
	for _, want := range []string{
		"DynamicUser=yes", "StateDirectory=airlock", "ProtectSystem=strict", "ProtectHome=yes", "NoNewPrivileges=yes",
		"CapabilityBoundingSet=\n", "PrivateTmp=yes", "PrivateDevices=yes",
		"Environment=AIRLOCK_ADDR=127.0.0.1:" + listenPort + "\n",
		"Environment=AIRLOCK_DB=/var/lib/airlock/airlock.db\n",
		"Environment=AIRLOCK_ADMIN_TOKEN_FILE=/var/lib/airlock/admin-token\n",
	} {
		if !strings.Contains(text, "\n"+want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
}
