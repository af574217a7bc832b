package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/tcpproxy"
)

// wantUnavailable checks an answer of a store that cannot serve: 503,
// Retry-After, the code unavailable and a detail that says why.
func wantUnavailable(t *testing.T, r resp, what, why string) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable || r.Str("code") != "unavailable" || r.Header.Get("Retry-After") != "2" ||
		!strings.Contains(r.Str("detail"), why) {
		t.Fatalf("%s: %d Retry-After %q %s; want 503 unavailable with Retry-After 2 and a detail saying %q",
			what, r.Status, r.Header.Get("Retry-After"), r.Raw, why)
	}
}

// logLines counts the lines of out that match re.
func logLines(out string, re *regexp.Regexp) int {
	n := 0
	for line := range strings.SplitSeq(out, "\n") {
		if re.MatchString(line) {
			n++
		}
	}
	return n
}

// TestDatabaseDownAnswers503 cuts the network between a server and its
// PostgreSQL (a proxy in the test resets every connection, old and new;
// the database itself, which other tests share, is untouched). Calls
// answer 503 unavailable with Retry-After — REST reads and writes, and
// /mcp — /readyz says not ready, and each failure is logged once. Once the
// network is back, the server serves again without a restart, with
// everything acknowledged before the cut.
func TestDatabaseDownAnswers503(t *testing.T) {
	t.Parallel()
	proxy, db, err := tcpproxy.ForURL(pgSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	srv := startApp(t, map[string]string{"AIRLOCK_DB": db}, "--addr", "127.0.0.1:0", "--admin-token", testAdmin)
	c := newAPI(t, srv.url)
	agent := c.mintToken(testAdmin, "agent", "agent")
	reviewer := c.mintToken(testAdmin, "reviewer", "reviewer")
	inst := c.call("POST", "/v1/instances", agent, `{"name":"pg"}`).want(t, 201, "instance").Str("id")
	path := "/v1/instances/" + inst + "/approval-requests"
	create := func(key string) resp {
		return c.call("POST", path, agent, `{"tool":"t","arguments":{}}`, "Idempotency-Key", key)
	}
	acked := []string{create("k1").want(t, 201, "create").Str("id"), create("k2").want(t, 201, "create").Str("id")}
	c.call("POST", "/v1/approval-requests/"+acked[0]+"/decision", reviewer, `{"status":"denied"}`).want(t, 200, "deny")

	proxy.Cut()
	const why = "database"
	wantUnavailable(t, create("k3"), "a create with the database cut off", why)
	wantUnavailable(t, c.call("GET", "/v1/approval-requests/"+acked[1], agent, ""), "a read with the database cut off", why)
	wantUnavailable(t, c.call("POST", "/v1/approval-requests/"+acked[1]+"/decision", reviewer, `{"status":"approved"}`),
		"a decision with the database cut off", why)
	c.call("GET", "/readyz", "", "").want(t, 503, "readyz with the database cut off")
	c.call("GET", "/readyz", "", "").want(t, 503, "readyz with the database cut off, again")
	mcp := c.call("POST", "/mcp", agent, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Accept", "application/json, text/event-stream")
	if mcp.Status != 503 || mcp.Header.Get("Retry-After") != "2" || !strings.HasPrefix(str(mcp.Body, "error.message"), "unavailable: ") {
		t.Errorf("/mcp with the database cut off: %d Retry-After %q %s; want 503 with Retry-After 2 and a JSON-RPC error \"unavailable: …\"",
			mcp.Status, mcp.Header.Get("Retry-After"), mcp.Raw)
	}

	proxy.Restore()
	c.call("GET", "/readyz", "", "").want(t, 200, "readyz once the database is back")
	acked = append(acked, create("k3").want(t, 201, "the failed create, retried once the database is back").Str("id"))
	c.call("POST", "/v1/approval-requests/"+acked[1]+"/decision", reviewer, `{"status":"approved"}`).want(t, 200, "a decision once the database is back")
	for i, id := range acked {
		want := []string{"denied", "approved", "pending"}[i]
		if got := c.call("GET", "/v1/approval-requests/"+id, reviewer, "").want(t, 200, "read "+id).Str("state"); got != want {
			t.Errorf("acknowledged request %s is %s, want %s", id, got, want)
		}
	}

	out := srv.out.String()
	for _, call := range []struct{ method, path string }{
		{"POST", path}, {"GET", "/v1/approval-requests/" + acked[1]}, {"POST", "/v1/approval-requests/" + acked[1] + "/decision"},
	} {
		re := regexp.MustCompile(`msg=.* method=` + call.method + ` path=` + regexp.QuoteMeta(call.path) + ` `)
		if got := logLines(out, re); got != 1 {
			t.Errorf("%d log lines for the failed %s %s, want 1:\n%s", got, call.method, call.path, out)
		}
	}
	if got := logLines(out, regexp.MustCompile(`level=ERROR msg="store unavailable" .*connect`)); got != 3 {
		t.Errorf("%d store unavailable lines naming the connection's failure, want 3:\n%s", got, out)
	}
	if got := logLines(out, regexp.MustCompile(`msg="store unavailable: authenticate MCP request"`)); got != 1 {
		t.Errorf("%d log lines for the failed /mcp call, want 1:\n%s", got, out)
	}
	if got := logLines(out, regexp.MustCompile(`level=WARN msg="not ready`)); got != 1 {
		t.Errorf("%d log lines for two not-ready probes, want 1:\n%s", got, out)
	}
}

// str reads a string at a dotted path of a decoded JSON object.
func str(m map[string]any, path string) string {
	s, _ := get(m, path).(string)
	return s
}
