package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestServeThrottlesFailedAuthentication: `airlock serve` counts failed
// authentications of one client address across its doors (REST and /mcp
// here; the inbox's sign-in too), by X-Forwarded-For from a proxy named by
// --trusted-proxies, up to --auth-failure-limit; beyond it, 429 from both
// doors, while another address's valid token works. Its log names the
// address.
func TestServeThrottlesFailedAuthentication(t *testing.T) {
	t.Parallel()
	srv, c := serveNew(t, "--auth-failure-limit", "3", "--trusted-proxies", "127.0.0.1", "--log-level", "warn")
	agent := c.mintToken(testAdmin, "agent", "agent")
	const attacker = "203.0.113.7"
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	rest := func(addr, token string) resp {
		return c.call("GET", "/v1/instances", token, "", "X-Forwarded-For", addr)
	}
	mcp := func(addr, token string) resp {
		return c.call("POST", "/mcp", token, mcpInit, "X-Forwarded-For", addr, "Accept", "application/json, text/event-stream")
	}
	rest(attacker, "airlock_wrong1").want(t, 401, "a first wrong token on REST")
	mcp(attacker, "airlock_wrong2").want(t, 401, "a second, on /mcp")
	rest(attacker, "airlock_wrong3").want(t, 401, "a third, on REST")
	if r := rest(attacker, "airlock_wrong4"); r.Status != 429 || r.Str("code") != "rate_limited" {
		t.Fatalf("a fourth wrong token on REST: %d %s, want 429 rate_limited", r.Status, r.Raw)
	}
	if r := mcp(attacker, "airlock_wrong5"); r.Status != 429 || !strings.Contains(r.Raw, "rate_limited") {
		t.Fatalf("a fifth, on /mcp: %d %s, want 429 rate_limited", r.Status, r.Raw)
	}
	rest("198.51.100.2", agent).want(t, 200, "a valid token from another address")
	if out := srv.out.String(); !strings.Contains(out, fmt.Sprintf(`msg="failed authentication" address=%s failed=1`, attacker)) {
		t.Fatalf("the log does not name the address:\n%s", out)
	}
}
