package rest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/sequencer"
	"github.com/airlockhq/airlock/store"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// The audit log's endpoints (docs/audit.md), checked as an auditor would:
// with golang.org/x/mod's note and tlog only, sharing no code with the
// server's signer and prover.

// checkpointed sequences every committed event and signs a checkpoint of
// the whole tree, and returns it.
func (b *bundle) checkpointed(t testing.TB) store.AuditCheckpoint {
	t.Helper()
	ctx := context.Background()
	if _, err := b.svc.SequenceAudit(ctx); err != nil {
		t.Fatalf("sequence: %v", err)
	}
	key, err := b.st.AuditKey(ctx)
	if err != nil {
		t.Fatalf("audit key: %v", err)
	}
	cp, _, err := sequencer.Checkpoint(ctx, b.st, key, nil)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return cp
}

// eachStore runs test on a bundle on SQLite and on one on PostgreSQL,
// with the sequencer left to the test.
func eachStore(t *testing.T, test func(t *testing.T, b *bundle)) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, setup(t, func(o *options) { o.postgres, o.checkpointEvery = pg, -1 }))
		})
	}
}

// openedCheckpoint is a checkpoint an auditor opened with the key alone.
type openedCheckpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// openCheckpoint checks msg's signature with vkey by note.Open and reads
// its body (C2SP tlog-checkpoint), failing t otherwise.
func openCheckpoint(t testing.TB, msg []byte, vkey string) openedCheckpoint {
	t.Helper()
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		t.Fatalf("verifier key %q: %v", vkey, err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open of the served checkpoint: %v\n%s", err, msg)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[0] != v.Name() {
		t.Fatalf("checkpoint body %q: want origin %s, size, root", n.Text, v.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		t.Fatalf("checkpoint size %q: %v", lines[1], err)
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != len(tlog.Hash{}) {
		t.Fatalf("checkpoint root %q: %v", lines[2], err)
	}
	var root tlog.Hash
	copy(root[:], raw)
	return openedCheckpoint{origin: lines[0], size: size, root: root}
}

// entryLine is a line of GET /v1/audit/entries.
type entryLine struct {
	Index int64           `json:"index"`
	Leaf  json.RawMessage `json:"leaf"`
}

func readEntries(t testing.TB, body []byte) []entryLine {
	t.Helper()
	var out []entryLine
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e entryLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("entry line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// hashes is a tlog.HashReader over stored hashes an auditor computed.
type hashes []tlog.Hash

func (h hashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = h[x]
	}
	return out, nil
}

// rootOf recomputes the root of the tree of entries with tlog alone.
func rootOf(t testing.TB, entries []entryLine) tlog.Hash {
	t.Helper()
	var stored hashes
	for i, e := range entries {
		if e.Index != int64(i) {
			t.Fatalf("entry %d has index %d", i, e.Index)
		}
		hs, err := tlog.StoredHashes(e.Index, e.Leaf, stored)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
	}
	root, err := tlog.TreeHash(int64(len(entries)), stored)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// decodeHashes reads a proof's base64 hashes.
func decodeHashes(t testing.TB, v any) []tlog.Hash {
	t.Helper()
	var out []tlog.Hash
	for _, s := range v.([]any) {
		raw, err := base64.StdEncoding.DecodeString(s.(string))
		if err != nil || len(raw) != 32 {
			t.Fatalf("proof hash %v: %v", s, err)
		}
		var h tlog.Hash
		copy(h[:], raw)
		out = append(out, h)
	}
	return out
}

// TestAuditLogEndpoints: a checkpoint served by the server verifies with
// note.Open and only the key of GET /v1/audit/key; the entries recompute
// its root; every inclusion proof checks with tlog.CheckRecord and a
// consistency proof with tlog.CheckTree; a request's proof proves each of
// its events; and bad parameters are 400 saying why. On both stores.
func TestAuditLogEndpoints(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		id := b.approved(t)
		b.checkpointed(t)
		get := func(path string) resp {
			t.Helper()
			r := b.do(t, req{method: "GET", path: path, token: b.auditor})
			want(t, r, http.StatusOK, "")
			return r
		}
		key := get("/v1/audit/key")
		if ct := key.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Fatalf("key Content-Type %q", ct)
		}
		vkey := string(key.body)
		served := get("/v1/audit/checkpoint")
		stored, err := b.st.LatestCheckpoint(context.Background())
		if err != nil || !bytes.Equal(served.body, stored.Note) {
			t.Fatalf("served checkpoint differs from the stored note (%v):\n%s\n%s", err, served.body, stored.Note)
		}
		cp := openCheckpoint(t, served.body, vkey)
		if cp.size < 5 {
			t.Fatalf("checkpoint of %d leaves; want every event so far", cp.size)
		}

		entries := readEntries(t, get("/v1/audit/entries?limit="+strconv.FormatInt(cp.size, 10)).body)
		if int64(len(entries)) != cp.size || rootOf(t, entries) != cp.root {
			t.Fatalf("%d entries do not recompute the checkpoint's root", len(entries))
		}
		if page := readEntries(t, get("/v1/audit/entries?start=1&limit=2").body); len(page) != 2 || page[0].Index != 1 || page[1].Index != 2 {
			t.Fatalf("entries start=1 limit=2 = %v", page)
		}
		if page := readEntries(t, get("/v1/audit/entries?start=1000000").body); len(page) != 0 {
			t.Fatalf("entries beyond the tree = %d lines", len(page))
		}
		for _, e := range entries {
			p := get("/v1/audit/proofs/inclusion?index=" + strconv.FormatInt(e.Index, 10) + "&tree_size=" + strconv.FormatInt(cp.size, 10)).obj(t)
			if err := tlog.CheckRecord(decodeHashes(t, p["hashes"]), cp.size, cp.root, e.Index, tlog.RecordHash(e.Leaf)); err != nil {
				t.Fatalf("inclusion proof of %d: %v", e.Index, err)
			}
			// A proof does not prove another leaf.
			if err := tlog.CheckRecord(decodeHashes(t, p["hashes"]), cp.size, cp.root, e.Index, tlog.RecordHash([]byte(`{}`))); err == nil {
				t.Fatalf("inclusion proof of %d proves another leaf", e.Index)
			}
		}

		// The tree grows; the new checkpoint extends the old.
		b.approved(t)
		b.checkpointed(t)
		next := openCheckpoint(t, get("/v1/audit/checkpoint").body, vkey)
		if next.size <= cp.size {
			t.Fatalf("checkpoint after growth has %d leaves, the old %d", next.size, cp.size)
		}
		p := get("/v1/audit/proofs/consistency?from=" + strconv.FormatInt(cp.size, 10) + "&to=" + strconv.FormatInt(next.size, 10)).obj(t)
		if err := tlog.CheckTree(decodeHashes(t, p["hashes"]), next.size, next.root, cp.size, cp.root); err != nil {
			t.Fatalf("consistency proof %d to %d: %v", cp.size, next.size, err)
		}
		if err := tlog.CheckTree(decodeHashes(t, p["hashes"]), next.size, next.root, cp.size, tlog.RecordHash(nil)); err == nil {
			t.Fatal("a consistency proof checks against another old root")
		}

		// A request's proof: each of its events, proved in the checkpoint
		// it carries; an admin reads it too.
		for _, token := range []string{b.auditor, b.admin} {
			r := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id + "/proof", token: token})
			want(t, r, http.StatusOK, "")
			proof := r.obj(t)
			pc := openCheckpoint(t, []byte(proof["checkpoint"].(string)), vkey)
			got := proof["entries"].([]any)
			if len(got) < 2 || proof["request_id"] != id || int64(proof["tree_size"].(float64)) != pc.size {
				t.Fatalf("request proof %s: want its created and approved events", r.body)
			}
			for _, x := range got {
				e := x.(map[string]any)
				leaf, _ := json.Marshal(e["leaf"]) // the leaf is canonical JSON: Marshal writes it back alike
				if !bytes.Contains(leaf, []byte(id)) {
					t.Fatalf("leaf %s is not of request %s", leaf, id)
				}
				if err := tlog.CheckRecord(decodeHashes(t, e["proof"]), pc.size, pc.root, int64(e["index"].(float64)), tlog.RecordHash(leaf)); err != nil {
					t.Fatalf("request proof entry %v: %v", e["index"], err)
				}
			}
		}

		// Bad parameters say what is wrong.
		for _, tt := range []struct {
			path, says string
			status     int
		}{
			{"/v1/audit/entries?limit=0", "limit is 1 to 10000", 400},
			{"/v1/audit/entries?limit=10001", "limit is 1 to 10000", 400},
			{"/v1/audit/entries?start=-1", "start is an index", 400},
			{"/v1/audit/entries?start=x", "start must be a whole number", 400},
			{"/v1/audit/proofs/inclusion?index=0", "tree_size is required", 400},
			{"/v1/audit/proofs/inclusion?index=0&tree_size=999999", "tree_size 999999 is beyond the tree, which has", 400},
			{"/v1/audit/proofs/inclusion?index=5&tree_size=5", "index 5 is not in a tree of 5 leaves", 400},
			{"/v1/audit/proofs/inclusion?index=0&tree_size=0", "tree_size is a tree size", 400},
			{"/v1/audit/proofs/consistency?from=3&to=2", "from is a tree size from 0 to to (2)", 400},
			{"/v1/audit/proofs/consistency?from=1&to=999999", "to 999999 is beyond the tree", 400},
			{"/v1/audit/export?format=xml", "format is jsonl, csv or ocsf", 400},
			{"/v1/audit/export?since=yesterday", "since must be an RFC 3339 time", 400},
			{"/v1/audit/export?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", "until (2026-12-01T00:00:00Z) must be after since", 400},
			{"/v1/approval-requests/apr_unknown/proof", "", 404},
		} {
			r := b.do(t, req{method: "GET", path: tt.path, token: b.auditor, invalid: tt.status == 400})
			if r.status != tt.status || !strings.Contains(string(r.body), tt.says) {
				t.Errorf("GET %s = %d %s; want %d saying %q", tt.path, r.status, r.body, tt.status, tt.says)
			}
		}
	})
}

// TestAuditLogBeforeTheFirstCheckpoint: the key is served from the start,
// so that an auditor can keep it before anything is signed; the checkpoint
// and a request's proof are 404 until the first.
func TestAuditLogBeforeTheFirstCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.checkpointEvery = -1 })
	_, id := b.pending(t, "10m")
	r := b.do(t, req{method: "GET", path: "/v1/audit/checkpoint", token: b.auditor})
	want(t, r, http.StatusNotFound, airlock.CodeNotFound)
	if !strings.Contains(string(r.body), "no checkpoint yet") {
		t.Fatalf("checkpoint before the first: %s", r.body)
	}
	want(t, b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id + "/proof", token: b.auditor}), http.StatusNotFound, airlock.CodeNotFound)
	key := b.do(t, req{method: "GET", path: "/v1/audit/key", token: b.auditor})
	want(t, key, http.StatusOK, "")
	b.checkpointed(t)
	cp := b.do(t, req{method: "GET", path: "/v1/audit/checkpoint", token: b.auditor})
	want(t, cp, http.StatusOK, "")
	openCheckpoint(t, cp.body, string(key.body)) // signed by the key served before it
}

// TestAuditExportCSV is T35's CSV case: requests whose arguments and
// reasoning are formula payloads (and a tool that begins with "-"), and a reviewer principal that is one
// (in a leaf's subject), exported as CSV and read by encoding/csv: no
// cell begins with a formula character, and the defused cell keeps its
// text after the apostrophe.
func TestAuditExportCSV(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		a := b.callers["agentA"]
		inst, err := b.svc.RegisterInstance(ctx, a, airlock.InstanceInput{Name: "=cmd|' /C calc'!A0"})
		if err != nil {
			t.Fatal(err)
		}
		for i, payload := range []string{`=HYPERLINK("http://evil.test","x")`, "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"} {
			args, _ := json.Marshal(map[string]string{"cell": payload})
			if _, _, err := b.svc.CreateRequest(ctx, a, inst.ID, "csv-"+strconv.Itoa(i), airlock.CreateRequestInput{
				Tool: "-x", Arguments: args, AgentReasoning: payload, Timeout: "10m",
			}); err != nil {
				t.Fatal(err)
			}
		}
		const principal = `=SUM(1+1)*cmd|'-C calc'!A0`
		if _, _, err := b.svc.CreateToken(ctx, b.callers["admin"], airlock.NewTokenInput{Name: "formula", Role: airlock.RoleReviewer, Principal: principal}); err != nil {
			t.Fatal(err)
		}
		want(t, b.do(t, req{method: "PUT", path: "/v1/reviewers/" + url.PathEscape(principal) + "/link", token: b.admin,
			body: `{"email":"formula@example.com"}`}), http.StatusOK, "")
		b.checkpointed(t)

		r := b.do(t, req{method: "GET", path: "/v1/audit/export?format=csv", token: b.auditor})
		want(t, r, http.StatusOK, "")
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
			t.Fatalf("CSV export Content-Type %q", ct)
		}
		rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		if err != nil {
			t.Fatalf("encoding/csv reads the export: %v", err)
		}
		size, _ := b.st.TreeSize(ctx)
		if int64(len(rows)) != size+1 || rows[0][0] != "index" {
			t.Fatalf("%d rows for %d leaves and a header", len(rows), size)
		}
		defused := false
		for _, row := range rows {
			for _, cell := range row {
				if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
					t.Errorf("cell %q begins with a formula character", cell)
				}
				if cell == "'"+principal {
					defused = true
				}
			}
		}
		if !defused {
			t.Fatalf("the reviewer.linked row does not carry the principal defused:\n%s", r.body)
		}
		if strings.Contains(string(r.body), "HYPERLINK") {
			t.Fatal("the export carries a request's arguments, not their digests")
		}
	})
}

// TestAuditExportFormats: the JSON lines export is the entries (so it
// verifies against the checkpoint), OCSF lines are API Activity objects
// of the same events, and since/until keep the events in their window.
func TestAuditExportFormats(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.checkpointEvery = -1 })
	b.approved(t)
	cp := b.checkpointed(t)
	get := func(path string) []byte {
		t.Helper()
		r := b.do(t, req{method: "GET", path: path, token: b.admin})
		want(t, r, http.StatusOK, "")
		return r.body
	}
	jsonl := get("/v1/audit/export?format=jsonl")
	if !bytes.Equal(jsonl, get("/v1/audit/entries?limit=10000")) || !bytes.Equal(jsonl, get("/v1/audit/export")) {
		t.Fatal("the JSON lines export is not the entries")
	}
	entries := readEntries(t, jsonl)
	if int64(len(entries)) != cp.Size {
		t.Fatalf("export of %d entries; the checkpoint has %d", len(entries), cp.Size)
	}
	ocsf := bytes.Split(bytes.TrimSuffix(get("/v1/audit/export?format=ocsf"), []byte("\n")), []byte("\n"))
	if len(ocsf) != len(entries) {
		t.Fatalf("%d OCSF lines for %d entries", len(ocsf), len(entries))
	}
	for i, line := range ocsf {
		var o struct {
			ClassUID   int `json:"class_uid"`
			TypeUID    int `json:"type_uid"`
			ActivityID int `json:"activity_id"`
			Time       int64
			Metadata   struct {
				Sequence  int64  `json:"sequence"`
				EventCode string `json:"event_code"`
				Version   string `json:"version"`
			}
			Actor    struct{ User struct{ UID string } }
			API      struct{ Operation string }
			Unmapped struct {
				Leaf json.RawMessage `json:"leaf"`
			}
		}
		if err := json.Unmarshal(line, &o); err != nil {
			t.Fatalf("OCSF line %s: %v", line, err)
		}
		if o.ClassUID != 6003 || o.TypeUID != 600300+o.ActivityID || o.Metadata.Sequence != entries[i].Index || o.Time == 0 ||
			o.Actor.User.UID == "" || o.API.Operation != o.Metadata.EventCode || o.Metadata.Version == "" ||
			!bytes.Equal(o.Unmapped.Leaf, entries[i].Leaf) {
			t.Fatalf("OCSF line %d = %s; want API Activity of entry %s", i, line, entries[i].Leaf)
		}
	}
	// A window that ends before every event keeps none; one from far
	// before keeps them all.
	if got := get("/v1/audit/export?until=2000-01-01T00:00:00Z"); len(got) != 0 {
		t.Fatalf("export until 2000: %s", got)
	}
	if got := get("/v1/audit/export?since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z"); !bytes.Equal(got, jsonl) {
		t.Fatal("a window around every event does not export them all")
	}
	last := readEntries(t, jsonl)[len(entries)-1]
	var leaf struct{ Time string }
	json.Unmarshal(last.Leaf, &leaf)
	if got := readEntries(t, get("/v1/audit/export?since="+leaf.Time)); len(got) == 0 || got[len(got)-1].Index != last.Index {
		t.Fatalf("export since the last event's time = %v; want it included", got)
	}
	if got := readEntries(t, get("/v1/audit/export?until="+leaf.Time)); len(got) != 0 && got[len(got)-1].Index == last.Index {
		t.Fatal("export until the last event's time includes it")
	}
}

// TestAuditCheckpointWebhook: each new checkpoint goes to a webhook
// subscribed to audit.checkpoint, received by a real HTTP server, with
// the note that verifies with the audit key; one subscribed to other
// types gets none.
func TestAuditCheckpointWebhook(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		type got struct {
			id   string
			body []byte
		}
		received := make(chan got, 16)
		var mu sync.Mutex
		others := 0
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if r.URL.Path == "/other" {
				mu.Lock()
				others++
				mu.Unlock()
			} else {
				received <- got{r.Header.Get("webhook-id"), body}
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(recv.Close)
		for _, hook := range []string{`{"url":"` + recv.URL + `/audit","events":["audit.checkpoint"]}`,
			`{"url":"` + recv.URL + `/other","events":["approval_request.approved"]}`} {
			want(t, b.do(t, req{method: "POST", path: "/v1/webhooks", token: b.admin, body: hook}), http.StatusCreated, "")
		}
		sender := notify.NewWebhookSender(notify.WebhookConfig{AllowPrivate: true})
		e := notify.New(notify.Config{Store: b.st, Render: RequestJSON, PollEvery: 10 * time.Millisecond,
			Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointWebhook: sender}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); e.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done; sender.Close() })

		b.pending(t, "10m")
		if _, err := b.svc.SequenceAudit(context.Background()); err != nil { // the first checkpoint, through the provider
			t.Fatal(err)
		}
		cp, err := b.st.LatestCheckpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		vkey := b.do(t, req{method: "GET", path: "/v1/audit/key", token: b.auditor}).body
		select {
		case g := <-received:
			var body struct {
				Type string
				Data struct {
					TreeSize int64 `json:"tree_size"`
					Note     string
				}
			}
			if err := json.Unmarshal(g.body, &body); err != nil {
				t.Fatal(err)
			}
			if body.Type != "audit.checkpoint" || body.Data.TreeSize != cp.Size || body.Data.Note != string(cp.Note) ||
				g.id != "msg_checkpoint_"+strconv.FormatInt(cp.Size, 10) {
				t.Fatalf("webhook %s %s; want the checkpoint of %d", g.id, g.body, cp.Size)
			}
			if openCheckpoint(t, []byte(body.Data.Note), string(vkey)).size != cp.Size {
				t.Fatal("the webhook's note is of another size")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no audit.checkpoint webhook within 30 s")
		}
		mu.Lock()
		defer mu.Unlock()
		if others != 0 {
			t.Fatalf("a webhook not subscribed to audit.checkpoint got %d deliveries", others)
		}
	})
}

// TestAuditReadsAreHeavy: a page of entries and an export each take a
// heavy read's slot, so a token with its slots in use gets 429 with
// Retry-After, and the read succeeds once a slot is free.
func TestAuditReadsAreHeavy(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.checkpointEvery, o.heavyPerToken = -1, 1 })
	release, err := b.svc.HeavyRead(b.callers["auditor"])
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/audit/entries", "/v1/audit/export"} {
		r := b.do(t, req{method: "GET", path: path, token: b.auditor})
		want(t, r, http.StatusTooManyRequests, airlock.CodeRateLimited)
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("%s refused without Retry-After", path)
		}
	}
	release()
	for _, path := range []string{"/v1/audit/entries", "/v1/audit/export"} {
		want(t, b.do(t, req{method: "GET", path: path, token: b.auditor}), http.StatusOK, "")
	}
	if n := b.svc.HeavyReads(); n != 0 {
		t.Fatalf("%d heavy reads still hold a slot", n)
	}
}
