package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/passkey"
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
	purgedPayloads, err := auditlog.RequestPayloads(airlock.Request{Tool: "t", Arguments: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e, payloads := airlock.Event{Type: airlock.EventTokenCreated, At: at.Add(time.Duration(i) * time.Second), Actor: "user:ada", UID: fmt.Sprintf("u%d", i)}, (*auditlog.Payloads)(nil)
		if i == 3 {
			// One request's payloads purged by retention.
			e.Type, e.Actor, e.RequestID, payloads = airlock.EventRequestPurged, "system:retention", "apr_1", &purgedPayloads
		}
		leaf, err := auditlog.NewLeaf(e, payloads)
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
	if !strings.Contains(out, "Verified: the 40 entries of airlock.test/audit") || !strings.Contains(out, "kept earlier is of its first 25") ||
		!strings.Contains(out, "1 requests' arguments, reasoning and context were purged") {
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
	if v := verdict(runCLI(offline("--json")...).want(t, 0, "--json")); !v.Verified || v.PurgedRequests != 1 || v.Size != 40 {
		t.Errorf("--json verdict %+v, want verified, 40 entries, 1 purged request", v)
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

// tamperer changes the audit log's stored leaves behind the server's back,
// as someone with the database would, and puts them back.
type tamperer struct {
	exec func(t *testing.T, query string, args ...any)
	// editActor is the statement that rewrites the actor of the leaf at
	// index $1 (one character more: still a canonical leaf).
	editActor string
	// leaf and setLeaf read and write a leaf's bytes by index.
	leaf    func(t *testing.T, idx int64) []byte
	setLeaf string
}

// TestAuditVerifyServer is T35 against a running server, on SQLite and on
// PostgreSQL: `airlock audit verify --url` passes the log as it is and keeps
// its checkpoint; each tampering of the stored leaves, made directly in the
// database (a leaf edited, one deleted, two swapped), then fails with exit
// 1 naming the first index that does not match, which the server's
// consistency proofs let it find although the server serves the tampered
// leaves; and only auditors and admins may verify.
func TestAuditVerifyServer(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			var db string
			var tp tamperer
			switch engine {
			case "sqlite":
				db = filepath.Join(t.TempDir(), "airlock.db")
			case "postgres":
				db = pgSchemaURL(t)
			}
			srv := startApp(t, nil, "--addr", "127.0.0.1:0", "--db", db, "--admin-token", testAdmin, "--checkpoint-interval", "1s")
			if engine == "sqlite" {
				tp = sqliteTamperer(t, db)
			} else {
				tp = postgresTamperer(t, db)
			}
			c := newAPI(t, srv.url)
			agent := c.mintToken(testAdmin, "agent", "agent")
			reviewer := c.mintToken(testAdmin, "reviewer", "reviewer")
			auditor := c.mintToken(testAdmin, "auditor", "auditor")
			inst := c.call("POST", "/v1/instances", agent, `{"name":"audited"}`).want(t, 201, "instance").Str("id")
			for i := range 6 {
				id := c.call("POST", "/v1/instances/"+inst+"/approval-requests", agent, fmt.Sprintf(`{"tool":"t","arguments":{"n":%d}}`, i),
					"Idempotency-Key", fmt.Sprint("k", i)).want(t, 201, "create").Str("id")
				c.call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved"}`).want(t, 200, "approve")
			}
			// A checkpoint that covers every event: the twelve of the
			// requests and the tokens' and instance's before them.
			deadline := time.Now().Add(30 * time.Second)
			for {
				r := c.call("GET", "/v1/audit/checkpoint", auditor, "")
				if r.Status == 200 && checkpointSize(t, r.Raw) >= 16 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no checkpoint of 16 events within 30 s: %d %s", r.Status, r.Raw)
				}
				time.Sleep(50 * time.Millisecond)
			}
			s := &cliServer{running: srv, api: c, admin: testAdmin}
			kept := filepath.Join(t.TempDir(), "kept")
			out := s.cli(t, auditor, "audit", "verify", "--keep", kept).want(t, 0, "verify a true log").stdout
			if !strings.HasPrefix(out, "Verified: the ") {
				t.Fatalf("verify:\n%s", out)
			}
			s.cli(t, testAdmin, "audit", "verify", "--previous", kept).want(t, 0, "an admin verifying against the kept checkpoint")
			if r := s.cli(t, reviewer, "audit", "verify"); r.exit == 0 {
				t.Fatalf("a reviewer verified the log: %+v", r)
			}

			verdict := func(what string) auditVerdict {
				t.Helper()
				r := s.cli(t, auditor, "audit", "verify", "--json", "--previous", kept).want(t, 1, what)
				var v auditVerdict
				if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
					t.Fatalf("%s: --json: %v\n%s", what, err, r.stdout)
				}
				return v
			}
			wantAt := func(what string, v auditVerdict, reason string, index int64) {
				t.Helper()
				if v.Verified || v.Reason != reason || v.Index == nil || *v.Index != index {
					t.Errorf("%s: verdict %+v (index %v), want %s at %d", what, v, v.Index, reason, index)
				}
			}

			// A leaf edited in place.
			leaf5 := tp.leaf(t, 5)
			tp.exec(t, tp.editActor, 5)
			wantAt("a leaf edited", verdict("a leaf edited"), "leaf_hash", 5)
			tp.exec(t, tp.setLeaf, leaf5, 5)
			s.cli(t, auditor, "audit", "verify", "--previous", kept).want(t, 0, "the leaf put back")

			// Two leaves swapped: the first of them is named.
			leaf3, leaf4 := tp.leaf(t, 3), tp.leaf(t, 4)
			tp.exec(t, tp.setLeaf, leaf4, 3)
			tp.exec(t, tp.setLeaf, leaf3, 4)
			wantAt("two leaves swapped", verdict("two leaves swapped"), "leaf_hash", 3)
			tp.exec(t, tp.setLeaf, leaf3, 3)
			tp.exec(t, tp.setLeaf, leaf4, 4)

			// A leaf deleted: the server serves the entries around the gap.
			tp.exec(t, "DELETE FROM audit_leaves WHERE idx = $1", 7)
			wantAt("a leaf deleted", verdict("a leaf deleted"), "order", 7)
		})
	}
}

// checkpointSize reads a checkpoint's tree size, its second line.
func checkpointSize(t *testing.T, note string) int64 {
	t.Helper()
	lines := strings.Split(note, "\n")
	if len(lines) < 2 {
		t.Fatalf("not a checkpoint: %q", note)
	}
	var n int64
	if _, err := fmt.Sscan(lines[1], &n); err != nil {
		t.Fatalf("checkpoint size %q: %v", lines[1], err)
	}
	return n
}

func sqliteTamperer(t *testing.T, path string) tamperer {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return tamperer{
		exec: func(t *testing.T, query string, args ...any) {
			t.Helper()
			if _, err := db.Exec(query, args...); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		},
		editActor: `UPDATE audit_leaves SET leaf = CAST(replace(CAST(leaf AS TEXT), '"actor":"', '"actor":"x') AS BLOB) WHERE idx = $1`,
		leaf: func(t *testing.T, idx int64) []byte {
			t.Helper()
			var b []byte
			if err := db.QueryRow(`SELECT leaf FROM audit_leaves WHERE idx = $1`, idx).Scan(&b); err != nil {
				t.Fatal(err)
			}
			return b
		},
		setLeaf: `UPDATE audit_leaves SET leaf = $1 WHERE idx = $2`,
	}
}

func postgresTamperer(t *testing.T, url string) tamperer {
	conn, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return tamperer{
		exec: func(t *testing.T, query string, args ...any) {
			t.Helper()
			if _, err := conn.Exec(context.Background(), query, args...); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		},
		editActor: `UPDATE audit_leaves SET leaf = convert_to(replace(convert_from(leaf, 'UTF8'), '"actor":"', '"actor":"x'), 'UTF8') WHERE idx = $1`,
		leaf: func(t *testing.T, idx int64) []byte {
			t.Helper()
			var b []byte
			if err := conn.QueryRow(context.Background(), `SELECT leaf FROM audit_leaves WHERE idx = $1`, idx).Scan(&b); err != nil {
				t.Fatal(err)
			}
			return b
		},
		setLeaf: `UPDATE audit_leaves SET leaf = $1 WHERE idx = $2`,
	}
}

// TestAuditVerifyPasskeys: offline, `audit verify` checks the passkey
// record beside a decision's leaf and counts it; one whose public key the
// server no longer had is counted apart; a record whose note was changed
// fails with exit 1, naming its index and the reason passkey.
func TestAuditVerifyPasskeys(t *testing.T) {
	t.Parallel()
	const origin = "airlock.test/audit"
	skey, vkey, err := auditlog.GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	args, err := auditlog.DigestJSON([]byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	soft := testkit.NewSoftPasskey(t, "cred")
	record := func(id string, status airlock.State) *auditlog.PasskeyRecord {
		s := passkey.Signed{RequestID: id, ArgsDigest: args, Status: status, Note: "checked"}
		challenge, err := passkey.SignedChallenge(s)
		if err != nil {
			t.Fatal(err)
		}
		sig := soft.Sign(t, "webauthn.get", challenge, "localhost", "http://localhost", testkit.FlagUserPresent|testkit.FlagUserVerified)
		return &auditlog.PasskeyRecord{Assertion: passkey.Assertion{CredentialID: soft.ID, AuthenticatorData: sig.AuthenticatorData,
			ClientDataJSON: sig.ClientDataJSON, Signature: sig.Signature}, PublicKey: soft.COSE, RPID: "localhost", Signed: s}
	}
	tree := &auditlog.MemoryTree{}
	var lines []string
	for i, e := range []struct {
		typ   airlock.EventType
		id    string
		state airlock.State
	}{{airlock.EventRequestCreated, "apr_1", airlock.StatePending}, {airlock.EventRequestApproved, "apr_1", airlock.StateApproved},
		{airlock.EventRequestCreated, "apr_2", airlock.StatePending}, {airlock.EventRequestDenied, "apr_2", airlock.StateDenied}} {
		leaf, err := auditlog.NewLeaf(airlock.Event{Type: e.typ, UID: fmt.Sprint("u", i), At: time.Unix(int64(i+1), 0), Actor: "tok_carol",
			RequestID: e.id, State: e.state}, &auditlog.Payloads{Tool: auditlog.DigestString("t"), Arguments: args, Reasoning: auditlog.DigestString("")})
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Append(leaf); err != nil {
			t.Fatal(err)
		}
		en := auditlog.Entry{Index: int64(i), Leaf: leaf}
		switch i {
		case 1:
			en.Passkey = record(e.id, e.state)
		case 3:
			en.Passkey = record(e.id, e.state)
			en.Passkey.PublicKey = nil // the passkey deleted before keys were kept
		}
		lines = append(lines, string(auditlog.AppendEntry(nil, en)))
	}
	root, err := tree.Root(tree.Size())
	if err != nil {
		t.Fatal(err)
	}
	note, err := auditlog.SignCheckpoint(skey, auditlog.Checkpoint{Origin: origin, Size: tree.Size(), Root: root})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cpFile, keyFile := write("checkpoint", string(note)), write("key", vkey)
	entries := write("entries.jsonl", strings.Join(lines, ""))
	out := runCLI("audit", "verify", "--entries", entries, "--checkpoint", cpFile, "--key", keyFile).want(t, 0, "a log with a signed decision").stdout
	if !strings.Contains(out, "1 decisions and votes signed with a passkey: each signature verifies") ||
		!strings.Contains(out, "1 more signed with a passkey could not be checked") {
		t.Errorf("verified:\n%s", out)
	}
	var v auditVerdict
	r := runCLI("audit", "verify", "--json", "--entries", entries, "--checkpoint", cpFile, "--key", keyFile).want(t, 0, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.PasskeyDecisions != 1 || v.PasskeyKeysUnknown != 1 {
		t.Errorf("--json verdict %s (%v), want 1 passkey decision and 1 key unknown", r.stdout, err)
	}
	lines[1] = strings.Replace(lines[1], `"note":"checked"`, `"note":"checked twice"`, 1)
	r = runCLI("audit", "verify", "--json", "--entries", write("tampered.jsonl", strings.Join(lines, "")), "--checkpoint", cpFile, "--key", keyFile).
		want(t, 1, "a record's note changed")
	v = auditVerdict{}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Verified || v.Reason != "passkey" || v.Index == nil || *v.Index != 1 {
		t.Errorf("a record's note changed: verdict %s (%v), want passkey at index 1", r.stdout, err)
	}
}
