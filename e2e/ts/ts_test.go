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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTypeScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat("node_modules/@modelcontextprotocol/sdk/package.json")
	}
	if err == nil {
		_, err = os.Stat("node_modules/standardwebhooks/package.json")
	}
	if err != nil {
		msg := "the TypeScript SDK end-to-end test needs node and `npm ci --prefix e2e/ts`: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "airlock")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/airlock").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const admin = "admin-secret-for-the-ts-e2e"
	serve := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"), "--admin-token", admin,
		"--webhook-allow-private") // the webhook test's receiver listens on loopback
	serve.Env = cleanEnv()
	var serveOut lockedBuffer
	notices, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		serve.Process.Kill()
		serve.Wait()
	})
	url := waitListening(t, notices, &serveOut)

	c := &rest{t: t, url: url}
	agent := c.post(admin, "/v1/tokens", `{"name":"ts agent","role":"agent","scopes":["work:write"]}`, 201)["secret"].(string)
	reviewer := c.post(admin, "/v1/tokens", `{"name":"ts reviewer","role":"reviewer"}`, 201)["secret"].(string)
	c.post(reviewer, "/v1/board/columns", `{"key":"todo","name":"To do"}`, 201)
	c.post(reviewer, "/v1/board/columns", `{"key":"done","name":"Done"}`, 201)
	item := c.post(reviewer, "/v1/work-items", `{"title":"e2e card","column_key":"todo"}`, 201)["id"].(string)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "mcp.test.mjs", "webhooks.test.mjs")
	cmd.Env = append(cleanEnv(),
		"AIRLOCK_BIN="+bin, "AIRLOCK_URL="+url, "AIRLOCK_TOKEN="+agent, "AIRLOCK_ADMIN_TOKEN="+admin,
		"AIRLOCK_REVIEWER_TOKEN="+reviewer, "AIRLOCK_ITEM_ID="+item)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test mcp.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript SDK test failed: %v\nserver output:\n%s", err, serveOut.String())
	}
	if !regexp.MustCompile(`(?m)^ℹ pass [1-9]`).Match(out) || !regexp.MustCompile(`(?m)^ℹ fail 0$`).Match(out) {
		t.Fatal("node --test ran no passing test")
	}
}

// waitListening reads the server's notices until it prints its address,
// then keeps copying them into out.
func waitListening(t *testing.T, notices io.Reader, out *lockedBuffer) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(notices)
		re := regexp.MustCompile(`Airlock listening on (http://\S+) `)
		for sc.Scan() {
			out.WriteLine(sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		close(found)
	}()
	select {
	case url, ok := <-found:
		if !ok {
			t.Fatalf("airlock serve exited before listening:\n%s", out.String())
		}
		return url
	case <-time.After(time.Minute):
		t.Fatalf("airlock serve did not listen within a minute:\n%s", out.String())
	}
	return ""
}

// rest is a minimal REST client for setting up the test.
type rest struct {
	t   *testing.T
	url string
}

func (c *rest) post(token, path, body string, status int) map[string]any {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		c.t.Fatalf("POST %s: %d %s, want %d", path, resp.StatusCode, raw, status)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		c.t.Fatalf("POST %s: %v", path, err)
	}
	return m
}

// cleanEnv is this process's environment without AIRLOCK_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIRLOCK_") {
			env = append(env, kv)
		}
	}
	return env
}

// lockedBuffer collects lines written by one goroutine and read by another.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintln(&b.buf, s)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
