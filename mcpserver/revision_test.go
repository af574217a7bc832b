package mcpserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientRevisions are the revisions the SDK client is tested at: its
// default, the newest it offers (2026-07-28, stateless), and pinned to
// 2025-11-25, the newest with sessions.
var clientRevisions = []string{Revision2026, "2025-11-25"}

// clientOptions counts the progress notifications a client receives.
func clientOptions(progress *atomic.Int64) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	}
}

// sessionOptions pins a client to revision, or leaves it its default when
// revision is the newest: the default is what is tested then.
func sessionOptions(revision string) *mcp.ClientSessionOptions {
	if revision == Revision2026 {
		return nil
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: revision}
}

// sdkClientAt connects the Go SDK client over HTTP as c at revision, and
// checks that revision was negotiated.
func (h *httpBundle) sdkClientAt(t *testing.T, c airlock.Caller, revision string, progress *atomic.Int64) *client {
	t.Helper()
	hc := &http.Client{Transport: mcpsdk.Bearer{Token: h.secrets[c.ID]}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, clientOptions(progress)).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: hc}, sessionOptions(revision))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != revision {
		t.Fatalf("negotiated %s, want %s", got, revision)
	}
	return newClient(t, cs)
}

// driveEveryTool calls each of the nine tools at least once as b.agent
// through cl: a request linked to an Airlock session whose decision comes
// on a heartbeat and through approval_status's wait, a work_move approved
// and applied, a cancel, approval_prompt approved; progress, when not nil,
// must have counted approval_prompt's progress notifications.
func driveEveryTool(t *testing.T, b *bundle, cl *client, progress *atomic.Int64) {
	t.Helper()
	item := b.board(t)
	sid := str(cl.ok(ToolSessionOpen, map[string]any{"name": "every tool"}), "sessionId")
	if cols, _ := get(cl.ok(ToolWorkList, map[string]any{}), "columns").([]any); len(cols) != 3 {
		t.Errorf("work_list: %v, want the board's three columns", cols)
	}

	// A question linked to the session: answered, and delivered both to
	// a waiting approval_status and on the next heartbeat.
	id := str(cl.ok(ToolApprovalRequest, requestArgs("every-1", func(m map[string]any) {
		m["sessionId"] = sid
		m["question"] = map[string]any{"choices": []string{"yes", "no"}}
	})), "approvalId")
	if st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id}); str(st, "status") != "pending" {
		t.Errorf("approval_status before the decision: %v", st)
	}
	waited := make(chan map[string]any, 1)
	go func() { waited <- cl.ok(ToolApprovalStatus, map[string]any{"approvalId": id, "waitSeconds": 60}) }()
	awaitWaiters(t, b, 1)
	if _, err := b.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved, Answer: "yes"}); err != nil {
		t.Fatal(err)
	}
	if st := <-waited; str(st, "status") != "approved" || str(st, "answer") != "yes" {
		t.Errorf("approval_status waiting for the decision: %v", st)
	}
	hb := cl.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid})
	if ins, _ := get(hb, "instructions").([]any); len(ins) != 1 || str(ins[0].(map[string]any), "approvalId") != id || str(ins[0].(map[string]any), "answer") != "yes" {
		t.Errorf("the heartbeat after the decision: %v", hb)
	}
	if ins, _ := get(cl.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid}), "instructions").([]any); len(ins) != 0 {
		t.Errorf("a decision delivered twice: %v", ins)
	}

	// A command: applied with its approval.
	mv := str(cl.ok(ToolApprovalRequest, moveArgs("every-2", item.ID, "done")), "approvalId")
	if _, err := b.decide(t, mv, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	if st := cl.ok(ToolApprovalStatus, map[string]any{"approvalId": mv}); str(st, "commandOutcome.status") != "applied" {
		t.Errorf("an approved work_move: %v", st)
	}
	if w := cl.ok(ToolWorkGet, map[string]any{"itemId": item.ID}); str(w, "columnKey") != "done" {
		t.Errorf("work_get after the move: %v", w)
	}

	// A withdrawn request, and an invalid call that says what to fix.
	cancelled := str(cl.ok(ToolApprovalRequest, requestArgs("every-3", func(m map[string]any) { m["sessionId"] = sid })), "approvalId")
	if st := cl.ok(ToolApprovalCancel, map[string]any{"approvalId": cancelled}); str(st, "status") != "cancelled" {
		t.Errorf("approval_cancel: %v", st)
	}
	if got := cl.fail(ToolApprovalRequest, requestArgs("every-4", func(m map[string]any) { m["expiresInMinutes"] = 1 })); !strings.Contains(got, "expiresInMinutes must be between 5 and 10080") {
		t.Errorf("an invalid call: %q", got)
	}

	// Claude Code's permission prompt, approved while it waits.
	done := make(chan map[string]any, 1)
	go func() {
		done <- prompt(t, cl.cs, `{"tool_name":"Bash","input":{"command":"make release"},"tool_use_id":"toolu_every"}`)
	}()
	r := b.pendingPrompt(t, "Bash")
	if _, err := b.decide(t, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	if out := <-done; out["behavior"] != "allow" {
		t.Errorf("approval_prompt: %v, want allow", out)
	}
	if progress != nil && progress.Load() == 0 {
		t.Error("no progress notification while approval_prompt waited")
	}

	if closed := cl.ok(ToolSessionClose, map[string]any{"sessionId": sid}); str(closed, "status") != "closed" {
		t.Errorf("session_close: %v", closed)
	}
}

// TestRevisionsHTTP: the Go SDK client at 2026-07-28 (its default) and
// pinned to 2025-11-25 drives every tool over /mcp.
func TestRevisionsHTTP(t *testing.T) {
	t.Parallel()
	for _, revision := range clientRevisions {
		t.Run(revision, func(t *testing.T) {
			t.Parallel()
			h := setupHTTP(t, nil)
			var progress atomic.Int64
			driveEveryTool(t, h.bundle, h.sdkClientAt(t, h.agent, revision, &progress), &progress)
		})
	}
}

// TestRevisionsStdio: the same over the stdio relay behind `airlock mcp`,
// in process; the relay itself speaks the newest revision to the server.
// At 2026-07-28 a call passes through with its own _meta, so the server's
// progress notifications reach the client; before, the relay's own SDK
// client makes the call, and relays its result only.
func TestRevisionsStdio(t *testing.T) {
	t.Parallel()
	for _, revision := range clientRevisions {
		t.Run(revision, func(t *testing.T) {
			t.Parallel()
			h := setupHTTP(t, nil)
			log := newLogRecorder()
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- RunStdio(t.Context(), StdioConfig{URL: h.url, Token: h.secrets[h.agent.ID], In: inR, Out: outW, Logger: log.logger()})
				outW.Close()
			}()
			var progress atomic.Int64
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, clientOptions(&progress)).
				Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, sessionOptions(revision))
			if err != nil {
				t.Fatal(err)
			}
			if got := cs.InitializeResult().ProtocolVersion; got != revision {
				t.Fatalf("negotiated %s over stdio, want %s", got, revision)
			}
			log.await(t, "the relay's revision", func(r logRecord) bool {
				return r.msg == "relaying MCP over stdio" && r.attrs["revision"] == Revision2026
			})
			counted := &progress
			if revision != Revision2026 {
				counted = nil
			}
			driveEveryTool(t, h.bundle, newClient(t, cs), counted)
			if err := cs.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("RunStdio after EOF: %v, want nil", err)
			}
		})
	}
}

// TestSessionsWithoutTransportSessions: at 2026-07-28 there is no MCP
// transport session (no Mcp-Session-Id, each request its own), yet an
// Airlock session opened by one client is heartbeated by another client of
// the same agent, which receives the decision; the server keeps no SDK
// session between requests.
func TestSessionsWithoutTransportSessions(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	first := h.sdkClientAt(t, h.agent, Revision2026, new(atomic.Int64))
	sid := str(first.ok(ToolSessionOpen, map[string]any{"name": "stateless"}), "sessionId")
	id := str(first.ok(ToolApprovalRequest, requestArgs("sl", func(m map[string]any) { m["sessionId"] = sid })), "approvalId")
	if err := first.cs.Close(); err != nil {
		t.Fatal(err)
	}
	for ss := range h.srv.MCP().Sessions() {
		t.Errorf("an SDK session %q outlived its request", ss.ID())
	}
	if _, err := h.decide(t, id, airlock.DecisionInput{Status: airlock.StateDenied, Note: "not today"}); err != nil {
		t.Fatal(err)
	}
	second := h.sdkClientAt(t, h.agent, Revision2026, new(atomic.Int64))
	hb := second.ok(ToolSessionHeartbeat, map[string]any{"sessionId": sid})
	ins, _ := get(hb, "instructions").([]any)
	if len(ins) != 1 || str(ins[0].(map[string]any), "status") != "denied" || str(hb, "session.status") != "active" {
		t.Errorf("a heartbeat from another client: %v", hb)
	}
	// Another agent's client cannot reach the session.
	if got := h.sdkClientAt(t, h.other, Revision2026, new(atomic.Int64)).fail(ToolSessionHeartbeat, map[string]any{"sessionId": sid}); !strings.Contains(got, "not found") {
		t.Errorf("another agent's heartbeat: %q", got)
	}
}

// modern is a raw 2026-07-28 request's headers, for method (and the tool
// name, for tools/call).
func modern(method, name string) map[string]string {
	m := map[string]string{"Mcp-Protocol-Version": Revision2026, "Mcp-Method": method}
	if name != "" {
		m["Mcp-Name"] = name
	}
	return m
}

// meta is a 2026-07-28 request's _meta.
const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestRevision2026Wire: a request naming MCP-Protocol-Version 2026-07-28 is
// served (no longer refused with 400), without an initialize and without a
// transport session; the hardening applies to it as to every request; and
// what it gets wrong is answered saying what to do. An unknown revision is
// still refused, naming the supported ones.
func TestRevision2026Wire(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, func(c *Config) { c.AllowedHosts = []string{"airlock.internal"} })
	alice := h.secrets[h.agent.ID]
	verifier := h.secrets[h.mint(t, airlock.RoleVerifier, "tools").ID]
	legacy := h.session(t, h.other) // carol's transport session
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta + `}}`
	discover := `{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{` + meta + `}}`
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"work_list","arguments":{},` + meta + `}}`
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for key, val := range m {
			if key != k {
				out[key] = val
			}
		}
		return out
	}

	tests := []struct {
		name   string
		req    raw
		status int
		body   []string // substrings of the response body
	}{
		{"tools/list, no initialize", raw{body: list, secret: alice, header: modern("tools/list", "")}, 200, []string{`"approval_request"`, `"resultType":"complete"`, `"io.modelcontextprotocol/serverInfo"`}},
		{"server/discover lists the revisions", raw{body: discover, secret: alice, header: modern("server/discover", "")}, 200, []string{`"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26"]`, `"instructions":"Airlock asks a person`}},
		{"tools/call", raw{body: call, secret: alice, header: modern("tools/call", "work_list")}, 200, []string{`"structuredContent":{"columns":[]`}},
		{"another token's Mcp-Session-Id is not read", raw{body: list, secret: alice, header: with(modern("tools/list", ""), "Mcp-Session-Id", legacy)}, 200, []string{`"approval_request"`}},
		{"an unknown revision", raw{body: list, secret: alice, header: with(modern("tools/list", ""), "Mcp-Protocol-Version", "2099-01-01")}, 400, []string{`-32022`, `this server speaks 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26`, `"supported":["2026-07-28","2025-11-25","2025-06-18","2025-03-26"]`}},
		{"_meta without the header", raw{body: list, secret: alice}, 400, []string{`-32020`, `Mcp-Protocol-Version header is required`}},
		{"the header without _meta", raw{body: `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, secret: alice, header: modern("tools/list", "")}, 400, []string{`"id":5`, `-32602`, `io.modelcontextprotocol/protocolVersion`}},
		{"no Mcp-Method", raw{body: list, secret: alice, header: map[string]string{"Mcp-Protocol-Version": Revision2026}}, 400, []string{`-32020`, `missing required Mcp-Method header`}},
		{"Mcp-Name naming another tool", raw{body: call, secret: alice, header: modern("tools/call", "work_get")}, 400, []string{`Mcp-Name`, `does not match`}},
		{"initialize is gone", raw{body: `{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2026-07-28",` + meta + `}}`, secret: alice, header: modern("initialize", "")}, 404, []string{`"id":6`, `-32601`, `initialize`}},
		{"GET", raw{method: http.MethodGet, secret: alice, header: modern("", "")}, 405, []string{`POST each request`}},
		{"DELETE", raw{method: http.MethodDelete, secret: alice, header: modern("", "")}, 405, []string{`POST each request`}},
		{"Host evil.com", raw{body: list, secret: alice, header: modern("tools/list", ""), host: "evil.com"}, 403, []string{"Host"}},
		{"Origin of another site", raw{body: list, secret: alice, header: with(modern("tools/list", ""), "Origin", "http://evil.test")}, 403, []string{"Origin"}},
		{"no token", raw{body: list, header: modern("tools/list", "")}, 401, []string{"Bearer"}},
		{"a verifier token", raw{body: list, secret: verifier, header: modern("tools/list", "")}, 403, []string{"may only consume approval tokens"}},
		{"a batch", raw{body: "[" + list + "]", secret: alice, header: modern("tools/list", "")}, 400, []string{"batches are not supported"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := h.do(t, tt.req)
			if resp.StatusCode != tt.status {
				t.Errorf("%d %s\nwant %d", resp.StatusCode, body, tt.status)
			}
			for _, want := range tt.body {
				if !strings.Contains(body, want) {
					t.Errorf("body %s\nlacks %q", body, want)
				}
			}
			if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
				t.Errorf("a 2026-07-28 response names a transport session %q", sid)
			}
		})
	}
	for ss := range h.srv.MCP().Sessions() {
		if ss.ID() != legacy {
			t.Errorf("an SDK session %q outlived its 2026-07-28 request", ss.ID())
		}
	}
}
