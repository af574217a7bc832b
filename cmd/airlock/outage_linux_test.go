package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// TestDiskFullAnswers503 fills the disk under the real binary's SQLite
// file: the server's file size limit (RLIMIT_FSIZE, lowered on the running
// process) makes its writes to files fail in the kernel, as on a full
// disk, without root. Writes answer 503 unavailable with Retry-After, an
// MCP call an isError result "unavailable: …", reads still work, /readyz
// says not ready, and each failure is logged once. Once the limit is
// lifted, /readyz and writes work again without a restart, and nothing
// acknowledged is lost, also after a kill -9.
func TestDiskFullAnswers503(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "airlock.db")
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--admin-token", testAdmin}
	srv := startProcess(t, dir, nil, args...)
	c := newAPI(t, srv.URL)
	agent := c.mintToken(testAdmin, "agent", "agent")
	reviewer := c.mintToken(testAdmin, "reviewer", "reviewer")
	inst := c.call("POST", "/v1/instances", agent, `{"name":"disk"}`).want(t, 201, "instance").Str("id")
	path := "/v1/instances/" + inst + "/approval-requests"
	pad := strings.Repeat("x", 4000)
	create := func(n int) resp {
		return c.call("POST", path, agent, fmt.Sprintf(`{"tool":"t","arguments":{"n":%d,"pad":%q}}`, n, pad),
			"Idempotency-Key", fmt.Sprintf("k%d", n))
	}
	acked := map[string]string{} // request ID → acknowledged state
	for n := range 3 {
		acked[create(n).want(t, 201, "create").Str("id")] = "pending"
	}
	var first string
	for id := range acked {
		first = id
		break
	}
	c.call("POST", "/v1/approval-requests/"+first+"/decision", reviewer, `{"status":"denied"}`).want(t, 200, "deny")
	acked[first] = "denied"

	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "disk-full", Version: "v0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: mcpsdk.Bearer{Token: agent, Next: tr}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	inbox := signIn(t, srv.URL, reviewer)

	// The disk is full. A limit of 0 fails every write(2) to a file, so
	// that no write can land in space a file already has (the log, once
	// checkpointed, is rewritten from its start): every write fails, not
	// only those that would grow a file, and the test does not depend on
	// where SQLite's files stand.
	pid := srv.Cmd.Process.Pid
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 0, Max: unix.RLIM_INFINITY}, nil); err != nil {
		t.Fatalf("lower the server's file size limit: %v", err)
	}
	const n = 3
	wantUnavailable(t, create(n), "a create on a full disk", "I/O error")
	wantUnavailable(t, create(n), "the same create again", "I/O error")
	const failed = 2
	wantUnavailable(t, c.call("POST", "/v1/approval-requests/"+firstPending(acked)+"/decision", reviewer, `{"status":"approved"}`),
		"a decision on a full disk", "I/O error")
	c.call("GET", "/v1/approval-requests/"+first, reviewer, "").want(t, 200, "a read on a full disk")
	page := inbox.decide(t, firstPending(acked), "approve")
	if page.StatusCode != 503 || page.Header.Get("Retry-After") != "2" || !strings.Contains(page.body, "Try again shortly") {
		t.Errorf("the inbox's decision on a full disk: %d Retry-After %q; want the 503 page with Retry-After 2:\n%s",
			page.StatusCode, page.Header.Get("Retry-After"), page.body)
	}
	c.call("GET", "/readyz", "", "").want(t, 503, "readyz on a full disk")
	c.call("GET", "/readyz", "", "").want(t, 503, "readyz on a full disk, again")
	c.call("GET", "/healthz", "", "").want(t, 200, "healthz on a full disk")

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "approval_request", Arguments: map[string]any{
		"kind": "agent_request", "title": "Deploy?", "proposal": map[string]any{"mode": "advisory"}, "idempotencyKey": "mcp-1",
	}})
	if err != nil {
		t.Fatalf("MCP call on a full disk: %v", err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.HasPrefix(text, "unavailable: ") || !strings.Contains(text, "retry in 2s") {
		t.Errorf("MCP call on a full disk: isError %v %q; want an isError result \"unavailable: …\" saying to retry", res.IsError, text)
	}

	// Space is freed: no restart.
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}, nil); err != nil {
		t.Fatal(err)
	}
	c.call("GET", "/readyz", "", "").want(t, 200, "readyz once space is freed")
	acked[create(n).want(t, 201, "the failed create, retried once space is freed").Str("id")] = "pending"
	id := firstPending(acked)
	c.call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved"}`).want(t, 200, "a decision once space is freed")
	acked[id] = "approved"
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "approval_request", Arguments: map[string]any{
		"kind": "agent_request", "title": "Deploy?", "proposal": map[string]any{"mode": "advisory"}, "idempotencyKey": "mcp-1",
	}}); err != nil || res.IsError {
		t.Errorf("MCP call once space is freed: %v %v", err, res)
	}
	cs.Close()

	out := srv.Out.String()
	if got := logLines(out, regexp.MustCompile(`level=ERROR msg="store unavailable" method=POST path=`+regexp.QuoteMeta(path)+` .*I/O error`)); got != failed {
		t.Errorf("%d log lines for the %d failed creates, want one each, with the cause:\n%s", got, failed, out)
	}
	if got := logLines(out, regexp.MustCompile(`msg="store unavailable in MCP tool" tool=approval_request`)); got != 1 {
		t.Errorf("%d log lines for the failed MCP call, want 1:\n%s", got, out)
	}
	if got := logLines(out, regexp.MustCompile(`level=ERROR msg="inbox: store unavailable" method=POST path=/requests/`)); got != 1 {
		t.Errorf("%d log lines for the inbox's failed decision, want 1:\n%s", got, out)
	}
	if got := logLines(out, regexp.MustCompile(`level=WARN msg="not ready`)); got != 1 {
		t.Errorf("%d log lines for two not-ready probes, want 1 (when readiness changed):\n%s", got, out)
	}
	if got := logLines(out, regexp.MustCompile(`msg="ready again`)); got != 1 {
		t.Errorf("%d log lines for readiness coming back, want 1:\n%s", got, out)
	}
	if strings.Contains(out, "internal error") {
		t.Errorf("the server logged an internal error; a full disk is unavailable:\n%s", out)
	}

	// Nothing acknowledged is lost, also across a kill -9.
	srv.Kill()
	srv = startProcess(t, dir, nil, args...)
	c.url = srv.URL
	for id, state := range acked {
		if got := c.call("GET", "/v1/approval-requests/"+id, reviewer, "").want(t, 200, "read "+id).Str("state"); got != state {
			t.Errorf("acknowledged request %s is %s, want %s", id, got, state)
		}
	}
}

// firstPending returns an acknowledged pending request.
func firstPending(acked map[string]string) string {
	for id, state := range acked {
		if state == "pending" {
			return id
		}
	}
	return ""
}
