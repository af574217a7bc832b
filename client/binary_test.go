package client_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// setupBinary starts `airlock serve` on a fresh SQLite file and returns a
// bundle of clients for it (no service or clock: it is another process).
// The binary is built without the race detector: under -race, SQLite
// (transpiled C) runs many times slower, and T06's figure is about the
// server's claims and the gates, not about race-checking SQLite, which the
// store's own tests do.
func setupBinary(t testing.TB) *bundle {
	t.Helper()
	dir := t.TempDir()
	p := testkit.Serve(t, testkit.Airlock(t, false), "", []string{"HOME=" + dir},
		"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"),
		"--admin-token", adminSecret, "--min-timeout", "1ms", "--rate-limit", "1000000")
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	b := &bundle{url: p.URL, hc: &http.Client{Transport: tr}, pid: p.Cmd.Process.Pid}
	t.Cleanup(tr.CloseIdleConnections)
	b.populate(t)
	return b
}
