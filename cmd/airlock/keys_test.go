package main

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/approvaltoken"
)

// kidsOf fetches the server's public key set and returns its key ids.
func kidsOf(t *testing.T, c *api) []string {
	t.Helper()
	r := c.call("GET", "/.well-known/jwks.json", "", "").want(t, 200, "jwks")
	if _, err := approvaltoken.ParseKeySet([]byte(r.Raw)); err != nil {
		t.Fatalf("the key set does not parse: %v\n%s", err, r.Raw)
	}
	var kids []string
	for _, k := range r.Body["keys"].([]any) {
		kids = append(kids, k.(map[string]any)["kid"].(string))
	}
	return kids
}

// TestCLIKeys: a server creates its signing key at the first start and
// keeps it across restarts; an admin lists and rotates keys, and the key
// set lists the old key beside the new one.
func TestCLIKeys(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "airlock.db")
	first := startApp(t, nil, "--addr", "127.0.0.1:0", "--db", db, "--admin-token", testAdmin)
	kids := kidsOf(t, newAPI(t, first.url))
	if _, err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	srv := startApp(t, nil, "--addr", "127.0.0.1:0", "--db", db, "--admin-token", testAdmin)
	c := newAPI(t, srv.url)
	if again := kidsOf(t, c); len(kids) != 1 || len(again) != 1 || again[0] != kids[0] {
		t.Fatalf("key sets %v, then after a restart %v; want one key, kept", kids, again)
	}
	s := &cliServer{running: srv, api: c, admin: testAdmin}
	s.reviewer = c.mintToken(testAdmin, "cli reviewer", "reviewer")

	list := s.cli(t, s.admin, "keys", "list").want(t, 0, "list keys").stdout
	if !strings.Contains(list, kids[0]) || !strings.Contains(list, "yes") {
		t.Fatalf("keys list:\n%s", list)
	}
	s.cli(t, s.reviewer, "keys", "rotate").want(t, exitAuth, "a reviewer rotating keys")
	out := s.cli(t, s.admin, "keys", "rotate").want(t, 0, "rotate").stdout
	after := kidsOf(t, c)
	if len(after) != 2 || after[1] != kids[0] || !strings.Contains(out, after[0]) {
		t.Fatalf("keys rotate said %q; key set now %v; want the new key first, then %s", out, after, kids[0])
	}
}

// TestSigningKeyFile: with --signing-key-file the server publishes that
// key alone, stores none, and refuses a rotation.
func TestSigningKeyFile(t *testing.T) {
	t.Parallel()
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "signing.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := approvaltoken.FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	srv, c := serveNew(t, "--signing-key-file", path)
	if kids := kidsOf(t, c); len(kids) != 1 || kids[0] != want.ID {
		t.Fatalf("key set %v; want only the file's key %s", kids, want.ID)
	}
	s := &cliServer{running: srv, api: c, admin: testAdmin}
	s.cli(t, s.admin, "keys", "rotate").want(t, 1, "rotating a key given by file")

	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	app := &App{Stdout: &strings.Builder{}, Stderr: &strings.Builder{}, LookupEnv: mapEnv(nil)}
	if code := exitCode(app, app.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "a.db"), "--signing-key-file", bad})); code != exitUsage {
		t.Fatalf("serve with a bad key file: exit %d; want %d", code, exitUsage)
	}
}
