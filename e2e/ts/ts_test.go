// Package ts runs the end-to-end tests of Airlock with TypeScript
// reference libraries: its MCP server with the official TypeScript SDK
// client (mcp.test.mjs), and its webhooks' signatures with the Standard
// Webhooks library (webhooks.test.mjs). It builds the real binary, starts
// `airlock serve`, mints tokens, sets up a board, and runs the tests with
// node. Install the packages first, pinned by package-lock.json:
//
//	npm ci --prefix e2e/ts
//
// Outside CI the test is skipped when node or node_modules is missing;
// under CI=true it fails instead.
package ts

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestTypeScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat("node_modules/@modelcontextprotocol/sdk/package.json")
	}
	if err == nil {
		_, err = os.Stat("node_modules/standardwebhooks/package.json")
	}
	if err != nil {
		testkit.Unavailable(t, "the TypeScript SDK end-to-end test needs node and `npm ci --prefix e2e/ts`: "+err.Error())
	}

	bin := testkit.Airlock(t, false)
	const admin = "admin-secret-for-the-ts-e2e"
	dir := t.TempDir()
	serve := testkit.Serve(t, bin, "", nil, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"), "--admin-token", admin,
		"--outbound-allow-private") // the webhook test's receiver listens on loopback
	url := serve.URL

	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &rest{t: t, url: url, hc: &http.Client{Transport: tr}}
	agent := c.post(admin, "/v1/tokens", `{"name":"ts agent","role":"agent","scopes":["work:write"]}`, 201)["secret"].(string)
	reviewer := c.post(admin, "/v1/tokens", `{"name":"ts reviewer","role":"reviewer"}`, 201)["secret"].(string)
	c.post(reviewer, "/v1/board/columns", `{"key":"todo","name":"To do"}`, 201)
	c.post(reviewer, "/v1/board/columns", `{"key":"done","name":"Done"}`, 201)
	item := c.post(reviewer, "/v1/work-items", `{"title":"e2e card","column_key":"todo"}`, 201)["id"].(string)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "mcp.test.mjs", "webhooks.test.mjs")
	cmd.Env = append(testkit.CleanEnv(),
		"AIRLOCK_BIN="+bin, "AIRLOCK_URL="+url, "AIRLOCK_TOKEN="+agent, "AIRLOCK_ADMIN_TOKEN="+admin,
		"AIRLOCK_REVIEWER_TOKEN="+reviewer, "AIRLOCK_ITEM_ID="+item)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test mcp.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript SDK test failed: %v\nserver output:\n%s", err, serve.Out)
	}
	if !regexp.MustCompile(`(?m)^ℹ pass [1-9]`).Match(out) || !regexp.MustCompile(`(?m)^ℹ fail 0$`).Match(out) {
		t.Fatal("node --test ran no passing test")
	}
}

// rest is a minimal REST client for setting up the test.
type rest struct {
	t   *testing.T
	url string
	hc  *http.Client
}

func (c *rest) post(token, path, body string, status int) map[string]any {
	c.t.Helper()
	r, err := testkit.Call(c.t.Context(), c.hc, http.MethodPost, c.url+path, token, body)
	if err != nil {
		c.t.Fatalf("POST %s: %v", path, err)
	}
	if r.Status != status {
		c.t.Fatalf("POST %s: %d %s, want %d", path, r.Status, r.Raw, status)
	}
	return r.Body
}
