package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	// The new key is published at once and signs 30 seconds later (the
	// default --key-activation-delay); until then the old one signs.
	active := map[string]string{}
	for line := range strings.Lines(s.cli(t, s.admin, "keys", "list").want(t, 0, "list keys").stdout) {
		if f := strings.Fields(line); len(f) > 1 {
			active[f[0]] = f[1]
		}
	}
	if active[after[0]] != "no" || active[kids[0]] != "yes" {
		t.Fatalf("after the rotation the keys' ACTIVE column is %v; want the new key %s no, the old %s yes", active, after[0], kids[0])
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

// TestTokensVerify: `airlock tokens verify` passes the claim's token for
// the approved call (its arguments in another JSON spelling too), with the
// key set from the server or from a file, and refuses with exit 1 and the
// reason another tool, changed arguments and a token changed in transit.
func TestTokensVerify(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	id := s.create(t, `{"tool":"send_mail","arguments":{"to":"ops@example.com","n":1}}`)
	s.api.call("POST", "/v1/approval-requests/"+id+"/decision", s.reviewer, `{"status":"approved"}`).want(t, 200, "approve")
	token := s.api.call("POST", "/v1/approval-requests/"+id+"/execution", s.agent, "").want(t, 200, "claim").Str("execution.approval_token")
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	same := write("same.json", `{"n": 1.0, "to": "ops@example.com"}`)
	changed := write("changed.json", `{"n": 2, "to": "ops@example.com"}`)
	jwks := write("jwks.json", s.api.call("GET", "/.well-known/jwks.json", "", "").want(t, 200, "jwks").Raw)

	ok := s.cli(t, "", "tokens", "verify", "--token", token, "--tool", "send_mail", "--args", same).want(t, 0, "verify against the server's keys")
	if !strings.Contains(ok.stdout, "Approved: send_mail may run for request "+id) {
		t.Fatalf("tokens verify said %q", ok.stdout)
	}
	s.cli(t, "", "tokens", "verify", "--token", token, "--tool", "send_mail", "--args", same, "--jwks", jwks).want(t, 0, "verify against a key file")

	parts := strings.Split(token, ".")
	for _, tc := range []struct{ name, token, tool, args, reason string }{
		{"another tool", token, "send_mails", same, "tool does not match"},
		{"changed arguments", token, "send_mail", changed, "arguments do not match"},
		{"a signature from another token", parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2])), "send_mail", same, "signature does not verify"},
		{"alg none", "eyJhbGciOiJub25lIn0." + parts[1] + ".", "send_mail", same, "algorithm is not EdDSA"},
	} {
		r := s.cli(t, "", "tokens", "verify", "--token", tc.token, "--tool", tc.tool, "--args", tc.args, "--jwks", jwks).want(t, 1, tc.name)
		if !strings.Contains(r.stderr, "not approved") || !strings.Contains(r.stderr, tc.reason) {
			t.Errorf("%s: stderr %q; want the reason %q", tc.name, r.stderr, tc.reason)
		}
	}
	s.cli(t, "", "tokens", "verify", "--tool", "send_mail", "--args", same).want(t, exitUsage, "no token")
}

// TestTokensConsume: `airlock tokens consume` with a verifier token uses a
// claim's approval token up once (exit 0), then refuses it with exit 1
// naming when it was used; a token changed in transit is refused with its
// reason and consumes nothing.
func TestTokensConsume(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	verifier := s.api.mintToken(testAdmin, "tool server", "verifier")
	id := s.create(t, `{"tool":"send_mail","arguments":{"to":"ops@example.com","n":1}}`)
	s.api.call("POST", "/v1/approval-requests/"+id+"/decision", s.reviewer, `{"status":"approved"}`).want(t, 200, "approve")
	token := s.api.call("POST", "/v1/approval-requests/"+id+"/execution", s.agent, "").want(t, 200, "claim").Str("execution.approval_token")
	args := filepath.Join(t.TempDir(), "call.json")
	if err := os.WriteFile(args, []byte(`{"n": 1.0, "to": "ops@example.com"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	forged := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
	r := s.cli(t, verifier, "tokens", "consume", "--token", forged, "--tool", "send_mail", "--args", args).want(t, 1, "a changed signature")
	if !strings.Contains(r.stderr, "invalid_token") || !strings.Contains(r.stderr, "signature does not verify") {
		t.Errorf("a changed signature: stderr %q", r.stderr)
	}
	ok := s.cli(t, verifier, "tokens", "consume", "--token", token, "--tool", "send_mail", "--args", args).want(t, 0, "consume")
	if !strings.Contains(ok.stdout, "Consumed: the approval of request "+id) {
		t.Fatalf("tokens consume said %q", ok.stdout)
	}
	again := s.cli(t, verifier, "tokens", "consume", "--token", token).want(t, exitConflict, "consume again")
	if !strings.Contains(again.stderr, "already_used") || !strings.Contains(again.stderr, "already used at") {
		t.Errorf("a second consume: stderr %q", again.stderr)
	}
	s.cli(t, verifier, "tokens", "consume", "--token", token, "--tool", "send_mail").want(t, exitUsage, "--tool without --args")
}

// TestTokensVerifyVectors: every token of approvaltoken/testdata/vectors.json
// (the T34 cases every language's verifier runs) through `airlock tokens
// verify --at`: the accepted ones exit 0, every forged or altered one
// exits 1 naming its reason.
func TestTokensVerifyVectors(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../approvaltoken/testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		KeySet  json.RawMessage `json:"jwks"`
		Vectors []struct {
			Name, Token, Tool, Args, Audience, Reason string
			Now                                       int64
		} `json:"vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, file.KeySet, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			args := filepath.Join(dir, fmt.Sprintf("args-%d.json", i))
			if err := os.WriteFile(args, []byte(v.Args), 0o600); err != nil {
				t.Fatal(err)
			}
			at := time.Unix(v.Now, 0).UTC().Format(time.RFC3339)
			var stdout, stderr bytes.Buffer
			app := &App{Stdout: &stdout, Stderr: &stderr, LookupEnv: mapEnv(map[string]string{"AIRLOCK_APPROVAL_TOKEN": v.Token})}
			cmd := []string{"tokens", "verify", "--tool", v.Tool, "--args", args, "--jwks", jwks, "--at", at}
			if v.Audience != "" {
				cmd = append(cmd, "--audience", v.Audience)
			}
			exit := exitCode(app, app.Run(t.Context(), cmd))
			switch {
			case v.Token == "":
				if exit != exitUsage {
					t.Fatalf("no token: exit %d; want usage (%d)", exit, exitUsage)
				}
			case v.Reason == "" && exit != 0:
				t.Fatalf("exit %d, stderr %q; want the token accepted", exit, stderr.String())
			case v.Reason != "" && (exit != 1 || !strings.Contains(stderr.String(), "not approved ("+v.Reason+")")):
				t.Fatalf("exit %d, stderr %q; want exit 1 naming %q", exit, stderr.String(), v.Reason)
			}
		})
	}
}
